package vfio

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// vfioGroupGetStatus is VFIO_GROUP_GET_STATUS, _IO(';', 100 + 3), from
// include/uapi/linux/vfio.h.
const vfioGroupGetStatus = 0x3b67

const vfioGroupFlagsViable = 1 << 0

// ErrGroupBusy: the group is open elsewhere (a VM holds it).
var ErrGroupBusy = errors.New("in use (open elsewhere, e.g. by a VM)")

// GroupViable opens /dev/vfio/<group> on the live host and asks the kernel
// (VFIO_GROUP_GET_STATUS) whether the group is viable: every device in it
// bound to a VFIO driver, a driver that manages DMA itself, or none.
func GroupViable(group string) (bool, error) {
	f, err := os.OpenFile("/dev/vfio/"+group, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, syscall.EBUSY) {
			return false, ErrGroupBusy
		}
		return false, err
	}
	defer f.Close()
	st := struct{ argsz, flags uint32 }{argsz: 8}
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), vfioGroupGetStatus, uintptr(unsafe.Pointer(&st))); errno != 0 {
		return false, errno
	}
	return st.flags&vfioGroupFlagsViable != 0, nil
}
