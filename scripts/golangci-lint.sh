#!/usr/bin/env bash
# Runs golangci-lint (pinned by tools/golangci, a module of its own so its
# dependencies stay out of gpuprep's) with .golangci.yml over every package.
# The binary is built once and cached in $GPUPREP_TOOLS_DIR (default
# /var/tmp/gpuprep-tools), rebuilt only when tools/golangci changes: about
# 1.5 min cold on 2 cores, then the run itself about 30 s.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${GPUPREP_TOOLS_DIR:-/var/tmp/gpuprep-tools}
mkdir -p "$dir"
stamp=$(cat "$here/tools/golangci/go.mod" "$here/tools/golangci/go.sum" "$(command -v go)" 2>/dev/null | sha256sum | cut -c1-16)
bin=$dir/golangci-lint
if ! { [ -x "$bin" ] && [ "$(cat "$dir/.golangci-stamp" 2>/dev/null)" = "$stamp" ]; }; then
  echo "golangci-lint: building (cold: about 1.5 min on 2 cores)" >&2
  (cd "$here/tools/golangci" && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
  mv "$bin.tmp" "$bin"
  echo "$stamp" > "$dir/.golangci-stamp"
fi
cd "$here"
"$bin" run ./...
"$bin" run --build-tags e2e ./e2e/
