#!/usr/bin/env bash
# The Debian package end to end: built by cpack from a fresh /usr build, installed with
# apt-get, its files where Debian looks for them, a vault mounted the way an /etc/fstab line
# mounts it (mount -t fuse.sigilfs), then removed again, leaving nothing.
#   install_test.sh SOURCE_DIR
# Needs root, apt-get and FUSE; exits 77 (skipped) without them, unless SIGILFS_REQUIRE_FUSE=1.
set -euo pipefail
top=$1
skip() {
  if [[ ${SIGILFS_REQUIRE_FUSE:-} == 1 ]]; then
    echo "FAIL: $1 (required here)" >&2
    exit 1
  fi
  echo "SKIP: $1"
  exit 77
}
[[ $(id -u) == 0 ]] || skip "installing a package needs root"
command -v apt-get >/dev/null || skip "no apt-get"
[[ -c /dev/fuse ]] || skip "no /dev/fuse"
if dpkg-query -W -f='${Status}' sigilfs 2>/dev/null | grep -q "install ok installed"; then
  skip "a sigilfs package is already installed here; this test would remove it"
fi

work=$(mktemp -d /tmp/sigilfs-package.XXXXXX)
installed=0
cleanup() {
  mountpoint -q "$work/plain" && umount -l "$work/plain" || true
  if [[ $installed == 1 ]]; then apt-get remove -y sigilfs >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

echo "== build and package (prefix /usr)"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
quietly() {  # runs "$@"; its output is shown only if it fails
  "$@" >"$work/step.log" 2>&1 || { cat "$work/step.log" >&2; fail "$*"; }
}
quietly cmake -S "$top" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_INSTALL_PREFIX=/usr -DSIGILFS_TESTS=OFF
quietly cmake --build "$work/build" -j"$(nproc)"
(cd "$work/build" && quietly cpack -G DEB)
deb=$(ls "$work"/build/sigilfs_*.deb)
echo "$deb"
# Read once into a variable: with pipefail, `grep -q` stopping early would fail dpkg-deb's pipe.
info=$(dpkg-deb --info "$deb")
grep -E "^ (Package|Version|Architecture|Depends):" <<<"$info"
depends=$(grep "^ Depends:" <<<"$info")
[[ $depends =~ (:|,)\ fuse3(,|$) ]] || fail "the package does not depend on fuse3"
[[ $depends == *libsodium* ]] || fail "the library dependencies are not declared"

echo "== install"
quietly apt-get install -y "$deb"
installed=1
for f in /usr/bin/sigilfs /usr/share/man/man1/sigilfs.1 /usr/share/man/man8/pam_sigilfs.8 \
  /usr/share/bash-completion/completions/sigilfs /usr/share/pam-configs/sigilfs; do
  [[ -e $f ]] || fail "$f is not installed"
done
module=$(dpkg -L sigilfs | grep '/security/pam_sigilfs.so$') || fail "no pam_sigilfs.so in the package"
[[ -e $module ]] || fail "$module is not installed"
[[ $(command -v sigilfs) == /usr/bin/sigilfs ]] || fail "sigilfs is not /usr/bin/sigilfs on PATH"
# The man page has every command, generated from the program's help.
for cmd in init mount unmount "verity enable" fsck export import "home setup"; do
  grep -q "^\.SS \"sigilfs $cmd\"" /usr/share/man/man1/sigilfs.1 || fail "sigilfs(1) lacks sigilfs $cmd"
done
grep -q -- "--no-acl" /usr/share/man/man1/sigilfs.1 || fail "sigilfs(1) lacks the options"
# Completion offers the commands.
completions=$(bash -c 'source /usr/share/bash-completion/completions/sigilfs
  COMP_WORDS=(sigilfs veri); COMP_CWORD=1; _sigilfs; echo "${COMPREPLY[*]}"')
[[ $completions == "verity verify-backup" ]] || fail "completion of 'sigilfs veri' gave '$completions'"

echo "== mount -t fuse.sigilfs, as from /etc/fstab"
mkdir -p "$work/cipher" "$work/plain"
echo "package test" >"$work/pw"
SIGILFS_TEST_KDF=1 sigilfs init "$work/cipher" --kdf test --passfile "$work/pw" >/dev/null
mount -t fuse.sigilfs "$work/cipher" "$work/plain" -o "passfile=$work/pw" ||
  fail "mount -t fuse.sigilfs"
echo "through the package" >"$work/plain/f"
[[ $(cat "$work/plain/f") == "through the package" ]] || fail "reading back through the mount"
findmnt -n -o FSTYPE,SOURCE --mountpoint "$work/plain" | grep -qx "fuse.sigilfs $work/cipher" ||
  fail "the mount table does not show fuse.sigilfs $work/cipher"
sigilfs unmount "$work/plain" || fail "sigilfs unmount"
mountpoint -q "$work/plain" && fail "still mounted"
sigilfs fsck "$work/cipher" --passfile "$work/pw" >/dev/null || fail "fsck after the mount"

echo "== an encrypted view, as from /etc/fstab (-o reverse), copied and verified"
mkdir -p "$work/tree/sub" "$work/view"
echo "to back up" >"$work/tree/sub/file"
SIGILFS_TEST_KDF=1 sigilfs init --reverse "$work/tree" --kdf test --passfile "$work/pw" >/dev/null
mount -t fuse.sigilfs "$work/tree" "$work/view" -o "reverse,passfile=$work/pw" ||
  fail "mount -t fuse.sigilfs -o reverse"
findmnt -n -o FSTYPE --mountpoint "$work/view" | grep -qx "fuse.sigilfs-reverse" ||
  fail "the mount table does not show fuse.sigilfs-reverse"
cp -a "$work/view" "$work/backup" || fail "copying the view"
sigilfs unmount "$work/view" || fail "sigilfs unmount of the view"
mountpoint -q "$work/view" && fail "the view is still mounted"
sigilfs verify-backup -q "$work/backup" "$work/tree" --passfile "$work/pw" ||
  fail "verify-backup of a copy of the view"

echo "== remove"
apt-get remove -y sigilfs >/dev/null 2>&1 || fail "apt-get remove"
installed=0
[[ -e /usr/bin/sigilfs || -e $module ]] && fail "files left after the removal"
echo "PASS"
