package preflight

// vgpuInstaller is the vGPU manager's installer as remedies name it. NVIDIA's
// .run packages carry the machine name uname -m prints (x86_64, aarch64):
// an arm64 host (Grace) is sent to the aarch64 one.
func (e *Env) vgpuInstaller() string {
	arch := "x86_64"
	if e.ARM64() {
		arch = ArchARM64
	}
	return "NVIDIA-Linux-" + arch + "-VER-vgpu-kvm.run"
}
