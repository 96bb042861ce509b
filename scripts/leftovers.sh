#!/usr/bin/env bash
# leftovers.sh: lists what gpuprep's tests left behind and exits 1 if anything: test users, their sudoers
# files, directories under /tmp and /var/lib/gpuprep-test, Go tests' t.TempDirs no running test owns, and processes (sshd, etcd, kube-apiserver, the
# QEMU guest). The tests tag each with the test process that made them, its owner "PID-STARTTIME"
# (internal/testrun): users in their GECOS field, processes in GPUPREP_TEST_OWNER, directories in their
# names. What a test process still running owns is in use, not left over; anything of the harness without an
# owner (made by an older harness) is left over. `make test` runs it last. LEFTOVERS_WAIT: seconds to wait for
# the tests' reapers to finish (default 5). LEFTOVERS_LEGACY=0: leave out what an older harness made (on a machine
# where checkouts of an older gpuprep run their tests too).
set -uo pipefail

# alive OWNER: the owner's process runs (same PID and start time, not a zombie)
alive() {
  local pid=${1%%-*} start=${1#*-} st
  [[ $pid =~ ^[0-9]+$ && $start =~ ^[0-9]+$ ]] || return 1
  st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || return 1
  read -r -a f <<<"$st"
  [ "${f[0]}" != Z ] && [ "${f[19]}" = "$start" ]
}

users() {
  local name gecos o
  while IFS=: read -r name _ _ _ gecos _; do
    case $gecos in
      "gpuprep-test owner="*) o=${gecos#gpuprep-test owner=}; alive "$o" || echo "user $name (owner $o, gone)" ;;
      *) [[ $name =~ ^gpuprep-(fleet|cli|e2e) ]] && echo "user $name (no owner: an older harness)" ;;
    esac
  done < <(getent passwd)
}

sudoers() {
  local f u
  for f in /etc/sudoers.d/gpuprep-test-*; do
    [ -e "$f" ] || continue
    u=${f#/etc/sudoers.d/gpuprep-test-}
    if [[ $u == gpuprep-* ]]; then
      getent passwd "$u" >/dev/null || echo "sudoers file $f (no user $u)"
    else
      echo "sudoers file $f (no owner: an older harness)"
    fi
  done
}

dirs() {
  local d o
  for d in /tmp/gpuprep-test-* /tmp/gpuprep-bin-* /tmp/gpuprep-fleet-* /tmp/gpuprep-e2e-* /var/lib/gpuprep-test/*; do
    [ -e "$d" ] || continue
    o=${d##*/}; o=${o#gpuprep-test-}
    if [[ $o =~ ^[0-9]+-[0-9]+$ ]]; then
      alive "$o" || echo "directory $d (owner gone)"
    else
      echo "directory $d (no owner: an older harness)"
    fi
  done
  if [ -d /var/lib/gpuprep-test ] && [ -z "$(ls -A /var/lib/gpuprep-test)" ]; then echo "directory /var/lib/gpuprep-test (empty)"; fi
}

# gotemps: directories Go's t.TempDir made under /tmp (named for the test: TestName<digits>) that no running
# test binary can own: older than the oldest *.test process running (a killed helper process, whose cleanups
# never ran, leaves them; crashtest gives its helpers a TMPDIR of the parent test's for that reason).
gotemps() {
  local f pid oldest now btime tck start d
  now=$(date +%s); oldest=$now
  btime=$(awk '/^btime/ {print $2}' /proc/stat); tck=$(getconf CLK_TCK)
  for f in /proc/[0-9]*/cmdline; do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    # a process may end between the glob and the read: { } so that the failed redirection is silenced too
    [[ $({ tr '\0' '\n' <"$f"; } 2>/dev/null | head -1) == *.test ]] || continue
    start=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $20}') || continue
    [ -n "$start" ] || continue
    start=$((btime + start / tck))
    [ "$start" -lt "$oldest" ] && oldest=$start
  done
  for d in /tmp/Test* /tmp/Fuzz*; do
    [ -d "$d" ] || continue
    [[ ${d#/tmp/} =~ ^(Test|Fuzz)[A-Za-z0-9_]*[0-9]+$ ]] || continue
    [ "$(stat -c %Y "$d" 2>/dev/null || echo "$now")" -lt "$oldest" ] && echo "directory $d (a Go test's t.TempDir, older than every test binary running)"
  done
}

procs() {
  local f pid o cmd
  # one grep over all processes: a process per process is slow on a loaded machine
  for f in $(grep -alz '^GPUPREP_TEST_OWNER=' /proc/[0-9]*/environ 2>/dev/null); do
    pid=${f#/proc/}; pid=${pid%/environ}
    [ "$pid" = $$ ] && continue
    o=$(grep -az '^GPUPREP_TEST_OWNER=' "$f" 2>/dev/null | tr -d '\0')
    o=${o#GPUPREP_TEST_OWNER=}
    [ -n "$o" ] || continue # exited between the two reads
    alive "$o" || echo "process $pid (owner $o, gone): $({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | cut -c1-120)"
  done
  for f in $(grep -al 'testmode=' /proc/[0-9]*/cmdline 2>/dev/null); do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    cmd=$({ tr '\0' ' ' <"$f"; } 2>/dev/null)
    [[ $cmd == qemu-system-x86_64\ * || $cmd == */qemu-system-x86_64\ * ]] || continue
    grep -aqz '^GPUPREP_TEST_OWNER=' "/proc/$pid/environ" 2>/dev/null && continue # judged above
    echo "process $pid (the e2e testbed's QEMU guest, no owner): $(cut -c1-120 <<<"$cmd")"
  done
}

scan() {
  if [ "${LEFTOVERS_LEGACY:-1}" = 0 ]; then
    { users; sudoers; dirs; gotemps; procs; } | grep -v 'an older harness'
  else
    users; sudoers; dirs; gotemps; procs
  fi
}

left=$(scan)
if [ -n "$left" ] && [ "${LEFTOVERS_WAIT:-5}" != 0 ]; then
  sleep "${LEFTOVERS_WAIT:-5}" # a reaper may still be at work
  left=$(scan)
fi
[ -z "$left" ] && { echo "leftovers: none"; exit 0; }
n=$(grep -c . <<<"$left")
if [ "$n" -gt 40 ]; then
  printf '%s\n' "$left" | head -40
  echo "... and $((n - 40)) more"
else
  printf '%s\n' "$left"
fi
echo "leftovers: $n things the tests left behind (see above)" >&2
exit 1
