package iommu

import (
	"encoding/binary"
	"fmt"
)

// IORT is what an ACPI IORT (IO Remapping Table, Arm's counterpart of DMAR
// and IVRS) describes: its SMMUs, and its ITS groups (the GICv3 ITSes that
// translate MSIs). Layout from ACPICA include/acpi/actbl2.h (struct
// acpi_table_iort, acpi_iort_node; ARM DEN 0049): a 36-byte ACPI header,
// node_count (u32 at 36), node_offset (u32 at 40); each node: type (u8),
// length (u16 at 1), revision, identifier, mapping_count, mapping_offset;
// an SMMUv3 node's data starts with its base address (u64 at 16).
type IORT struct {
	SMMUv3    []uint64 // base addresses of the SMMUv3 nodes
	SMMUv2    int      // SMMUv1/v2 nodes
	ITSGroups int
}

// IORT node types (enum acpi_iort_node_type).
const (
	iortITSGroup = 0x00
	iortSMMU     = 0x03
	iortSMMUv3   = 0x04
)

// maxIORTNodes bounds the nodes read from a table (a hostile or corrupt
// one may claim any count).
const maxIORTNodes = 4096

// HasSMMU reports whether the table describes an SMMU.
func (t IORT) HasSMMU() bool { return len(t.SMMUv3) > 0 || t.SMMUv2 > 0 }

// ParseIORT reads the nodes of an IORT table as the kernel's
// drivers/acpi/arm64/iort.c walks them, refusing a table whose lengths
// point outside it.
func ParseIORT(b []byte) (IORT, error) {
	var t IORT
	if len(b) < 48 || string(b[:4]) != "IORT" {
		return t, fmt.Errorf("not an IORT table (%d bytes)", len(b))
	}
	if n := binary.LittleEndian.Uint32(b[4:8]); int64(n) > int64(len(b)) || n < 48 {
		return t, fmt.Errorf("IORT header length %d, table has %d bytes", n, len(b))
	} else {
		b = b[:n]
	}
	count := binary.LittleEndian.Uint32(b[36:40])
	off := int64(binary.LittleEndian.Uint32(b[40:44]))
	if count > maxIORTNodes {
		return t, fmt.Errorf("IORT claims %d nodes", count)
	}
	for i := uint32(0); i < count; i++ {
		if off < 48 || off+16 > int64(len(b)) {
			return t, fmt.Errorf("IORT node %d at offset %d lies outside the table", i, off)
		}
		typ := b[off]
		length := int64(binary.LittleEndian.Uint16(b[off+1 : off+3]))
		if length < 16 || off+length > int64(len(b)) {
			return t, fmt.Errorf("IORT node %d at offset %d has length %d", i, off, length)
		}
		switch typ {
		case iortITSGroup:
			t.ITSGroups++
		case iortSMMU:
			t.SMMUv2++
		case iortSMMUv3:
			if length < 24 {
				return t, fmt.Errorf("IORT SMMUv3 node %d is %d bytes", i, length)
			}
			t.SMMUv3 = append(t.SMMUv3, binary.LittleEndian.Uint64(b[off+16:off+24]))
		}
		off += length
	}
	return t, nil
}
