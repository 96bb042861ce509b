package deviceplugin

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestImageTag(t *testing.T) {
	for image, want := range map[string]string{
		// what the GPU Operator writes: repository/image:version
		"nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.6.0":                   "v1.6.0",
		"registry.local:5000/mirror/kubevirt-gpu-device-plugin:v1.4.0":       "v1.4.0",
		"kubevirt-gpu-device-plugin:v1.2.10@sha256:0123456789abcdef01234567": "v1.2.10",
	} {
		got, err := ImageTag(image)
		require.NoError(t, err, image)
		require.Equal(t, want, got, image)
	}
	for image, want := range map[string]string{
		"nvcr.io/nvidia/kubevirt-gpu-device-plugin@sha256:0123456789abcdef": "pinned by digest",
		"registry.local:5000/kubevirt-gpu-device-plugin":                    "has no tag",
		"kubevirt-gpu-device-plugin:":                                       "has no tag",
	} {
		_, err := ImageTag(image)
		require.ErrorContains(t, err, want, image)
	}
}

func TestUnadvertised(t *testing.T) {
	nodes := map[string][]string{
		"gpu-1": {"cpu", "memory", "nvidia.com/2909"},
		"gpu-2": {"cpu", "nvidia.com/GH100_H100_SXM5_80GB", "devices.kubevirt.io/kvm"},
	}
	require.Equal(t, []string{"nvidia.com/GB100_HGX_B200_168GB"},
		Unadvertised([]string{"nvidia.com/GB100_HGX_B200_168GB", "nvidia.com/GH100_H100_SXM5_80GB"}, nodes))
	require.Empty(t, Unadvertised([]string{"nvidia.com/2909"}, nodes))
	require.Equal(t, []string{"nvidia.com/2909", "nvidia.com/GH100_H100_SXM5_80GB"}, Advertised(nodes))
	require.Nil(t, Advertised(nil))
}
