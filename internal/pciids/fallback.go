package pciids

// fillFromEmbedded names, from the embedded copy, the vendors and devices
// of ids that n (read from a root's pci.ids) does not name, and records
// each in n.FromEmbedded. A distribution's pci.ids is as old as its
// package: a GPU newer than it is in the embedded copy, not in it.
func (n *Names) fillFromEmbedded(ids []ID) {
	var missing []ID
	for _, id := range ids {
		if n.Vendors[id.Vendor] == "" || id.Device != "" && n.Devices[id] == "" {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return
	}
	e := Embedded(missing)
	for _, id := range missing {
		if v := e.Vendors[id.Vendor]; v != "" && n.Vendors[id.Vendor] == "" {
			n.Vendors[id.Vendor] = v
			n.markEmbedded(ID{Vendor: id.Vendor})
		}
		if d := e.Devices[id]; d != "" && n.Devices[id] == "" {
			n.Devices[id] = d
			n.markEmbedded(id)
		}
	}
}

func (n *Names) markEmbedded(id ID) {
	if n.FromEmbedded == nil {
		n.FromEmbedded = map[ID]bool{}
	}
	n.FromEmbedded[id] = true
}
