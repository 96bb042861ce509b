package report

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/preflight"
)

// Item is what the text and Markdown reports show for one finding, or for
// several per-device findings that say the same thing: the same check,
// status and modes, and the same message and remedy once the device's
// address is taken out of them. An 8-GPU node's eight "bound to vfio-pci"
// findings are one Item of 8 devices.
type Item struct {
	Check   string
	Status  preflight.Status
	Modes   []preflight.Mode
	Subject string
	Message string
	Remedy  string
	// Devices are the addresses of a merged item (more than one); nil for
	// a finding shown as it is.
	Devices []string
}

// addrMark stands for the device's address in a finding's message and
// remedy while findings are compared (a finding whose strings hold a NUL,
// as a hostile saved report's may, is not merged).
const addrMark = "\x00"

// statusOrder: what needs attention first, passes last.
var statusOrder = []preflight.Status{preflight.Fail, preflight.Error, preflight.Warn, preflight.Skip, preflight.Pass}

func statusRank(s preflight.Status) int {
	if i := slices.Index(statusOrder, s); i >= 0 {
		return i
	}
	return 0 // a status this gpuprep does not know: as serious as a failure
}

// Items merges fs's per-device findings that say the same thing and orders
// the result by status (failures, errors, warnings, skips, then passes),
// each status in the findings' order. gpus are the report's GPU addresses:
// a merged item of GPUs only is "N GPUs", else "N devices".
func Items(fs []preflight.Finding, gpus []string) []Item {
	var items []Item
	at := map[string]int{} // group key → index in items
	for _, f := range fs {
		key, ok := mergeKey(f)
		if i, seen := at[key]; ok && seen {
			items[i].Devices = append(items[i].Devices, f.Subject)
			continue
		}
		if ok {
			at[key] = len(items)
		}
		items = append(items, Item{Check: f.Check, Status: f.Status, Modes: f.Modes, Subject: f.Subject, Message: f.Message, Remedy: f.Remedy, Devices: []string{f.Subject}})
	}
	for i := range items {
		items[i].merge(gpus)
	}
	slices.SortStableFunc(items, func(a, b Item) int { return statusRank(a.Status) - statusRank(b.Status) })
	return items
}

// mergeKey is what a finding about one device shares with the findings it
// merges with; ok is false for a finding whose subject is not a PCI address.
func mergeKey(f preflight.Finding) (key string, ok bool) {
	if !pci.IsAddress(f.Subject) || strings.Contains(f.Message+f.Remedy, addrMark) {
		return "", false
	}
	ms := make([]string, len(f.Modes))
	for i, m := range f.Modes {
		ms[i] = string(m)
	}
	return strings.Join([]string{f.Check, string(f.Status), strings.Join(ms, ","),
		strings.ReplaceAll(f.Message, f.Subject, addrMark), strings.ReplaceAll(f.Remedy, f.Subject, addrMark)}, "\x00\x00"), true
}

// merge turns an item of several devices into one: the subject counts and
// lists them; in the remedy "--select ADDR" selects them all (--select
// repeated: a line may break between them), and any other mention of the
// address reads ADDR, which the remedy then explains.
func (it *Item) merge(gpus []string) {
	if len(it.Devices) < 2 {
		it.Devices = nil
		return
	}
	first := it.Devices[0]
	noun := "GPUs"
	for _, d := range it.Devices {
		if !slices.Contains(gpus, d) {
			noun = "devices"
		}
	}
	it.Subject = strconv.Itoa(len(it.Devices)) + " " + noun + " (" + strings.Join(it.Devices, ", ") + ")"
	msg := strings.ReplaceAll(it.Message, first, addrMark)
	remedy := strings.ReplaceAll(it.Remedy, first, addrMark)
	remedy = strings.ReplaceAll(remedy, "--select "+addrMark, "--select "+strings.Join(it.Devices, " --select "))
	if strings.Contains(msg+remedy, addrMark) {
		msg = strings.ReplaceAll(msg, addrMark, "ADDR")
		remedy = strings.ReplaceAll(remedy, addrMark, "ADDR")
		if remedy != "" {
			remedy += " (ADDR: each " + strings.TrimSuffix(noun, "s") + "'s address)"
		} else {
			msg += " (ADDR: each " + strings.TrimSuffix(noun, "s") + "'s address)"
		}
	}
	it.Message, it.Remedy = msg, remedy
}

// GPUAddresses are the report's GPU addresses.
func (r *Report) GPUAddresses() []string {
	out := make([]string, len(r.GPUs))
	for i, g := range r.GPUs {
		out[i] = g.Address
	}
	return out
}
