#!/usr/bin/env bash
# Runs every fuzz target for a bounded number of executions (make fuzz; make test runs it). go test -fuzz takes one
# target per package per run, hence the loop. Counts, not durations: Go 1.26's fuzz coordinator can report "context
# deadline exceeded" as a failure when -fuzztime runs out while a worker is busy (go.dev/issue/75804, fixed in Go
# 1.27). The counts keep the whole run near a minute on a 2-core machine; FUZZ_SCALE multiplies them (FUZZ_SCALE=10
# for a longer hunt). A failing input is written to the package's testdata/fuzz/<target>/ and fails the run.
set -euo pipefail
GO=${GO:-go}
scale=${FUZZ_SCALE:-1}
# package  target  executions
targets=(
	"./grub               FuzzEnsure          3000"
	"./grub               FuzzCommandNames    3000"
	"./internal/kargs     FuzzParse           20000"
	"./internal/fleet     FuzzParseInventory  4000"
	"./internal/fleet     FuzzExpandRange     4000"
	"./internal/fleet     FuzzPyLiteral       20000"
	"./internal/fleet     FuzzSSHConfig       4000"
	"./vgpu               FuzzParseConfig     10000"
	"./report             FuzzRender          3000"
	"./internal/snapshot  FuzzUnpack          1500"
	"./internal/initramfs FuzzRead            3000"
)
# Every Fuzz function in the tree must be listed above.
for f in $(grep -rhoE '^func Fuzz[A-Za-z0-9_]+' --include='*_test.go' . | sed 's/^func //' | sort -u); do
	printf '%s\n' "${targets[@]}" | grep -qE "[[:space:]]$f[[:space:]]" || { echo "fuzz: $f is not in scripts/fuzz.sh" >&2; exit 1; }
done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${targets[@]}"; do
	read -r pkg name n <<<"$t"
	start=$SECONDS
	"$GO" test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$((n * scale))x" >"$log" 2>&1 || {
		cat "$log"
		echo "fuzz: $name ($pkg) failed" >&2
		exit 1
	}
	echo "fuzz: $name ($pkg): $((n * scale)) runs, $((SECONDS - start))s"
done
