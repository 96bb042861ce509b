package preflight

import "testing"

func TestKernelAtLeast(t *testing.T) {
	for _, c := range []struct {
		release string
		want    bool
	}{
		{"5.6.0", true},
		{"5.6", true},
		{"6.8.0-45-generic", true},
		{"5.15.0-91-generic", true},
		{"10.0.1", true},
		{"5.5.19", false},
		{"5.4.0-150-generic", false},
		{"4.18.0-553.el8_10.x86_64", false},
		{"3.10.0-1160.el7.x86_64", false},
		{"", false},
		{"5", false},
		{"linux", false},
		{"5.x", false},
	} {
		if got := kernelAtLeast(c.release, 5, 6); got != c.want {
			t.Errorf("kernelAtLeast(%q, 5, 6) = %v, want %v", c.release, got, c.want)
		}
	}
}
