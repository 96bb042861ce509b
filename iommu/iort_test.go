package iommu_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/iommu"
)

func TestParseIORT(t *testing.T) {
	smmus := []uint64{0x11000000, 0x12000000, 0x15000000, 0x16000000, 0x5000000}
	got, err := iommu.ParseIORT(fixture.IORTTable(smmus, 1))
	require.NoError(t, err)
	require.Equal(t, iommu.IORT{SMMUv3: smmus, ITSGroups: 1}, got)
	require.True(t, got.HasSMMU())

	got, err = iommu.ParseIORT(fixture.IORTTable(nil, 2))
	require.NoError(t, err)
	require.False(t, got.HasSMMU())
	require.Equal(t, 2, got.ITSGroups)
}

func TestParseIORTRefusesLengthsOutsideTheTable(t *testing.T) {
	good := fixture.IORTTable([]uint64{0x11000000}, 1)
	for name, edit := range map[string]func(b []byte){
		"header length beyond the file": func(b []byte) { binary.LittleEndian.PutUint32(b[4:], uint32(len(b)+1)) },
		"node offset beyond the table":  func(b []byte) { binary.LittleEndian.PutUint32(b[40:], uint32(len(b))) },
		"node count beyond the nodes":   func(b []byte) { binary.LittleEndian.PutUint32(b[36:], 3) },
		"node of length zero":           func(b []byte) { binary.LittleEndian.PutUint16(b[49:], 0) },
		"node count absurd":             func(b []byte) { binary.LittleEndian.PutUint32(b[36:], 1<<30) },
		"not an IORT":                   func(b []byte) { copy(b, "DMAR") },
	} {
		b := append([]byte(nil), good...)
		edit(b)
		_, err := iommu.ParseIORT(b)
		require.Error(t, err, name)
	}
	_, err := iommu.ParseIORT(good[:20])
	require.Error(t, err)
}
