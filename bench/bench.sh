#!/usr/bin/env bash
# bench/bench.sh: performance figures for `gpuprep check`.
#
# Run from the repository root: bash bench/bench.sh
#   BENCH_STRICT=1  exit 1 when a target below is missed (default: report only)
#   BENCH_RUNS=N    hyperfine runs per command (default 50)
#
# Targets:
#   gpuprep check on the hgx-h200 fixture: median <= 25 ms, peak RSS <= 40 MiB
#   gpuprep check on this host: median no slower than `virt-host-validate qemu`
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

RUNS=${BENCH_RUNS:-50}
WARMUP=5
RSS_RUNS=5
TARGET_HGX_MS=25
TARGET_HGX_RSS_MIB=40

log() { printf '\n== %s\n' "$*"; }

# --- tools --------------------------------------------------------------------
SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi

apt_install() {
	export DEBIAN_FRONTEND=noninteractive
	if ! "${SUDO[@]}" apt-get install -y --no-install-recommends "$@"; then
		"${SUDO[@]}" apt-get update
		"${SUDO[@]}" apt-get install -y --no-install-recommends "$@"
	fi
}

missing=()
command -v hyperfine >/dev/null 2>&1 || missing+=(hyperfine)
command -v virt-host-validate >/dev/null 2>&1 || missing+=(libvirt-clients)
[ -x /usr/bin/time ] || missing+=(time)
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	apt_install "${missing[@]}"
fi

# --- build --------------------------------------------------------------------
log "building bin/gpuprep"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/gpuprep ./cmd/gpuprep

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FIX=$TMP/hgx-h200
log "building the hgx-h200 fixture in $FIX"
go run ./internal/fixture/mkroot hgx-h200 "$FIX"

# --- in-process benchmarks ----------------------------------------------------
log "Go benchmarks (in process, no command runner)"
go test -run '^$' -bench . -benchmem ./preflight/

# --- whole-process timings ----------------------------------------------------
# median_ms NAME IGNORE_FAILURE CMD...: hyperfine, prints the median in ms.
median_ms() {
	local name=$1 ign=$2
	shift 2
	local json=$TMP/$name.json
	local args=(--warmup "$WARMUP" --runs "$RUNS" -N --style basic --export-json "$json")
	if [ "$ign" = 1 ]; then args+=(-i); fi
	hyperfine "${args[@]}" "$*" >&2
	# hyperfine writes times in seconds; one result per file.
	awk -F: '/"median"/ { gsub(/[ ,]/, "", $2); printf "%.2f\n", $2 * 1000; exit }' "$json"
}

# peak_mib CMD...: the largest max RSS over RSS_RUNS runs, in MiB.
peak_mib() {
	local max=0 kib i
	for ((i = 0; i < RSS_RUNS; i++)); do
		/usr/bin/time -f %M -o "$TMP/rss" "$@" >/dev/null 2>&1 || true
		kib=$(tail -n 1 "$TMP/rss")
		if [ "$kib" -gt "$max" ]; then max=$kib; fi
	done
	awk -v k="$max" 'BEGIN { printf "%.1f\n", k / 1024 }'
}

log "whole-process timings (hyperfine, $WARMUP warm-up + $RUNS runs each)"
hgx_ms=$(median_ms hgx 0 bin/gpuprep check --root "$FIX" -o json)
live_ms=$(median_ms live 1 bin/gpuprep check -o json)
vhv_ms=$(median_ms vhv 1 virt-host-validate qemu)

log "peak RSS (/usr/bin/time, max of $RSS_RUNS runs)"
hgx_rss=$(peak_mib bin/gpuprep check --root "$FIX" -o json)
live_rss=$(peak_mib bin/gpuprep check -o json)
vhv_rss=$(peak_mib virt-host-validate qemu)

# --- summary ------------------------------------------------------------------
log "summary"
printf '%-44s %10s %14s\n' command "median ms" "peak RSS MiB"
printf '%-44s %10s %14s\n' "gpuprep check --root hgx-h200 -o json" "$hgx_ms" "$hgx_rss"
printf '%-44s %10s %14s\n' "gpuprep check -o json (this host)" "$live_ms" "$live_rss"
printf '%-44s %10s %14s\n' "virt-host-validate qemu (this host)" "$vhv_ms" "$vhv_rss"

fail=0
# verdict DESCRIPTION A OP B: OP is le; prints PASS or MISS.
verdict() {
	if awk -v a="$2" -v b="$4" 'BEGIN { exit !(a <= b) }'; then
		printf 'PASS  %s (%s <= %s)\n' "$1" "$2" "$4"
	else
		printf 'MISS  %s (%s > %s)\n' "$1" "$2" "$4"
		fail=1
	fi
}
echo
verdict "hgx-h200 median ms" "$hgx_ms" le "$TARGET_HGX_MS"
verdict "hgx-h200 peak RSS MiB" "$hgx_rss" le "$TARGET_HGX_RSS_MIB"
verdict "this host: gpuprep ms vs virt-host-validate ms" "$live_ms" le "$vhv_ms"

if [ "$fail" = 1 ]; then
	if [ "${BENCH_STRICT:-0}" = 1 ]; then
		echo "bench: a target was missed (BENCH_STRICT=1)" >&2
		exit 1
	fi
	echo "bench: a target was missed (set BENCH_STRICT=1 to fail on it)" >&2
fi
