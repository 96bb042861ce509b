package report

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWrapWordsNeverBreaksAWord(t *testing.T) {
	s := "bind to VFIO, persistently: 0000:13:00.0 (nvidia → vfio-pci), then /etc/modprobe.d/gpuprep-vfio-and-a-very-long-name.conf and intel_iommu=on"
	for width := 20; width <= 200; width++ {
		lines := WrapWords("   note: ", s, 9, width)
		require.Equal(t, strings.Fields("note: "+s), strings.Fields(strings.Join(lines, " ")), "width %d", width)
		for i, l := range lines {
			if len([]rune(l)) > width {
				require.Len(t, strings.Fields(l), 1, "width %d: only a word alone may exceed: %q", width, l)
			}
			if i > 0 {
				require.True(t, strings.HasPrefix(l, strings.Repeat(" ", 9)), "width %d: %q under its indent", width, l)
			}
		}
	}
	require.Equal(t, []string{"   note:", "         /a/path/longer/than/twenty"}, WrapWords("   note: ", "/a/path/longer/than/twenty", 9, 20))
	require.Equal(t, []string{"run: a b"}, WrapWords("run: ", "a  b", 5, 80))
	require.Equal(t, []string{"lead:"}, WrapWords("lead:", "", 5, 80))
}
