package grub

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// pickMenu restates GRUB's choice of the default entry (grub-core/normal/
// menu.c, grub 2.06/2.12: run_menu, get_entry_number, menuentry_eq,
// grub_menu_execute_entry; grub-core/kern/misc.c grub_strtoull) on Debian
// 12's generated menu: entry 0 boots 6.1.0-18, entry 1 is the submenu
// (0: 6.1.0-18, 1: its recovery, 2: 6.1.0-17, 3: its recovery).
func TestPickMenuAsGRUB(t *testing.T) {
	items, _, err := parseMenu([]byte(debianMenu(t, "0", "/boot")))
	require.NoError(t, err)
	const id = "3f2c9a0e-5b1d-4c7e-9f0a-2d6b8e4c1a77"
	for def, want := range map[string]string{
		"0":   "Debian GNU/Linux",
		"":    "Debian GNU/Linux",
		"1":   "Debian GNU/Linux, with Linux 6.1.0-18-amd64", // a submenu: its entry 0 ("default" unset)
		"1>2": "Debian GNU/Linux, with Linux 6.1.0-17-amd64",
		// an index that is no entry of its level is that level's entry 0
		"1>9": "Debian GNU/Linux, with Linux 6.1.0-18-amd64",
		"9>2": "Debian GNU/Linux",
		// a plain entry boots, whatever follows it
		"0>2": "Debian GNU/Linux",
		// grub_strtoul with base 0: hex, octal, digits up to the first other byte
		"1>0x2":                  "Debian GNU/Linux, with Linux 6.1.0-17-amd64",
		"1>03":                   "Debian GNU/Linux, with Linux 6.1.0-17-amd64 (recovery mode)",
		"1>2 abc":                "Debian GNU/Linux, with Linux 6.1.0-17-amd64",
		"1>99999999999999999999": "Debian GNU/Linux, with Linux 6.1.0-18-amd64", // overflow: no number
		// titles and ids, level by level
		"Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux 6.1.0-17-amd64": "Debian GNU/Linux, with Linux 6.1.0-17-amd64",
		"gnulinux-advanced-" + id + ">gnulinux-6.1.0-17-amd64-advanced-" + id:               "Debian GNU/Linux, with Linux 6.1.0-17-amd64",
		"gnulinux-advanced-" + id + ">gnulinux-5.10.0-9-amd64-advanced-" + id:               "Debian GNU/Linux, with Linux 6.1.0-18-amd64",
		"Debian GNU/Linux, with Linux 6.1.0-17-amd64":                                       "Debian GNU/Linux", // not at the top level
	} {
		it := pickMenu(items, def)
		require.NotNil(t, it, def)
		require.Equal(t, want, it.title, "default %q", def)
	}
	require.Equal(t, [2]string{"a>b", "c>d"}, func() [2]string { p, r := cutDefault("a>>b>c>d"); return [2]string{p, r} }())
}
