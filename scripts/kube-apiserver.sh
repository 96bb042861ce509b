#!/usr/bin/env bash
# Builds the real kube-apiserver (tools/kube-apiserver pins k8s.io/kubernetes)
# for the labelling integration tests, once: the binary is cached in
# $GPUPREP_KUBE_DIR (default /var/tmp/gpuprep-kube) and rebuilt only when the
# tools module changes. Prints the binary's path. About 6.5 min cold on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${GPUPREP_KUBE_DIR:-/var/tmp/gpuprep-kube}
mkdir -p "$dir/bin"
stamp=$(cat "$here/tools/kube-apiserver/go.mod" "$here/tools/kube-apiserver/go.sum" | sha256sum | cut -c1-16)
bin=$dir/bin/kube-apiserver
if [ -x "$bin" ] && [ "$(cat "$dir/bin/.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$bin"; exit 0
fi
ver=$(awk '/^require k8s.io\/kubernetes/{print $3}' "$here/tools/kube-apiserver/go.mod")
minor=$(echo "$ver" | cut -d. -f2)
ldf="-s -w -X k8s.io/component-base/version.gitVersion=$ver -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$ver"
echo "kube-apiserver: building $ver (cold: about 6.5 min on 2 cores)" >&2
start=$(date +%s)
(cd "$here/tools/kube-apiserver" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldf" -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
mv "$bin.tmp" "$bin"
echo "$stamp" > "$dir/bin/.stamp"
echo "kube-apiserver: built in $(( $(date +%s) - start )) s" >&2
echo "$bin"
