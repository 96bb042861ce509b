package initramfs

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuprep/gpuprep/internal/host"
)

// Booted is the image kernel kver boots with, read.
type Booted struct {
	Path     string
	Image    *Image    // nil when the image could not be read at all
	Contents *Contents // nil unless the image was read whole
	Err      error     // why it was not read whole; nil when it was
}

// ReadImage reads the image p under root: a regular file only (a device
// node or FIFO is refused; a symlink is followed only inside root).
func ReadImage(root *host.Root, p string, lim Limits) (*Image, error) {
	fi, err := root.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", p, fi.Mode().Type())
	}
	key := cacheKey{root.Dir(), p, fi.Size(), fi.ModTime(), lim}
	if c, ok := readCache.get(key); ok {
		return c.img, c.err
	}
	f, err := root.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := Read(f, lim)
	if err != nil {
		err = fmt.Errorf("%s: %w", p, err)
	}
	readCache.put(key, cached{img, err})
	return img, err
}

// readCache keeps the images read in this process: check, plan and apply
// ask for the same images several times, and one can take a second to
// decompress. A regenerated image has another size or time, so another
// key. An Image is not changed once read.
var readCache = &imageCache{m: map[cacheKey]cached{}}

type cacheKey struct {
	root, path string
	size       int64
	mtime      time.Time
	lim        Limits
}

type cached struct {
	img *Image
	err error
}

type imageCache struct {
	mu sync.Mutex
	m  map[cacheKey]cached
}

func (c *imageCache) get(k cacheKey) (cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *imageCache) put(k cacheKey, v cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= 8 {
		clear(c.m)
	}
	c.m[k] = v
}

// ImageFor finds and reads the image the next boot of kernel kver loads:
// initramfs-tools' /boot/initrd.img-KVER, dracut's
// /boot/initramfs-KVER.img or SUSE's /boot/initrd-KVER, the first that
// exists; else the mkinitcpio preset image (not a -fallback one) that
// holds lib/modules/KVER, mkinitcpio naming images by preset, not by
// kernel. nil when no image is found.
func ImageFor(root *host.Root, kver string) *Booted {
	if kver == "" {
		return nil
	}
	for _, p := range []string{"/boot/initrd.img-" + kver, "/boot/initramfs-" + kver + ".img", "/boot/initrd-" + kver} {
		if _, err := root.Lstat(p); err == nil {
			return readBooted(root, p)
		}
	}
	for _, p := range Images(root) {
		if !strings.HasPrefix(p, "/boot/initramfs-") || strings.HasSuffix(p, "-fallback.img") || !root.Exists(p) {
			continue
		}
		if b := readBooted(root, p); b.Contents != nil && slices.Contains(b.Contents.Kernels, kver) {
			return b
		}
	}
	return nil
}

// ImageAt reads the image at p (a boot entry's initrd), nil when there is
// no file there.
func ImageAt(root *host.Root, p string) *Booted {
	if _, err := root.Lstat(p); err != nil {
		return nil
	}
	return readBooted(root, p)
}

func readBooted(root *host.Root, p string) *Booted {
	img, err := ReadImage(root, p, DefaultLimits)
	b := &Booted{Path: p, Image: img, Err: err}
	if err == nil {
		b.Contents = img.Contents()
	}
	return b
}
