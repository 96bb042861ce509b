package deviceplugin

import (
	"fmt"
	"strings"
)

// ImageTag is the tag of a container image reference
// ("nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.6.0" -> "v1.6.0"; a digest
// after the tag is ignored). An image pinned by digest alone has no tag to
// tell the release by: an error.
func ImageTag(image string) (string, error) {
	ref := image
	digest := ""
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref, digest = ref[:i], ref[i+1:]
	}
	last := ref[strings.LastIndexByte(ref, '/')+1:]
	i := strings.IndexByte(last, ':')
	if i < 0 || i == len(last)-1 {
		if digest != "" {
			return "", fmt.Errorf("image %q is pinned by digest, without a tag: its release cannot be read from it", image)
		}
		return "", fmt.Errorf("image %q has no tag: its release cannot be read from it", image)
	}
	return last[i+1:], nil
}
