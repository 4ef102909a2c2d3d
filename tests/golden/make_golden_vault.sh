#!/usr/bin/env bash
# Makes the golden vault: a small vault of format version 1 with one of everything a vault
# stores, archived with its attributes (which git does not keep) as golden-vault-v1.tar.
# Run once, as root with FUSE, by the build that fixes the format; every later build must mount
# the archive and read exactly what tests/fuse/golden_vault_test.cc expects. Never regenerate it
# to make a failing test pass: a difference there is a format change.
#   make_golden_vault.sh SIGILFS_BINARY OUT.tar
set -euo pipefail
sigilfs=$1
out=$2
work=$(mktemp -d)
trap 'fusermount3 -uz "$work/mnt" 2>/dev/null || true; rm -rf "$work"' EXIT
echo "golden passphrase" > "$work/pass"
SIGILFS_TEST_KDF=1 "$sigilfs" init --kdf test --passfile "$work/pass" "$work/vault"
mkdir "$work/mnt"
"$sigilfs" mount --passfile "$work/pass" "$work/vault" "$work/mnt"
m=$work/mnt
# Contents the test regenerates: line k of a file is "<name> line <k>\n".
lines() { for ((k = 0; k < $2; k++)); do printf '%s line %d\n' "$1" "$k"; done; }
lines plain 1000 > "$m/plain.txt"
# Sparse: a page, a hole of 32 pages, a page, and a short tail.
lines sparse 300 | head -c 4096 > "$m/sparse.bin"
truncate -s $((33 * 4096)) "$m/sparse.bin"
lines sparse 300 | head -c 5000 >> "$m/sparse.bin"
mkdir -p "$m/dir/sub"
lines sealed 20000 > "$m/dir/sealed.txt"
fsverity enable "$m/dir/sealed.txt"
long=$(printf 'n%.0s' $(seq 1 250))
lines long 3 > "$m/dir/$long"
ln -s "dir/sealed.txt" "$m/link"
lines attr 2 > "$m/dir/sub/attributes.txt"
setfattr -n user.golden -v "an attribute value" "$m/dir/sub/attributes.txt"
setfacl -m u:nobody:r-- "$m/dir/sub/attributes.txt"
setfacl -d -m g:nogroup:r-x "$m/dir/sub"
"$sigilfs" unmount "$m"
tar --xattrs --xattrs-include='*' --acls --sparse --numeric-owner --exclude=./sigilfs.lock \
  -C "$work/vault" -cf "$out" .
