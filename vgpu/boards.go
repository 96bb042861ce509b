package vgpu

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/internal/pciids"
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

// family is the letter and digits a data-center board name or a vGPU type
// name starts with: "H100" for "H100 PCIe", "H100XM-80C" and "H100-80C",
// "L40" for "L40S" and "L40S-24Q", "T4" for "T4-1Q"; "" when s does not start
// with one upper-case letter and a digit ("RTXA6000-24Q", "GB200 …").
func family(s string) string {
	if len(s) < 2 || s[0] < 'A' || s[0] > 'Z' || s[1] < '0' || s[1] > '9' {
		return ""
	}
	i := 1
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// BoardFamily is the family of the data-center board a GPU's pci.ids name
// names ("GH100 [H100 PCIe]" → "H100", "TU104GL [Tesla T4]" → "T4"), or ""
// when it cannot be told from the name (consumer and workstation boards,
// names of other shapes).
func BoardFamily(pciName string) string {
	b := boardName(pciName)
	switch {
	case !strings.Contains(pciName, "["):
		return "" // no bracketed board name: a chip name only
	case strings.Contains(b, "/"):
		return "" // boards that share the device ID: "A2 / A16"
	}
	b = strings.TrimPrefix(b, "Tesla ")
	first, _, _ := strings.Cut(b, " ")
	first, _, _ = strings.Cut(first, "-") // A100-SXM4-40GB
	return family(first)
}

// TypeFitsBoard reports whether a vGPU type named by a config ("H200X-141C",
// "NVIDIA A10-12Q", "GRID T4-1Q") can be one of the GPU's, judged by names
// only: NVIDIA's vGPU type names start with the board's family (H100 PCIe:
// H100-80C, H100 SXM: H100XM-80C, H200 SXM: H200X-141C, L40S: L40S-24Q).
// It is false only when both families are known and differ: a name it
// cannot tell (an unknown board, a type of another shape) fits.
func TypeFitsBoard(typeName, pciName string) bool {
	for _, p := range []string{"NVIDIA ", "GRID "} {
		typeName = strings.TrimPrefix(typeName, p)
	}
	tf, bf := family(typeName), BoardFamily(pciName)
	return tf == "" || bf == "" || tf == bf
}

// BoardNames returns the pci.ids name of each NVIDIA GPU (by address): from
// the root's pci.ids, else the embedded copy when the root's does not know
// the device; "" when neither does.
func BoardNames(root *host.Root, gpus []GPUInfo) map[string]string {
	ids := make([]pciids.ID, 0, len(gpus))
	for _, g := range gpus {
		ids = append(ids, pciids.ID{Vendor: "10de", Device: g.DeviceID})
	}
	found := pciids.Lookup(root, ids)
	var missing []pciids.ID
	for _, id := range ids {
		if found.Devices[id] == "" {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		for id, n := range pciids.Embedded(missing).Devices {
			found.Devices[id] = n
		}
	}
	out := map[string]string{}
	for _, g := range gpus {
		out[g.Address] = found.Devices[pciids.ID{Vendor: "10de", Device: g.DeviceID}]
	}
	return out
}

// WantsFitBoards refuses a config (file, name) that asks a GPU for a vGPU
// type its board cannot have, judged by names (TypeFitsBoard): boards maps
// each GPU's address to its pci.ids name. offered, when not nil, lists the
// types a GPU offers now: a GPU that offers the type is never refused.
func WantsFitBoards(file, name string, wants []Want, boards map[string]string, offered func(gpu string) []Type) error {
	type key struct{ typ, board string }
	gpus := map[key][]string{}
	var order []key
	for _, w := range wants {
		n := boards[w.GPU]
		if w.Count == 0 || TypeFitsBoard(w.Type, n) {
			continue
		}
		if offered != nil && slices.ContainsFunc(offered(w.GPU), func(t Type) bool { return TypeMatches(w.Type, t.Name) }) {
			continue
		}
		k := key{w.Type, pci.DisplayName("NVIDIA Corporation", n)}
		if len(gpus[k]) == 0 {
			order = append(order, k)
		}
		if !slices.Contains(gpus[k], w.GPU) {
			gpus[k] = append(gpus[k], w.GPU)
		}
	}
	if len(order) == 0 {
		return nil
	}
	var bad []string
	for _, k := range order {
		bad = append(bad, fmt.Sprintf("%q on %s %s", k.typ, k.board, strings.Join(gpus[k], ", ")))
	}
	return fmt.Errorf("%s: config %q asks for vGPU types these GPUs cannot have: %s (NVIDIA vGPU type names start with the board's name); choose or write a config for these GPUs", file, name, strings.Join(bad, "; "))
}
