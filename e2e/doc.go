// Package e2e holds the end-to-end tests of gpuprep: `gpuprep check` runs inside a real Debian
// kernel booted under QEMU/TCG with an emulated Intel or AMD IOMMU (e2e/qemu/testbed.sh).
// The tests carry the build tag e2e:
//
//	go test -tags e2e -v -timeout 20m ./e2e/
package e2e
