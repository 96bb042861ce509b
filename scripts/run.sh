#!/usr/bin/env bash
# `make run`: check this host; where it has no NVIDIA GPU, also show the
# bundled example node (an 8-GPU HGX H200, testdata/roots/hgx-h200).
set -uo pipefail
bin=${1:-bin/gpuprep}
"$bin" check
rc=$?
if ! grep -qsx 0x10de /sys/bus/pci/devices/*/vendor; then
  printf '\n=== No NVIDIA GPU on this host: the bundled example node (gpuprep check --root testdata/roots/hgx-h200) ===\n\n'
  "$bin" check --root testdata/roots/hgx-h200
fi
exit $rc
