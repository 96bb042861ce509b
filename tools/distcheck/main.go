// Command distcheck checks make dist's output directory as gpuprep fleet
// will read its files: SHA256SUMS names exactly the gpuprep-linux-<arch>
// files there, with their digests, and each is a static (no interpreter)
// Linux executable of the architecture its name says.
//
//	go run ./tools/distcheck dist
package main

import (
	"fmt"
	"os"

	"github.com/gpuprep/gpuprep/internal/fleet"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: distcheck DIR")
		os.Exit(2)
	}
	bins, err := fleet.CheckDist(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "distcheck:", err)
		os.Exit(1)
	}
	for _, b := range bins {
		fmt.Printf("%s: static %s executable, sha256 %s\n", b.Path, b.Arch, b.SHA256)
	}
}
