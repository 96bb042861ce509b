package vgpu

import "fmt"

// checkOverlap refuses a config that names a GPU twice: an index listed
// twice (devices: [0, 0]), in one device set or in two, or a set for all
// GPUs beside any other set. Counted twice, such a GPU would pass the
// capacity check once per mention and be planned more vGPUs than it has.
// vgpu-device-manager walks each GPU once per device set and asks whether
// the set's list contains its index (VGPUConfigSpec.MatchesDevices), so a
// repeated index never means "twice" there either; a GPU in two sets gets
// one set's vGPU devices and then the other's, which no capacity check of
// one GPU can pass as written.
func checkOverlap(file, name string, sets []DeviceSet) error {
	seen := map[int]int{} // index -> the line that named it first
	for i, s := range sets {
		if s.Devices.All && len(sets) > 1 {
			return fmt.Errorf("%s:%d: vgpu-configs.%s[%d]: devices: all, and %s has %d other device set(s): every GPU would be configured twice", file, s.line, name, i, name, len(sets)-1)
		}
		for k, idx := range s.Devices.Indices {
			line := s.line
			if k < len(s.Devices.lines) {
				line = s.Devices.lines[k]
			}
			if first, dup := seen[idx]; dup {
				return fmt.Errorf("%s:%d: vgpu-configs.%s[%d]: devices: GPU index %d is already named on line %d", file, line, name, i, idx, first)
			}
			seen[idx] = line
		}
	}
	return nil
}
