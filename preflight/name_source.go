package preflight

import "github.com/gpuprep/gpuprep/internal/pci"

// nameSource is the evidence for a device name that the host's pci.ids
// lacks and gpuprep's embedded copy gave (a host's copy older than its
// GPU); "" when the host's file named it, or when the host has none (the
// embedded copy names everything then).
func nameSource(e *Env, d *pci.Device) string {
	if d.NameSource != "embedded" || e.Inv.IDsSource == "embedded" || e.Inv.IDsSource == "" {
		return ""
	}
	return "; name from gpuprep's embedded pci.ids: " + e.Inv.IDsSource + " on the host does not list " + d.VendorID + ":" + d.DeviceID
}
