package grub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/stretchr/testify/require"
)

func rootWith(t *testing.T, files map[string]string) *host.Root {
	t.Helper()
	dir := t.TempDir()
	b := fixture.New(dir)
	for p, c := range files {
		b.File(p, c)
	}
	require.NoError(t, b.Err())
	r, err := host.NewRoot(dir)
	require.NoError(t, err)
	return r
}

func TestConfiguredDebian(t *testing.T) {
	r := rootWith(t, map[string]string{
		"/etc/default/grub": `# If you change this file, run 'update-grub'
GRUB_DEFAULT=0
GRUB_DISTRIBUTOR=` + "`lsb_release -i -s 2> /dev/null || echo Debian`" + `
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX='console=ttyS0  intel_iommu=on'
export GRUB_TIMEOUT=5
`,
		"/etc/default/grub.d/50-cloudimg.cfg": `GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} iommu=pt"` + "\n",
	})
	src, err := Configured(r, "6.8.0")
	require.NoError(t, err)
	require.Equal(t, "grub", src.Kind)
	require.Equal(t, "console=ttyS0 intel_iommu=on quiet iommu=pt", src.Cmdline)
	require.Contains(t, src.File, "50-cloudimg.cfg")
}

// A value with a newline in it (here in single quotes, which keep it, as
// double quotes do) puts a newline into grub.cfg's linux line, where GRUB
// ends the command (see multiline.go): intel_iommu=on would not reach the
// kernel, so check and grub show must not report it configured. They refuse,
// naming the line the value goes on past (this test used to expect
// "console=ttyS0 intel_iommu=on quiet iommu=pt").
func TestConfiguredRefusesNewlineInValue(t *testing.T) {
	r := rootWith(t, map[string]string{
		"/etc/default/grub": "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX='console=ttyS0\n  intel_iommu=on'\n",
	})
	_, err := Configured(r, "")
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, DefaultsFile, pe.File)
	require.Equal(t, 3, pe.Line)
	require.Contains(t, pe.Msg, `GRUB_CMDLINE_LINUX's value goes on past the end of this line`)
	require.Contains(t, pe.Msg, `the kernel gets the arguments before it ("console=ttyS0")`)
}

func TestConfiguredRefusesCommandOutput(t *testing.T) {
	r := rootWith(t, map[string]string{"/etc/default/grub": "X=1\nGRUB_CMDLINE_LINUX=\"$(cat /etc/args)\"\n"})
	_, err := Configured(r, "")
	require.EqualError(t, err, "/etc/default/grub:2: GRUB_CMDLINE_LINUX: built from a command's output ($(...)); gpuprep will not guess its value")
}

func TestConfiguredUnterminatedQuote(t *testing.T) {
	r := rootWith(t, map[string]string{"/etc/default/grub": "A=1\n\nGRUB_CMDLINE_LINUX=\"quiet\n"})
	_, err := Configured(r, "")
	require.EqualError(t, err, "/etc/default/grub:3: GRUB_CMDLINE_LINUX: unterminated double quote")
}

func TestConfiguredBLS(t *testing.T) {
	r := rootWith(t, map[string]string{
		"/etc/default/grub":                        `GRUB_CMDLINE_LINUX="rhgb"`,
		"/boot/loader/entries/abc-5.14.0.conf":     "title Rocky\nlinux /vmlinuz-5.14.0\noptions $kernelopts intel_iommu=on\n",
		"/boot/loader/entries/abc-5.14.0-old.conf": "linux /vmlinuz-5.14.0-old\noptions root=x\n",
		"/boot/grub2/grubenv":                      "# GRUB Environment Block\nkernelopts=root=/dev/sda1 ro\n",
	})
	src, err := Configured(r, "5.14.0")
	require.NoError(t, err)
	require.Equal(t, "bls", src.Kind)
	require.Equal(t, "root=/dev/sda1 ro intel_iommu=on", src.Cmdline)
}

// What check reports configured in /etc/default/grub (+ grub.d) is what
// bash makes of the files, on every fixture the editor is tested on: one
// reading of the files for check and grub (before, check had a lenient
// reader of its own).
func TestConfiguredAgreesWithBash(t *testing.T) {
	needBash(t)
	ents, err := os.ReadDir("testdata")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		name := e.Name()
		if name == "fuzz" || name == "hostile" || name == "nextboot" { // hostile: refused, see bounds_test.go; nextboot: menus, see nextkernel_test.go
			continue
		}
		t.Run(name, func(t *testing.T) {
			r, err := host.NewRoot(filepath.Join("testdata", name))
			require.NoError(t, err)
			src, err := Configured(r, "")
			if strings.HasPrefix(name, "refused-") {
				var pe *ParseError
				require.ErrorAs(t, err, &pe)
				return
			}
			require.NoError(t, err)
			if src.Kind != "grub" {
				return
			}
			want, err := bashSource(t, fixtureFiles(t, name))
			require.NoError(t, err)
			require.Equal(t, want.String(), src.Cmdline)
			n++
		})
	}
	require.Greater(t, n, 10, "fixtures compared with bash")
}
