#!/usr/bin/env bash
# Waits until no process holds any of the given lock files (apt's and dpkg's, for install-deps.sh,
# which unattended upgrades often hold on a fresh machine), saying what it waits for.
#   wait-for-locks.sh [--timeout SECONDS] [--as NAME] LOCK...
# Exits 0 once none is held, 1 if one is still held after SECONDS (default 600), 2 on bad usage.
# A lock is held when lslocks lists it, by device and inode (its path may not resolve there):
# both flock(2) and fcntl(2) locks, which is what apt and dpkg take.
set -euo pipefail
timeout=600
name=wait-for-locks
locks=()
while (($# > 0)); do
  case "$1" in
    --timeout) timeout=${2:?}; shift 2 ;;
    --as) name=${2:?}; shift 2 ;;
    -*) echo "wait-for-locks.sh: unknown option $1" >&2; exit 2 ;;
    *) locks+=("$1"); shift ;;
  esac
done
[[ $timeout =~ ^[0-9]+$ && ${#locks[@]} -gt 0 ]] || {
  echo "usage: wait-for-locks.sh [--timeout SECONDS] [--as NAME] LOCK..." >&2
  exit 2
}

# Prints "COMMAND (pid N)" of a process holding lock file $1, nothing when none does.
holder() {
  [[ -e $1 ]] || return 0
  local inode device
  inode=$(stat -L -c %i "$1")
  device=$(stat -L -c '%Hd:%Ld' "$1")
  lslocks -n -r -o PID,COMMAND,MAJ:MIN,INODE 2>/dev/null |
    awk -v i="$inode" -v d="$device" '$3 == d && $4 == i { print $2 " (pid " $1 ")"; exit }'
}

deadline=$((SECONDS + timeout))
said=
while :; do
  held=
  for lock in "${locks[@]}"; do
    who=$(holder "$lock")
    if [[ -n $who ]]; then
      held="$lock, held by $who"
      break
    fi
  done
  [[ -z $held ]] && exit 0
  # One line per lock and holder, not one per poll.
  if [[ $held != "$said" ]]; then
    echo "$name: waiting for $held (up to $((deadline > SECONDS ? deadline - SECONDS : 0)) s more)"
    said=$held
  fi
  if ((SECONDS >= deadline)); then
    echo "$name: gave up after $timeout s: $held" >&2
    exit 1
  fi
  sleep 1
done
