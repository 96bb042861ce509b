package vgpu

import (
	"strings"
	"unicode"
)

// boardName is the marketing name of an NVIDIA GPU from its pci.ids name:
// the part in brackets ("GH100 [H100 PCIe]" → "H100 PCIe"), else the whole
// name.
func boardName(pciName string) string {
	if i := strings.IndexByte(pciName, '['); i >= 0 {
		if j := strings.IndexByte(pciName[i:], ']'); j > 0 {
			return strings.TrimSpace(pciName[i+1 : i+j])
		}
	}
	return strings.TrimSpace(pciName)
}

// ConsumerBoard reports whether a GPU's pci.ids name (an NVIDIA device)
// names a consumer GeForce or TITAN board, which NVIDIA vGPU does not
// support, and returns the board's name ("GeForce RTX 4090"). It is
// conservative: an unknown name, or one that also names a professional or
// data-center line (old pci.ids entries such as "Quadro FX 330/GeForce PCX
// 5300"), is not taken for one.
func ConsumerBoard(pciName string) (string, bool) {
	b := boardName(pciName)
	l := strings.ToLower(b)
	for _, pro := range []string{"quadro", "tesla", "nvs", "grid", "rtx a", "rtx pro"} {
		if strings.Contains(l, pro) {
			return "", false
		}
	}
	for _, w := range strings.FieldsFunc(l, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if w == "geforce" || w == "titan" {
			return b, true
		}
	}
	return "", false
}
