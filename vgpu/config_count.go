package vgpu

// maxVGPUCount bounds a vgpu-devices count. Planning makes one action per
// vGPU (and where removals free capacity it leaves the count to the kernel),
// so a count of 10^15 would plan until memory ran out. No NVIDIA GPU holds
// more than a few dozen vGPUs (the smallest profiles: 16 per T4, 32 per
// 48 GB board; an SR-IOV GPU one per VF, at most 64); 1024 is far past any.
const maxVGPUCount = 1024
