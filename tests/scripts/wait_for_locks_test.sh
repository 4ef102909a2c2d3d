#!/usr/bin/env bash
# scripts/wait-for-locks.sh, which install-deps.sh runs before apt-get: it returns at once when
# no one holds the locks, waits with one line naming the lock and its holder while one does,
# and gives up with a line after its timeout. Its messages are checked word for word.
#   wait_for_locks_test.sh SOURCE_DIR
set -euo pipefail
wait_for_locks=$1/scripts/wait-for-locks.sh
scratch=$(mktemp -d "${TMPDIR:-/tmp}/sigilfs-locks.XXXXXX")
holder=
cleanup() {
  # The holder's sleep first, then the holder (which would otherwise wait for it).
  if [[ -n $holder ]]; then pkill -P "$holder" 2>/dev/null || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
free=$scratch/free.lock
held=$scratch/held.lock
touch "$free" "$held"

echo "== no lock held: returns at once, silently"
out=$("$wait_for_locks" --as test "$free" "$scratch/absent.lock" 2>&1) || fail "exit $? with no lock held"
[[ -z $out ]] || fail "said '$out' with no lock held"

# flock(1) holds the lock in a process of its own, so its pid is the holder's (-o: the command
# does not inherit it, so the lock goes with that pid).
hold() {  # hold FILE SECONDS: holds FILE's lock in the background; $holder is the holder's pid
  # Its output away from the test's: CTest would wait for a sleep left behind to close it.
  flock -o "$1" sleep "$2" >/dev/null 2>&1 &
  holder=$!
  for _ in $(seq 50); do
    lslocks -n -r -o PID | grep -qx "$holder" && return 0
    sleep 0.1
  done
  fail "the lock was not taken"
}

echo "== a lock held for 2 s: one line, then returns once it is free"
hold "$held" 2
start=$SECONDS
out=$("$wait_for_locks" --as test --timeout 30 "$free" "$held" 2>&1) || fail "exit $? after the lock was freed"
[[ $out == "test: waiting for $held, held by flock (pid $holder) (up to "[0-9]*" s more)" ]] ||
  fail "said '$out'"
((SECONDS - start >= 1)) || fail "returned before the lock was freed"
wait "$holder" || true
holder=

echo "== a lock held past the timeout: a line, exit 1"
hold "$held" 30
status=0
out=$("$wait_for_locks" --as test --timeout 1 "$held" 2>&1) || status=$?
((status == 1)) || fail "exit $status, not 1, after the timeout"
[[ $out == "test: waiting for $held, held by flock (pid $holder) (up to "[01]" s more)
test: gave up after 1 s: $held, held by flock (pid $holder)" ]] || fail "said '$out'"

echo "== bad usage: exit 2"
status=0
"$wait_for_locks" --timeout soon "$held" 2>/dev/null || status=$?
((status == 2)) || fail "exit $status, not 2, for --timeout soon"
echo "PASS"
