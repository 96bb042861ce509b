package preflight_test

import (
	"io"
	"testing"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/pci"
	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

// benchCheck runs what `gpuprep check -o json` does after flag parsing:
// NewEnv, every check, report.Build and the JSON encoding (to io.Discard).
// Commands are never run (NoRunner), so the live-host figure is the
// file-reading part only.
func benchCheck(b *testing.B, root *host.Root) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		env, err := preflight.NewEnv(root, host.NoRunner{}, pci.Selector{}, "")
		if err != nil {
			b.Fatal(err)
		}
		res, err := preflight.Run(env, preflight.All(), preflight.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := report.JSON(io.Discard, report.Build(env, res, "")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckHGX: the hgx-h200 fixture (8 GPUs behind PCIe switches).
func BenchmarkCheckHGX(b *testing.B) {
	dir := b.TempDir()
	if err := fixture.Build("hgx-h200", dir); err != nil {
		b.Fatal(err)
	}
	root, err := host.NewRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	benchCheck(b, root)
}

// BenchmarkCheckLiveHost: this machine's real root.
func BenchmarkCheckLiveHost(b *testing.B) {
	root, err := host.NewRoot("/")
	if err != nil {
		b.Skipf("live root: %v", err)
	}
	benchCheck(b, root)
}
