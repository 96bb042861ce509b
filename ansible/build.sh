#!/bin/sh
# Assemble the gpuprep.node Ansible collection: ansible/build.sh OUT BINDIR
#   OUT     the collection directory to make (make ansible-collection: dist/ansible_collections/gpuprep/node)
#   BINDIR  holds gpuprep-linux-amd64 and/or gpuprep-linux-arm64 (make dist's static binaries), each copied in as
#           the binary module plugins/modules/gpuprep_linux_ARCH (see cmd/gpuprep/ansible_module.go)
# The layout is ansible-core v2.14.18's for an installed collection (ansible_collections/NAMESPACE/NAME/ with
# galaxy.yml, meta/runtime.yml, plugins/<type>/, roles/, playbooks/; lib/ansible/utils/collection_loader).
set -eu
out=$1 bins=$2
src=$(dirname "$0")/collection
found=0
rm -rf "$out"
mkdir -p "$out"
cp -R "$src"/. "$out"/
for a in amd64 arm64; do
	b="$bins/gpuprep-linux-$a"
	[ -f "$b" ] || continue
	cp "$b" "$out/plugins/modules/gpuprep_linux_$a"
	chmod 0755 "$out/plugins/modules/gpuprep_linux_$a"
	found=$((found + 1))
done
if [ "$found" -eq 0 ]; then
	echo "ansible/build.sh: no gpuprep-linux-amd64 or gpuprep-linux-arm64 in $bins" >&2
	exit 1
fi
