#!/usr/bin/env bash
# Generates internal/deviceplugin/names/devices.txt: the NVIDIA (vendor 10de)
# device lines of the pci.ids that each release of NVIDIA's sandbox device
# plugin (github.com/NVIDIA/kubevirt-gpu-device-plugin) bundles in its image.
#
# Usage: scripts/deviceplugin-names.sh PCIIDS [OUT]
#   PCIIDS  a clone of github.com/pciutils/pciids (bare or with a work tree),
#           or a directory holding pci.ids.VERSION files (or VERSION/pci.ids)
#   OUT     default: internal/deviceplugin/names/devices.txt
# Needs bash, git (for a clone), awk, sort and sha256sum; nothing of gpuprep.
#
# Where the names come from. The plugin keeps pci.ids in its repository as
# utils/pci.ids (refreshed by its Makefile's update-pcidb target, which
# downloads the PCI ID Project's current file) and its image copies that file
# to /usr/pci.ids: Dockerfile "COPY --from=builder .../utils/pci.ids
# /usr/pci.ids" at v1.2.2-v1.4.0, deployments/container/Dockerfile.distroless
# at v1.5.0-v1.6.0. pkg/device_plugin/device_plugin.go reads
# pciIdsFilePath = "/usr/pci.ids": getDeviceName finds the first line
# starting "10de" (locateVendor), then, skipping lines starting "#" and
# stopping at the first line not starting with a tab, takes the first line
# starting with a tab and the device ID. So only the device lines of vendor
# 10de up to that stop matter (subsystem lines start with two tabs and never
# match), and those are what this script keeps, verbatim.
#
# Each bundled utils/pci.ids is byte for byte a snapshot in pciutils/pciids
# history (sha256 compared here, and against the plugin's tags when written):
#
#   pci.ids     pciutils/pciids commit                    plugin tags
#   2023.05.23  f52a641a814e92b528884c1f285ef72e477105ee  v1.2.2 v1.2.3 v1.2.4
#   2023.11.11  3f3f3313a31957066a50b7e6f2edd3ea7a757b55  v1.2.5 v1.2.6 v1.2.7
#   2024.06.23  d1a17ab854405a4a98407cbf6388b84e1d0cb111  v1.2.8 v1.2.9 v1.2.10 v1.3.0
#   2025.02.12  7af0f1f503389f0258766a1727a7dd1d2bb02771  v1.3.1
#   2025.07.11  461b41990a0e4d4165e21a2f4ce91ba6ca7fea9d  v1.4.0 v1.5.0 v1.6.0
#
# Releases before v1.2.2 (v1.1.1-v1.2.1) are left out on purpose: their
# getDeviceName searched every line of the whole file for the device ID, so
# their names cannot be told from vendor 10de's lines.
#
# Output lines (tab-separated; "#" lines are comments):
#   pciids  VERSION COMMIT SHA256   one per pci.ids, in column order
#   release TAG VERSION             the pci.ids a plugin release bundles
#   device  MASK LINE               LINE: a device line without its leading
#                                   tab; MASK: one 1 or 0 per pciids column
set -euo pipefail

pciids=(
  "2023.05.23 f52a641a814e92b528884c1f285ef72e477105ee e97ddbf60c71ba0a5125878f1dde91d9b0aeaa50c7d074bba376510313fa85d7"
  "2023.11.11 3f3f3313a31957066a50b7e6f2edd3ea7a757b55 25e308dfb29cf6054730c187076c8742624922ab5717fee721d31b0934c8dee9"
  "2024.06.23 d1a17ab854405a4a98407cbf6388b84e1d0cb111 33bd4fd9762e99556748bb7f85a81912c7f742c6226eccf3861d60f4b0ea4d6e"
  "2025.02.12 7af0f1f503389f0258766a1727a7dd1d2bb02771 402d341f0b39e953d2d9a2ce44995cc0648b22c78927c8dced02ebefe38eba9b"
  "2025.07.11 461b41990a0e4d4165e21a2f4ce91ba6ca7fea9d a96cd22db83c10d9141ecd7b14325ed9c936de5ef01d78e7e7e43f070184270b"
)
releases=(
  "v1.2.2 2023.05.23" "v1.2.3 2023.05.23" "v1.2.4 2023.05.23"
  "v1.2.5 2023.11.11" "v1.2.6 2023.11.11" "v1.2.7 2023.11.11"
  "v1.2.8 2024.06.23" "v1.2.9 2024.06.23" "v1.2.10 2024.06.23" "v1.3.0 2024.06.23"
  "v1.3.1 2025.02.12"
  "v1.4.0 2025.07.11" "v1.5.0 2025.07.11" "v1.6.0 2025.07.11"
)

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 PCIIDS-CLONE-OR-DIR [OUT]" >&2
  exit 2
fi
src=$1
here=$(cd "$(dirname "$0")/.." && pwd)
out=${2:-$here/internal/deviceplugin/names/devices.txt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# fetch VERSION COMMIT DEST: the pci.ids of that snapshot.
fetch() {
  if [ -f "$src/pci.ids.$1" ]; then
    cp "$src/pci.ids.$1" "$3"
  elif [ -f "$src/$1/pci.ids" ]; then
    cp "$src/$1/pci.ids" "$3"
  elif git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$src" show "$2:pci.ids" >"$3"
  else
    echo "$src: no pci.ids.$1, no $1/pci.ids, and not a git clone of pciutils/pciids" >&2
    exit 1
  fi
}

# devices FILE: vendor 10de's device lines as getDeviceName scans them.
devices() {
  awk '
    !found { if (substr($0, 1, 4) == "10de") found = 1; next }
    substr($0, 1, 1) == "#" { next }
    substr($0, 1, 1) != "\t" { exit }
    substr($0, 2, 1) != "\t" { print substr($0, 2) }
    END { if (!found) { print "no line starting 10de" > "/dev/stderr"; exit 1 } }
  ' "$1"
}

n=${#pciids[@]}
: >"$tmp/all"
for i in "${!pciids[@]}"; do
  read -r ver commit sum <<<"${pciids[$i]}"
  fetch "$ver" "$commit" "$tmp/pci.ids"
  got=$(sha256sum <"$tmp/pci.ids" | cut -d' ' -f1)
  if [ "$got" != "$sum" ]; then
    echo "pci.ids $ver: sha256 $got, want $sum (the plugin's utils/pci.ids)" >&2
    exit 1
  fi
  if grep -q $'\r' "$tmp/pci.ids"; then
    echo "pci.ids $ver: carriage returns: not the format this script assumes" >&2
    exit 1
  fi
  devices "$tmp/pci.ids" >"$tmp/dev"
  if LC_ALL=C grep -v -q -E $'^[0-9a-f]{4} ' "$tmp/dev"; then
    echo "pci.ids $ver: a device line not starting with 4 hex digits and a space" >&2
    exit 1
  fi
  if [ -n "$(cut -c1-4 "$tmp/dev" | LC_ALL=C sort | uniq -d)" ]; then
    echo "pci.ids $ver: a device ID twice under 10de: one line per ID assumed" >&2
    exit 1
  fi
  awk -v i="$i" '{ print i "\t" $0 }' "$tmp/dev" >>"$tmp/all"
done

{
  echo "# Generated by scripts/deviceplugin-names.sh from pciutils/pciids history: do not edit."
  echo "# Vendor 10de device lines of the pci.ids NVIDIA/kubevirt-gpu-device-plugin bundles (utils/pci.ids)."
  for p in "${pciids[@]}"; do
    read -r ver commit sum <<<"$p"
    printf 'pciids\t%s\t%s\t%s\n' "$ver" "$commit" "$sum"
  done
  for r in "${releases[@]}"; do
    read -r tag ver <<<"$r"
    printf 'release\t%s\t%s\n' "$tag" "$ver"
  done
  LC_ALL=C awk -F'\t' -v n="$n" '
    { i = $1; line = substr($0, length(i) + 2)
      if (!(line in mask)) { order[++k] = line; m = ""; for (j = 0; j < n; j++) m = m "0"; mask[line] = m }
      mask[line] = substr(mask[line], 1, i) "1" substr(mask[line], i + 2) }
    END { for (j = 1; j <= k; j++) printf "device\t%s\t%s\n", mask[order[j]], order[j] }
  ' "$tmp/all" | LC_ALL=C sort -t$'\t' -k3,3 -k2,2r
} >"$tmp/out"
mv "$tmp/out" "$out"
echo "wrote $out ($(grep -c '^device' "$out") device lines, ${#releases[@]} releases)" >&2
