#!/usr/bin/env bash
# Installs the Debian packages gpuprep's tests need, when missing:
#   pci.ids                     device names on the live host
#   qemu-system-x86 busybox-static cpio xz-utils   the real-kernel e2e testbed
#   etcd-server                 the real kube-apiserver's store (labelling tests)
#   skopeo, umoci               independent OCI readers of make image's layout (tools/ociimage tests)
#   openssh-server sudo         real sshd hosts on loopback (fleet tests)
#   openssh-client              ssh -G, the ssh_config oracle
#   ansible-core                the Ansible inventory oracle (ansible-inventory --list)
#   dropbear-bin                the QEMU guest's SSH server (fleet e2e: testbed.sh ssh)
#   debootstrap                 a scratch Debian root with real grub-mkconfig (grub e2e)
#   chromium                    the HTML report opened in a real headless browser
# Needs root for apt-get; as another user it only says what is missing.
set -euo pipefail
pkgs=(pci.ids qemu-system-x86 busybox-static cpio xz-utils etcd-server openssh-server openssh-client sudo debootstrap chromium dropbear-bin ansible-core skopeo umoci)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "deps: missing Debian packages: ${missing[*]} (run 'make deps' as root)" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; then
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
