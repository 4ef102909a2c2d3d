#!/usr/bin/env bash
# The machine-wide state the tests could change, noted before them and compared after: a test
# that leaves the machine otherwise than it found it fails the run here.
#   machine_state.sh note FILE    writes the state to FILE
#   machine_state.sh check FILE   compares the state with FILE; exits 1, saying what changed
# The state: the fuse module's parameters (enable_uring), the FUSE sysctls, /dev/fuse's mode and
# ACL, tracefs and its instances, the local accounts and groups, the PAM configuration and
# sigilfs's PAM module, sigilfs's files in the system's directories and /usr/local, and the
# installed packages.
set -euo pipefail
mode=${1:-}
file=${2:-}
[[ ($mode == note || $mode == check) && -n $file ]] || {
  echo "usage: machine_state.sh note|check FILE" >&2
  exit 2
}
uring=/sys/module/fuse/parameters/enable_uring

state() {
  local f
  for f in /sys/module/fuse/parameters/* /proc/sys/fs/fuse/*; do
    if [[ -r $f ]]; then echo "$f = $(cat "$f")"; fi
  done
  stat -c '/dev/fuse mode %a' /dev/fuse 2>/dev/null || true
  # tracefs and its instances (benchmarks/compare counts requests in one of its own).
  if mountpoint -q /sys/kernel/tracing; then
    echo "tracefs mounted"
    ls /sys/kernel/tracing/instances 2>/dev/null | sed 's/^/tracing instance /'
  fi
  { getfacl -cn /dev/fuse 2>/dev/null || true; } | sed 's|^|/dev/fuse acl |'
  getent passwd | cut -d: -f1 | sort | sed 's/^/account /'
  getent group | cut -d: -f1 | sort | sed 's/^/group /'
  # Contents by checksum; the files named "sigilfs" wherever a package or install.sh puts them.
  { find /etc/pam.d /usr/share/pam-configs /var/lib/pam -type f -exec sha256sum {} + 2>/dev/null ||
    true; } | sort -k2
  { find /usr/local /usr/bin /usr/sbin /usr/share/man /usr/share/bash-completion /usr/lib \
    -maxdepth 4 -name '*sigilfs*' \( -type f -o -type l \) -exec sha256sum {} + 2>/dev/null ||
    true; } | sort -k2
  if command -v dpkg-query >/dev/null; then
    dpkg-query -W -f='package ${Package}:${Architecture} ${Version} ${db:Status-Abbrev}\n' | sort
  fi
}

if [[ $mode == note ]]; then
  state >"$file"
  exit 0
fi

[[ -r $file ]] || {
  echo "machine_state.sh: no state noted in $file (machine_state.sh note runs first)" >&2
  exit 1
}
now=$(state)
before=$(grep -v "^$uring = " "$file" || true)
after=$(grep -v "^$uring = " <<<"$now" || true)
status=0
if [[ $before != "$after" ]]; then
  echo "FAIL: the tests left the machine changed (< before, > after):" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  status=1
fi
# The io_uring switch: a test run still holding it (another build's, in parallel) may have it on
# legitimately; with no holder it must be as it was. Only said, not written back: someone may
# have changed it by hand meanwhile (a killed test's note is put back by fuse_tests itself).
was=$(sed -n "s|^$uring = ||p" "$file")
is=$(sed -n "s|^$uring = ||p" <<<"$now")
if [[ $was != "$is" ]]; then
  lock=/run/lock/sigilfs-test-uring.lock
  [[ -w /run/lock ]] || lock=/tmp/sigilfs-test-uring.lock
  if [[ -e $lock ]] && ! flock -n -x "$lock" true; then
    echo "machine_state.sh: $uring is $is (was $was) while another test run holds it; not checked"
  else
    echo "FAIL: $uring was $was before the tests and is $is after (echo $was >$uring)" >&2
    status=1
  fi
fi
[[ $status == 0 ]] && echo "machine-wide state as before the tests"
exit "$status"
