#!/usr/bin/env bash
# bench/fleet.sh: `gpuprep fleet check` on N loopback hosts against parallel-ssh and Ansible.
#
# Run from the repository root as root: bash bench/fleet.sh   (`make bench` runs it)
#   BENCH_FLEET_N="100 200 400 1000"  the curve: one whole run per N hosts (one OpenSSH sshd each, on
#                            127.77.X.Y:20022), then a table of wall, client CPU per host and peak RSS per N;
#                            an N larger than this machine holds (its memory, 8 MiB per sshd and session, or its
#                            open-file limit) is lowered to what it holds, and says so. One N: that run alone.
#   BENCH_FLEET_PARALLEL=50  hosts at once, for every tool (gpuprep --parallel, parallel-ssh -p, ansible -f)
#   BENCH_STRICT=1           exit 1 when a target below is missed (default: report only)
#   BENCH_FLEET_KEEP=1       keep the work directory (outputs of every run) for a look afterwards
#   BENCH_FLEET_PERF=1       also record a perf profile of a warm run's client (kept with BENCH_FLEET_KEEP=1), and
#                            print the whole machine's CPU by process name during a warm and a parallel-ssh run
#
# In one run, on the same hosts, the same user, the same host-key verification (a known_hosts file) and the
# same key exchange (the sshds offer only curve25519-sha256):
#   1. gpuprep fleet check, cold: the binary is uploaded (all hosts share one home directory, as NFS homes do,
#      so up to PARALLEL uploads of it race: each goes to a temporary name and is linked into place)
#   2. gpuprep fleet check, warm: the cached binary is verified by its stamp and run   } alternating, BENCH_FLEET_ROUNDS
#   3. parallel-ssh -i 'cat /proc/cmdline'                                              } times (3); medians reported
#      and, not a target, parallel-ssh -i 'sudo -n cat /proc/cmdline': the privilege gpuprep runs with     }
#   4. ansible all -m raw -a 'cat /proc/cmdline'
# Each host's gpuprep runs `check --root FIXTURE -o json` under sudo -n, on the hgx-h200 fixture root (8 GPUs,
# 57 PCI functions): a realistic but bounded load. Measured with GNU time: wall, client CPU (user+sys of the
# client and the children it waited for: parallel-ssh's and Ansible's ssh processes) and peak RSS (the largest
# single process). The sshds, sudo and the remote commands share this machine's cores with the clients.
#
# Targets: gpuprep (warm) no slower than parallel-ssh's cat; gpuprep peak RSS <= 64 MiB; the warm run faster
# than the cold one. Installs openssh-server, pssh, ansible-core, sudo and time with apt-get when missing.
# Cleans up every sshd, the bench user, its sudoers rule and all files at exit.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# --- the curve: one run of this script per N, then one table -------------------
NS=${BENCH_FLEET_N:-100 200 400 1000}
if [ "$(wc -w <<<"$NS")" -gt 1 ]; then
	[ "$(id -u)" = 0 ] || { echo "bench/fleet.sh: needs root" >&2; exit 1; }
	avail=$(awk '/^MemAvailable:/{print int($2/1024)}' /proc/meminfo)
	most=$((avail / 8)) # MiB: an sshd listening plus its session's sshd, sudo and gpuprep
	[ "$most" -le $(($(ulimit -n) / 4)) ] || most=$(($(ulimit -n) / 4))
	CURVE=$(mktemp /tmp/gpuprep-fleet-curve.XXXXXX)
	trap 'rm -f "$CURVE"' EXIT
	status=0
	for n in $NS; do
		if [ "$n" -gt "$most" ]; then
			echo "bench/fleet.sh: N=$n is more than this machine holds ($avail MiB available, open files $(ulimit -n)): N=$most" >&2
			n=$most
		fi
		printf '\n######## N=%s (load: %s)\n' "$n" "$(cut -d' ' -f1-3 /proc/loadavg)"
		BENCH_FLEET_N=$n BENCH_FLEET_CURVE_OUT=$CURVE bash "$0" || status=$?
	done
	printf '\n== the curve (%s cores; load at the end %s)\n' "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
	printf '| %5s | %-34s | %7s | %12s | %8s |\n' N client "wall s" "CPU ms/host" "RSS MiB"
	printf '|------:|%s|--------:|-------------:|---------:|\n' "------------------------------------"
	awk -F'\t' '{printf "| %5d | %-34s | %7.2f | %12.2f | %8.1f |\n", $1, $2, $3, $4, $5}' "$CURVE"
	exit $status
fi
N=$NS
P=${BENCH_FLEET_PARALLEL:-50}
PORT=20022
KEX=curve25519-sha256
TARGET_RSS_MIB=64
TMO=600 # seconds, per measured command
BUSER=gpuprep-bench

log() { printf '\n== %s\n' "$*"; }
die() { printf 'bench/fleet.sh: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (a bench user, sudoers rule and 200 sshd with privilege separation)"

# --- tools ---------------------------------------------------------------------
missing=()
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v parallel-ssh >/dev/null 2>&1 || missing+=(pssh)
command -v ansible >/dev/null 2>&1 || missing+=(ansible-core)
command -v sudo >/dev/null 2>&1 || missing+=(sudo)
[ -x /usr/bin/time ] || missing+=(time)
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
fi

# --- cleanup -------------------------------------------------------------------
# Not under /tmp: gpuprep refuses a cache below a directory others can write
# (the shared home is in here); /var/lib and this directory are root's, 0755.
mkdir -p /var/lib/gpuprep-bench && chmod 755 /var/lib/gpuprep-bench
TMP=$(mktemp -d /var/lib/gpuprep-bench/fleet.XXXXXX)
chmod 755 "$TMP"
PIDS=()
SUDOERS=/etc/sudoers.d/gpuprep-fleet-bench
CREATED_USER=0
cleanup() {
	local p
	trap '' INT TERM # finish cleaning up even when interrupted again
	for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]+"${PIDS[@]}"}"; do wait "$p" 2>/dev/null || true; done
	rm -f "$SUDOERS"
	# -f: even while a session sshd has not ended yet still runs as the user
	if [ "$CREATED_USER" = 1 ]; then userdel -f "$BUSER" 2>/dev/null || true; fi
	if [ "${BENCH_FLEET_KEEP:-0}" = 1 ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; rmdir /var/lib/gpuprep-bench 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

addr() { echo "127.77.$(($1 / 250)).$(($1 % 250 + 1))"; }

# --- build and fixture ---------------------------------------------------------
log "building gpuprep and the hgx-h200 fixture"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$TMP/gpuprep" ./cmd/gpuprep
go run ./internal/fixture/mkroot hgx-h200 "$TMP/root" >/dev/null
chmod -R a+rX "$TMP/root"
BIN_SHA=$(sha256sum <"$TMP/gpuprep" | cut -d' ' -f1)
BIN_MIB=$(awk -v b="$(stat -c %s "$TMP/gpuprep")" 'BEGIN{printf "%.1f", b/1048576}')

# --- user, keys, sshds ---------------------------------------------------------
log "starting $N sshd on 127.77.x.y:$PORT (user $BUSER, one shared home)"
HOME_DIR=$TMP/home
if ! id "$BUSER" >/dev/null 2>&1; then
	useradd -M -d "$HOME_DIR" -s /bin/sh "$BUSER"
	CREATED_USER=1
else
	usermod -d "$HOME_DIR" -s /bin/sh "$BUSER"
fi
usermod -p '*' "$BUSER" # no password, yet not locked: sshd without PAM lets keys in
mkdir -p "$HOME_DIR" && chown "$BUSER:" "$HOME_DIR"
echo "$BUSER ALL=(root) NOPASSWD: $HOME_DIR/.cache/gpuprep/*/gpuprep, $(command -v cat) /proc/cmdline" >"$SUDOERS"
chmod 440 "$SUDOERS"
mkdir -p /run/sshd "$TMP/keys"
ssh-keygen -q -t ed25519 -N '' -f "$TMP/client" -C bench
cp "$TMP/client.pub" "$TMP/authorized_keys" && chmod 644 "$TMP/authorized_keys"
cat >"$TMP/sshd_config" <<EOF
AuthorizedKeysFile $TMP/authorized_keys
PidFile none
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
KexAlgorithms $KEX
HostKeyAlgorithms ssh-ed25519
MaxStartups 1000:30:2000
LogLevel ERROR
PermitTTY no
X11Forwarding no
EOF
: >"$TMP/known_hosts"
: >"$TMP/hosts.txt"
{
	echo "apiVersion: gpuprep/v1"
	echo "kind: Inventory"
	echo "defaults: {user: $BUSER, port: $PORT, vars: {gpuprep_root: $TMP/root}}"
	echo "hosts:"
} >"$TMP/fleet.yaml"
echo "[fleet]" >"$TMP/ansible.ini"
for i in $(seq 0 $((N - 1))); do
	a=$(addr "$i")
	ssh-keygen -q -t ed25519 -N '' -f "$TMP/keys/h$i" -C "h$i"
	echo "[$a]:$PORT $(cut -d' ' -f1,2 "$TMP/keys/h$i.pub")" >>"$TMP/known_hosts"
	echo "$a:$PORT" >>"$TMP/hosts.txt"
	echo "  - {name: h$i, address: $a}" >>"$TMP/fleet.yaml"
	echo "h$i ansible_host=$a ansible_port=$PORT" >>"$TMP/ansible.ini"
	/usr/sbin/sshd -D -e -f "$TMP/sshd_config" -o "HostKey=$TMP/keys/h$i" -o "ListenAddress=$a:$PORT" 2>>"$TMP/sshd.log" &
	PIDS+=($!)
done
for i in $(seq 0 $((N - 1))); do # wait until every sshd listens (10 s at most)
	a=$(addr "$i")
	for _ in $(seq 1 100); do
		(exec 3<>"/dev/tcp/$a/$PORT") 2>/dev/null && break
		sleep 0.1
	done
done
ss -ltnH "sport = :$PORT" | wc -l | { read -r n; [ "$n" -ge "$N" ] || die "only $n of $N sshd listen:$(tail -5 "$TMP/sshd.log")"; }

# --- measured runs -------------------------------------------------------------
# measure NAME CMD...: GNU time -> "$TMP/NAME.time" (wall user sys maxrss_kib), stdout/stderr -> NAME.out/.err
# busy: CPU seconds this machine spent so far, all processes (from /proc/stat: every state but idle and iowait)
busy() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{print ($2+$3+$4+$7+$8+$9)/hz; exit}' /proc/stat; }
measure() {
	local name=$1 b0
	shift
	sync
	b0=$(busy)
	/usr/bin/time -o "$TMP/$name.time.raw" -f '%e %U %S %M' timeout "$TMO" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || true
	echo "$(busy) $b0" | awk '{printf "%.2f\n", $1-$2}' >"$TMP/$name.sys"
	tail -1 "$TMP/$name.time.raw" >"$TMP/$name.time" # GNU time may first say "Command exited with non-zero status N"
}

GP=("$TMP/gpuprep" fleet check -i "$TMP/fleet.yaml" --known-hosts "$TMP/known_hosts" --identity "$TMP/client"
	--ssh-config none --parallel "$P" --retries 0 -o json)
log "1. gpuprep fleet check (cold: uploads the ${BIN_MIB} MiB binary into the shared home)"
measure gp-cold env SSH_AUTH_SOCK= "${GP[@]}"
SSHO=(-o "KexAlgorithms=$KEX" -o "UserKnownHostsFile=$TMP/known_hosts" -o StrictHostKeyChecking=yes
	-o IdentitiesOnly=yes -o BatchMode=yes -o ControlMaster=no)
PSSH_O=()
for o in "${SSHO[@]}"; do [ "$o" = -o ] || PSSH_O+=(-O "$o"); done
# The warm run and parallel-ssh, the pair the target compares, alternate for ROUNDS rounds (this machine's speed
# drifts between runs seconds apart); each is reported by its median round.
ROUNDS=${BENCH_FLEET_ROUNDS:-3}
for r in $(seq 1 "$ROUNDS"); do
	log "2. gpuprep fleet check (warm: cached binary, verified), round $r of $ROUNDS"
	measure "gp-warm-$r" env SSH_AUTH_SOCK= "${GP[@]}"
	log "3. parallel-ssh cat /proc/cmdline, round $r of $ROUNDS"
	measure "pssh-$r" parallel-ssh -h "$TMP/hosts.txt" -l "$BUSER" -p "$P" -t 120 -x "-i $TMP/client" "${PSSH_O[@]}" -i 'cat /proc/cmdline'
	log "3b. parallel-ssh sudo -n cat /proc/cmdline (not a target: the privilege gpuprep runs with), round $r of $ROUNDS"
	measure "psshsudo-$r" parallel-ssh -h "$TMP/hosts.txt" -l "$BUSER" -p "$P" -t 120 -x "-i $TMP/client" "${PSSH_O[@]}" \
		-i "sudo -n $(command -v cat) /proc/cmdline"
done
median() { # median NAME: copy the median round's files (by wall time) to NAME.*; print every round's wall
	local r best
	best=$(for r in $(seq 1 "$ROUNDS"); do echo "$(cut -d' ' -f1 "$TMP/$1-$r.time") $r"; done | sort -n | awk -v n="$ROUNDS" 'NR==int((n+1)/2){print $2}')
	for x in time sys out err; do cp "$TMP/$1-$best.$x" "$TMP/$1.$x"; done
	for r in $(seq 1 "$ROUNDS"); do cut -d' ' -f1 "$TMP/$1-$r.time"; done | paste -sd' '
}
WARM_ROUNDS=$(median gp-warm)
PSSH_ROUNDS=$(median pssh)
PSSHSUDO_ROUNDS=$(median psshsudo)

mkdir -p "$TMP/ansible"
cat >"$TMP/ansible.cfg" <<EOF
[defaults]
inventory = $TMP/ansible.ini
remote_user = $BUSER
private_key_file = $TMP/client
host_key_checking = True
interpreter_python = /usr/bin/python3
local_tmp = $TMP/ansible/tmp
forks = $P
timeout = 60
[ssh_connection]
ssh_args = ${SSHO[*]}
control_path_dir = $TMP/ansible/cp
usetty = False
EOF
# Not targets: where a warm run's time goes. The same fleet run without sudo (the fixture is world-readable),
# and with gpuprep doing nothing but start (--version, under sudo).
log "5. gpuprep fleet check --no-sudo (warm; for the breakdown)"
measure gp-nosudo env SSH_AUTH_SOCK= "${GP[@]}" --no-sudo
log "6. gpuprep fleet run -- --version (warm; for the breakdown)"
measure gp-version env SSH_AUTH_SOCK= "${GP[0]}" fleet run -i "$TMP/fleet.yaml" --known-hosts "$TMP/known_hosts" \
	--identity "$TMP/client" --ssh-config none --parallel "$P" --retries 0 -o json -- --version
log "4. ansible -m raw cat /proc/cmdline"
measure ansible env ANSIBLE_CONFIG="$TMP/ansible.cfg" ANSIBLE_NOCOLOR=1 HOME="$TMP/ansible" \
	ansible all -f "$P" -m raw -a 'cat /proc/cmdline'
if [ "${BENCH_FLEET_PERF:-0}" = 1 ]; then # not measured, and last (it slows what follows): profiles
	# for a look afterwards, and where the CPU goes
	perf record -F 4000 -g -o "$TMP/gp-warm.perf" -- env SSH_AUTH_SOCK= "${GP[@]}" >/dev/null 2>&1 || true
	# the whole machine, by process name, during a warm run and a parallel-ssh run
	perf record -a -e cpu-clock -F 1000 -o "$TMP/gp-warm-all.perf" -- env SSH_AUTH_SOCK= "${GP[@]}" >/dev/null 2>&1 || true
	perf record -a -e cpu-clock -F 1000 -o "$TMP/pssh-all.perf" -- parallel-ssh -h "$TMP/hosts.txt" -l "$BUSER" -p "$P" \
		-t 120 -x "-i $TMP/client" "${PSSH_O[@]}" -i 'cat /proc/cmdline' >/dev/null 2>&1 || true
	for f in gp-warm-all pssh-all; do
		log "CPU by process name, $f (samples at 1 kHz per core: 1 sample = 1 ms)"
		perf report -i "$TMP/$f.perf" --sort comm --stdio -F sample,comm 2>/dev/null | grep -v '^#' | grep -v '^$' |
			sort -rn | head -8 || true
	done
fi

# --- verify --------------------------------------------------------------------
fails=()
ok_gp() {
	python3 - "$TMP/$1.out" "$N" <<'PY' || return 1
import json, sys
r = json.load(open(sys.argv[1]))
ev = sum(1 for h in r["hosts"] if h["status"] == "evaluated" and h.get("report"))
print(f"  {ev} of {len(r['hosts'])} hosts evaluated; statuses {r['summary']['statuses']}")
sys.exit(0 if ev == int(sys.argv[2]) == len(r["hosts"]) else 1)
PY
}
for r in gp-cold $(for i in $(seq 1 "$ROUNDS"); do echo "gp-warm-$i"; done); do
	echo "$r:"
	ok_gp "$r" || fails+=("$r: not every host evaluated ($(tail -3 "$TMP/$r.err" | tr '\n' ' '))")
done
for p in pssh psshsudo; do
	for i in $(seq 1 "$ROUNDS"); do
		n=$(grep -c '\[SUCCESS\]' "$TMP/$p-$i.out" || true)
		echo "$p-$i: $n of $N hosts succeeded"
		[ "$n" = "$N" ] || fails+=("$p round $i: $n of $N hosts succeeded ($(grep -m3 FAILURE "$TMP/$p-$i.out" | tr '\n' ' '))")
	done
done
n=$(grep -c '| CHANGED | rc=0' "$TMP/ansible.out" || true)
echo "ansible: $n of $N hosts succeeded"
[ "$n" = "$N" ] || fails+=("ansible: $n of $N hosts succeeded ($(grep -m3 -E 'UNREACHABLE|FAILED' "$TMP/ansible.out" | tr '\n' ' ') $(tail -3 "$TMP/ansible.err" | tr '\n' ' '))")
# The shared cache after up to $P concurrent uploads: one complete binary, no temporary file left.
CACHE=$HOME_DIR/.cache/gpuprep/$BIN_SHA
left=$(find "$HOME_DIR/.cache/gpuprep" -mindepth 1 | grep -v -x -e "$CACHE" -e "$CACHE/gpuprep" -e "$CACHE/stamp" || true)
got=$(sha256sum <"$CACHE/gpuprep" 2>/dev/null | cut -d' ' -f1 || true)
echo "shared cache: $(find "$HOME_DIR/.cache/gpuprep" -type f | wc -l) file(s) (binary + stamp), $(stat -c '%a %U' "$CACHE"), sha256 $([ "$got" = "$BIN_SHA" ] && echo ok || echo MISMATCH)"
[ "$got" = "$BIN_SHA" ] || fails+=("the cached binary's SHA-256 is $got, want $BIN_SHA")
[ -z "$left" ] || fails+=("left in the cache: $left")

# --- report --------------------------------------------------------------------
row() { # row LABEL NAME
	read -r wall user sys rss <"$TMP/$2.time"
	awk -v l="$1" -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" -v a="$(cat "$TMP/$2.sys")" \
		'BEGIN{printf "| %-44s | %7.2f | %7.2f | %8.2f | %8.1f |\n", l, w, u+s, a, r/1024}'
}
log "results: N=$N hosts, parallel $P, kex $KEX, $(nproc) cores ($(date +%F))"
echo "(CPU s: the client and the processes it waited for; all CPU s: the whole machine meanwhile: client, sshds, sudo, remote commands)"
printf '| %-44s | %7s | %7s | %8s | %8s |\n' "client" "wall s" "CPU s" "all CPU s" "RSS MiB"
printf '|%s|%s|%s|%s|%s|\n' "----------------------------------------------" "--------:" "--------:" "---------:" "---------:"
row "\`gpuprep fleet check\` (cold: upload)" gp-cold
row "\`gpuprep fleet check\` (warm: cached)" gp-warm
row "\`parallel-ssh -i 'cat /proc/cmdline'\`" pssh
row "\`parallel-ssh -i 'sudo -n cat /proc/cmdline'\`" psshsudo
echo "(these three: the median of $ROUNDS alternating rounds; walls: gpuprep $WARM_ROUNDS, parallel-ssh $PSSH_ROUNDS, with sudo $PSSHSUDO_ROUNDS)"
# Rounds seconds apart drift together on a shared VM: the ratio within each round is the steadier comparison.
ratios() { paste -d' ' <(echo "$1" | tr ' ' '\n') <(echo "$2" | tr ' ' '\n') | awk '{printf "%.3f\n", $1/$2}' | sort -n; }
RATIO=$(ratios "$WARM_ROUNDS" "$PSSH_ROUNDS" | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
RATIO_SUDO=$(ratios "$WARM_ROUNDS" "$PSSHSUDO_ROUNDS" | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
echo "(gpuprep's wall over parallel-ssh's in the same round, median: $RATIO against cat, $RATIO_SUDO against sudo -n cat;" \
	"each round: $(ratios "$WARM_ROUNDS" "$PSSH_ROUNDS" | paste -sd' ') and $(ratios "$WARM_ROUNDS" "$PSSHSUDO_ROUNDS" | paste -sd' '), sorted)"
row "\`gpuprep fleet check --no-sudo\` (warm)" gp-nosudo
row "\`gpuprep fleet run -- --version\` (warm, sudo)" gp-version
row "\`ansible -m raw -a 'cat /proc/cmdline'\`" ansible
if [ -n "${BENCH_FLEET_CURVE_OUT:-}" ]; then # one line per client for the curve's table
	for pair in "gpuprep fleet check, warm:gp-warm" "gpuprep fleet check, cold:gp-cold" "parallel-ssh cat:pssh" \
		"parallel-ssh sudo -n cat:psshsudo" "gpuprep check --no-sudo, warm:gp-nosudo" "gpuprep fleet run -- --version:gp-version"; do
		read -r wall user sys rss <"$TMP/${pair##*:}.time"
		awk -v n="$N" -v l="${pair%:*}" -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" \
			'BEGIN{printf "%d\t%s\t%.2f\t%.2f\t%.1f\n", n, l, w, (u+s)*1000/n, r/1024}' >>"$BENCH_FLEET_CURVE_OUT"
	done
fi

read -r cold_w _ _ cold_rss <"$TMP/gp-cold.time"
read -r warm_w _ _ warm_rss <"$TMP/gp-warm.time"
read -r pssh_w _ _ _ <"$TMP/pssh.time"
awk -v w="$warm_w" -v p="$pssh_w" 'BEGIN{exit !(w <= p)}' || fails+=("target: gpuprep (warm, ${warm_w}s) slower than parallel-ssh's cat (${pssh_w}s; within a round, median ratio $RATIO)")
for r in "$cold_rss" "$warm_rss"; do
	[ "$r" -le $((TARGET_RSS_MIB * 1024)) ] || fails+=("target: gpuprep peak RSS $((r / 1024)) MiB > $TARGET_RSS_MIB MiB")
done
awk -v w="$warm_w" -v c="$cold_w" 'BEGIN{exit !(w < c)}' || fails+=("target: the warm run (${warm_w}s) is not faster than the cold one (${cold_w}s)")

if [ ${#fails[@]} -gt 0 ]; then
	log "missed"
	printf '  %s\n' "${fails[@]}"
	[ "${BENCH_STRICT:-0}" = 1 ] && exit 1
else
	log "all targets met; every host of every run succeeded; the shared cache holds one complete binary"
fi
exit 0
