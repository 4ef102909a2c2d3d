#!/usr/bin/env bash
# Encrypted verity against Debian's `fsverity digest` on the same plaintext, side by side in one
# run: sealing offline (`sigilfs verity enable`) and through the mount (`fsverity enable`), with
# the data in the page cache and without, and cold sequential reads of a sealed and an unsealed
# file through the mount. Prints a Markdown table of medians and ratios.
#
# Usage: benchmarks/verity_compare.sh [SIZE_MIB] [RUNS]   (defaults: 256 MiB, 3 runs)
# Needs root (to drop caches), /dev/fuse, the fsverity tool, and a built `sigilfs`
# (SIGILFS=path/to/sigilfs, default build/fuse/sigilfs).
set -euo pipefail

size_mib=${1:-256}
runs=${2:-3}
sigilfs=$(realpath "${SIGILFS:-build/fuse/sigilfs}")
work=$(mktemp -d "${TMPDIR:-/var/tmp}/sigilfs-verity-bench.XXXXXX")
cipher="$work/cipher"
mnt="$work/mnt"
pass="$work/pass"

cleanup() {
  fusermount3 -u -z "$mnt" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

drop_caches() {
  sync
  echo 3 >/proc/sys/vm/drop_caches
}

# Milliseconds taken by a command (its output discarded).
millis() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null
  end=$(date +%s%N)
  echo $(((end - start) / 1000000))
}

median() { tr ' ' '\n' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

mount_vault() { "$sigilfs" mount "$cipher" "$mnt" --passfile "$pass"; }

mkdir -p "$cipher" "$mnt"
echo "benchmark passphrase" >"$pass"
SIGILFS_TEST_KDF=1 "$sigilfs" init "$cipher" --kdf test --passfile "$pass" >/dev/null
head -c "$((size_mib * 1048576))" /dev/urandom >"$work/plain.bin"

mount_vault
# Fresh files for every sealing run (a file is sealed once), plus one sealed and one unsealed
# file for the reads.
for i in $(seq "$runs"); do
  for kind in offline-warm offline-cold mount-warm mount-cold; do
    cp "$work/plain.bin" "$mnt/$kind-$i"
  done
done
cp "$work/plain.bin" "$mnt/read-sealed"
cp "$work/plain.bin" "$mnt/read-plain"
fsverity enable "$mnt/read-sealed"
expect=$(fsverity digest "$work/plain.bin" | cut -d' ' -f1)

declare -A t
for i in $(seq "$runs"); do
  # The reference: fsverity digest of the plaintext (libfsverity, OpenSSL SHA-256).
  cat "$work/plain.bin" >/dev/null
  t[ref-warm]+="$(millis fsverity digest "$work/plain.bin") "
  drop_caches
  t[ref-cold]+="$(millis fsverity digest "$work/plain.bin") "

  # Through the mount: the daemon reads the cipher file itself.
  cat "$cipher"/* >/dev/null 2>&1 || true
  t[mount-warm]+="$(millis fsverity enable "$mnt/mount-warm-$i") "
  drop_caches
  t[mount-cold]+="$(millis fsverity enable "$mnt/mount-cold-$i") "

  # Cold sequential reads, sealed and unsealed, alternating.
  drop_caches
  t[read-plain]+="$(millis dd if="$mnt/read-plain" of=/dev/null bs=1M status=none) "
  drop_caches
  t[read-sealed]+="$(millis dd if="$mnt/read-sealed" of=/dev/null bs=1M status=none) "
done
got=$(fsverity measure "$mnt/mount-warm-1" | cut -d' ' -f1)
if [[ "$got" != "$expect" ]]; then
  echo "digest mismatch: $got vs $expect" >&2
  exit 1
fi
"$sigilfs" unmount "$mnt"

# Offline: the vault is not mounted; each run unlocks it (cheap KDF) and seals one file.
for i in $(seq "$runs"); do
  cat "$cipher"/* >/dev/null 2>&1 || true
  t[offline-warm]+="$(millis "$sigilfs" verity enable "$cipher" "offline-warm-$i" --passfile "$pass") "
  drop_caches
  t[offline-cold]+="$(millis "$sigilfs" verity enable "$cipher" "offline-cold-$i" --passfile "$pass") "
done
got=$("$sigilfs" verity measure "$cipher" offline-warm-1 --passfile "$pass" | cut -d' ' -f1)
if [[ "$got" != "$expect" ]]; then
  echo "offline digest mismatch: $got vs $expect" >&2
  exit 1
fi

declare -A m
for k in "${!t[@]}"; do m[$k]=$(echo "${t[$k]}" | median); done

# The CPU as lscpu names it (a virtual machine's may be cut short: "AMD EPYC"), or /proc/cpuinfo's.
cpu=$(LC_ALL=C lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
[[ -n "$cpu" ]] || cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n 1)
echo "### Encrypted verity, $size_mib MiB, median of $runs ($(date -u +%Y-%m-%d), ${cpu:-$(uname -m)}, $(nproc) cores, $(uname -r))"
echo
echo "| operation | page cache | time (ms) | vs \`fsverity digest\` |"
echo "|---|---|---:|---:|"
for c in warm cold; do
  echo "| \`fsverity digest\` of the plaintext | $c | ${m[ref-$c]} | 1.00 |"
  echo "| \`sigilfs verity enable\` (offline) | $c | ${m[offline-$c]} | $(ratio "${m[offline-$c]}" "${m[ref-$c]}") |"
  echo "| \`fsverity enable\` through the mount | $c | ${m[mount-$c]} | $(ratio "${m[mount-$c]}" "${m[ref-$c]}") |"
done
echo
echo "| cold sequential read through the mount | time (ms) | MB/s | sealed vs unsealed throughput |"
echo "|---|---:|---:|---:|"
for k in plain sealed; do
  mbs=$(awk -v ms="${m[read-$k]}" -v mib="$size_mib" 'BEGIN { printf "%.0f", mib * 1.048576 / (ms / 1000) }')
  echo "| $k | ${m[read-$k]} | $mbs | $([[ $k == sealed ]] && ratio "${m[read-plain]}" "${m[read-sealed]}" || echo 1.00) |"
done
echo
echo "Digest (all three agree): $expect"
