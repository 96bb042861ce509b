package kargs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	ps := Parse(`BOOT_IMAGE=/vmlinuz-6.8 root=UUID=ab ro  quiet foo="a b" "bar=c d" intel_iommu=on,sm_on -- init-arg`)
	require.Equal(t, []Param{
		{"BOOT_IMAGE", "/vmlinuz-6.8", true}, {"root", "UUID=ab", true}, {"ro", "", false}, {"quiet", "", false},
		{"foo", "a b", true}, {"bar", "c d", true}, {"intel_iommu", "on,sm_on", true},
	}, ps)
}

func TestSatisfied(t *testing.T) {
	cases := []struct {
		cmdline, want string
		ok            bool
	}{
		{"intel_iommu=on", "intel_iommu=on", true},
		{"intel_iommu=on,sm_on", "intel_iommu=on", true},
		{"intel-iommu=on", "intel_iommu=on", true},
		{"intel_iommu=on intel_iommu=off", "intel_iommu=on", false},
		{"intel_iommu", "intel_iommu=on", false},
		{"intel_iommu=sm_on", "intel_iommu=on", false},
		{"intel_iommu=on,off", "intel_iommu=on", false}, // the kernel applies the options in order
		{"intel_iommu=off,on", "intel_iommu=on", true},
		{"intel_iommu=on intel_iommu=sm_on", "intel_iommu=on", true}, // sm_on does not undo on
		{"intel_iommu=off intel_iommu=on", "intel_iommu=on", true},
		{"", "intel_iommu=on", false},
		{"iommu=1 iommu=pt", "iommu=pt", true},
		{"iommu=pt iommu=1", "iommu=pt", true}, // iommu=1 does not undo passthrough
		{"iommu=pt iommu=nopt", "iommu=pt", false},
		{"iommu.passthrough=1", "iommu=pt", true},
		{"iommu=pt iommu.passthrough=0", "iommu=pt", false},
		{"quiet", "quiet", true},
	}
	for _, c := range cases {
		require.Equal(t, c.ok, Satisfied(Parse(c.cmdline), ParseOne(c.want)), "%q wants %q", c.cmdline, c.want)
	}
}

func TestDisabling(t *testing.T) {
	cases := []struct {
		cmdline, key, by string // by: the occurrence named, "" = not disabled
	}{
		{"intel_iommu=off", "intel_iommu", "intel_iommu=off"},
		{"intel_iommu=on,off", "intel_iommu", "intel_iommu=on,off"},
		{"intel_iommu=off intel_iommu=on", "intel_iommu", ""},
		{"intel_iommu=off,on", "intel_iommu", ""},
		{"intel_iommu=off intel_iommu=sm_on", "intel_iommu", "intel_iommu=off"},
		{"intel_iommu", "intel_iommu", ""},
		{"iommu=off iommu=pt", "iommu", "iommu=off"}, // pt does not clear no_iommu
		{"iommu=pt,off", "iommu", "iommu=pt,off"},
		{"iommu=pt", "iommu", ""},
		{"amd_iommu=off amd_iommu=force_isolation", "amd_iommu", "amd_iommu=off"},
		{"amd-iommu=off", "amd_iommu", "amd-iommu=off"},
	}
	for _, c := range cases {
		p, ok := Disabling(Parse(c.cmdline), c.key)
		require.Equal(t, c.by != "", ok, "%q %s", c.cmdline, c.key)
		if ok {
			require.Equal(t, c.by, p.String(), "%q %s", c.cmdline, c.key)
		}
	}
}

// FuzzParse: no parameter has an empty key (the kernel's next_arg never
// yields one), and writing the parameters back (Param.String) reads back as
// the same parameters.
func FuzzParse(f *testing.F) {
	f.Add(`a=b "c=d e" f`)
	f.Add(`BOOT_IMAGE=/vmlinuz-6.8 root=UUID=ab ro quiet intel_iommu=on,sm_on iommu=pt -- init`)
	f.Add(`=`)
	f.Add(`"a b=c" =x=y "=" x="y z"`)
	f.Fuzz(func(t *testing.T, s string) {
		ps := Parse(s)
		var line []string
		for _, p := range ps {
			require.NotEmpty(t, p.Key, "%q", s)
			line = append(line, p.String())
		}
		again := Parse(strings.Join(line, " "))
		if len(ps) == 0 {
			require.Empty(t, again, "%q", s)
			return
		}
		require.Equal(t, ps, again, "%q written as %q", s, strings.Join(line, " "))
	})
}

// An '=' that starts an argument belongs to its key, as in next_arg.
func TestParseLeadingEquals(t *testing.T) {
	require.Equal(t, []Param{{"=", "", false}, {"=a", "b", true}, {"=x", "", false}, {"c", "", true}},
		Parse(`= =a=b "=x" c=`))
	require.Equal(t, Param{"=a", "b", true}, ParseOne("=a=b"))
	require.Equal(t, Param{"=", "", false}, ParseOne("="))
}

func TestOffIndexes(t *testing.T) {
	cases := []struct {
		cmdline, key string
		want         []int
	}{
		{"quiet iommu=pt iommu=off", "iommu", []int{2}},
		{"iommu=off iommu=pt", "iommu", []int{0}}, // pt does not undo off
		{"iommu=pt", "iommu", nil},
		{"amd_iommu=off,fullflush amd_iommu=pgtbl_v2", "amd_iommu", []int{0}},
		{"intel_iommu=off intel_iommu=on", "intel_iommu", nil}, // the last on/off wins
		{"intel_iommu=on intel_iommu=on,off", "intel_iommu", []int{1}},
		{"intremap=off", "intremap", []int{0}},
		{"nointremap", "intremap", []int{0}},
		{"nointremap intremap=on", "intremap", nil},
		{"intremap=on intremap=nosid nointremap intremap=off", "intremap", []int{2, 3}},
		{"intremap=off,on", "intremap", nil},
		{"intremap=nosid", "intremap", nil},
	}
	for _, c := range cases {
		require.Equal(t, c.want, OffIndexes(Parse(c.cmdline), c.key), c.cmdline)
	}
}

// iommu.passthrough= takes a kstrtobool value; the occurrence that decides
// iommu=pt is named even when it is iommu.passthrough=.
func TestPassthroughDeciding(t *testing.T) {
	cases := []struct {
		cmdline, by string
		on          bool
	}{
		{"iommu.passthrough=1", "iommu.passthrough=1", true},
		{"iommu.passthrough=yes", "iommu.passthrough=yes", true}, // kstrtobool reads the first character
		{"iommu.passthrough=on", "iommu.passthrough=on", true},
		{"iommu=pt iommu.passthrough=off", "iommu.passthrough=off", false},
		{"iommu=pt iommu.passthrough=false", "iommu.passthrough=false", false}, // t/f, e/d too (kernel >= 5.19)
		{"iommu=pt iommu.passthrough=disable", "iommu.passthrough=disable", false},
		{"iommu.passthrough=true", "iommu.passthrough=true", true},
		{"iommu.passthrough=Enable", "iommu.passthrough=Enable", true},
		{"iommu=pt iommu.passthrough=2", "iommu=pt", true}, // not a boolean: ignored
		{"iommu=pt iommu.passthrough", "iommu=pt", true},
		{"iommu.passthrough=0 iommu=pt,force", "iommu=pt,force", true},
		{"iommu=force", "iommu=force", false}, // none decides: the last iommu=
		{"quiet", "", false},
	}
	pt := ParseOne("iommu=pt")
	for _, c := range cases {
		ps := Parse(c.cmdline)
		require.Equal(t, c.on, Satisfied(ps, pt), c.cmdline)
		p, ok := Deciding(ps, pt)
		require.Equal(t, c.by != "", ok, c.cmdline)
		if ok {
			require.Equal(t, c.by, p.String(), c.cmdline)
		}
	}
	p, _ := Deciding(Parse("intel_iommu=on intel_iommu=sm_on"), ParseOne("intel_iommu=on"))
	require.Equal(t, "intel_iommu=on", p.String())
}
