#!/usr/bin/env bash
# `make run`: check this host; where it has no NVIDIA GPU, also show the
# bundled example node (an 8-GPU HGX H200, testdata/roots/hgx-h200).
# make run shows reports, it gates nothing: check's verdict exits (0 ready,
# 1 not ready, 3 not evaluated or no mode judged: see gpuprep check --help)
# are said, not failed on; anything else (2: usage, a crash) fails.
set -uo pipefail
bin=${1:-bin/gpuprep}
said() { # said RC: say what check's exit code RC means; fail on others
  case $1 in
    0 | 1 | 3) printf '\n(gpuprep check exited %s: see the "judged:" line above and gpuprep check --help)\n' "$1" ;;
    *) exit "$1" ;;
  esac
}
"$bin" check
said $?
if ! grep -qsx 0x10de /sys/bus/pci/devices/*/vendor; then
  printf '\n=== No NVIDIA GPU on this host: the bundled example node (gpuprep check --root testdata/roots/hgx-h200) ===\n\n'
  "$bin" check --root testdata/roots/hgx-h200
  said $?
fi
exit 0
