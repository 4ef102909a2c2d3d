#!/usr/bin/env bash
# The Debian package end to end: built by cpack from a fresh /usr build, installed with
# apt-get, its files where Debian looks for them, a vault mounted the way an /etc/fstab line
# mounts it (mount -t fuse.sigilfs), then removed again, leaving the machine as it was.
#   install_test.sh SOURCE_DIR
# Needs root, apt-get and FUSE; exits 77 (skipped) without them, unless SIGILFS_REQUIRE_FUSE=1.
#
# What was there before is kept: an installed sigilfs package is left alone (the test skips),
# and the files the package would overwrite that no package owns (pam_sigilfs.so and the
# pam-auth-update profile of an install from source, scripts/install.sh), the PAM stacks its
# removal rewrites and the packages apt-get pulls in are noted first and put back after, even
# after a run that was killed: the next run puts them back before anything else.
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
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
[[ $(id -u) == 0 ]] || skip "installing a package needs root"
command -v apt-get >/dev/null || skip "no apt-get"
[[ -c /dev/fuse ]] || skip "no /dev/fuse"

# What the run changed, kept on disk (across a reboot too) until put back: a run killed by
# CTest's timeout leaves it for the next. One run at a time.
saved=/var/tmp/sigilfs-package-test
lock=/run/lock/sigilfs-package-test.lock
[[ -w /run/lock ]] || lock=/tmp/sigilfs-package-test.lock
exec 9>"$lock"
flock -n 9 || fail "another package test is running ($lock)"
installed_packages() {
  dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" {print $2}' | sort
}
put_back() {
  [[ -d $saved ]] || return 0
  local point
  { findmnt -rn -o TARGET | grep "^$saved/" || true; } | sort -r | while IFS= read -r point; do
    umount -l "$point" || true
  done
  # "installed" is written once the notes are complete, just before apt-get install.
  if [[ -e $saved/installed ]]; then
    # A run killed inside dpkg leaves it interrupted (man-db's trigger half run, say).
    dpkg --configure -a >/dev/null 2>&1 || true
    if dpkg-query -W -f='${db:Status-Abbrev}' sigilfs 2>/dev/null | grep -qv '^.n'; then
      # dpkg itself: it also finishes a removal that a killed run left half done. Until the
      # package is gone nothing is put back (dpkg would delete it), and the notes stay.
      dpkg --remove sigilfs >/dev/null 2>&1 || {
        echo "FAIL: dpkg --remove sigilfs failed; what to put back stays in $saved" >&2
        return 1
      }
    fi
    # Packages apt-get pulled in for it (fuse3, if it was missing), removed again.
    mapfile -t pulled < <(comm -13 "$saved/packages" <(installed_packages))
    if ((${#pulled[@]} > 0)); then
      echo "removing what the package pulled in: ${pulled[*]}"
      apt-get remove -y "${pulled[@]}" >/dev/null 2>&1 || echo "warning: could not remove ${pulled[*]}" >&2
    fi
  fi
  local f
  if [[ -f $saved/kept ]]; then
    while IFS= read -r f; do
      cmp -s "$saved/files$f" "$f" && continue
      echo "putting back $f"
      mkdir -p "$(dirname "$f")"
      cp -a "$saved/files$f" "$f"
    done <"$saved/kept"
  fi
  rm -rf "$saved"
}
if [[ -d $saved ]]; then
  echo "== putting back what a killed run left"
  put_back
fi
if dpkg-query -W -f='${Status}' sigilfs 2>/dev/null | grep -q "install ok installed"; then
  skip "a sigilfs package is already installed here; this test leaves it alone"
fi

# The build and the vaults in there too, so that the next run removes what a killed one left.
work=$saved/work
mkdir -p "$work"
trap put_back EXIT

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

echo "== note what the package would change"
installed_packages >"$saved/packages.new"
mv "$saved/packages.new" "$saved/packages"
# Its files, by their real paths (/lib is /usr/lib on a merged /usr), that are there already,
# and what pam-auth-update rewrites when the package goes.
{
  dpkg-deb --fsys-tarfile "$deb" | tar -t | sed -n 's|^\./|/|p' | grep -v '/$' |
    while IFS= read -r f; do echo "$(realpath -m "$(dirname "$f")")/$(basename "$f")"; done
  printf '%s\n' /etc/pam.d/common-{auth,account,password,session,session-noninteractive}
  find /var/lib/pam -type f 2>/dev/null || true
} | sort -u | while IFS= read -r f; do
  if [[ -e $f || -L $f ]]; then
    mkdir -p "$saved/files$(dirname "$f")"
    cp -a "$f" "$saved/files$f"
    echo "$f"
  fi
done >"$saved/kept"
grep -v '^/etc/pam.d/\|^/var/lib/pam/' "$saved/kept" | sed 's/^/kept to put back: /' || true

echo "== install"
# The package's own sigilfs, not one installed from source in /usr/local/bin, which comes first
# on PATH (mount.fuse3 finds the program there too).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
touch "$saved/installed"
quietly apt-get install -y "$deb"
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
[[ -e /usr/bin/sigilfs || -e $module ]] && fail "files left after the removal"
put_back
echo "PASS"
