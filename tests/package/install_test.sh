#!/usr/bin/env bash
# The Debian package end to end: built by cpack from a stripped Release build for /usr,
# installed with apt-get, its files where Debian looks for them, its warning about another
# sigilfs first on PATH, a vault mounted the way an /etc/fstab line mounts it
# (mount -t fuse.sigilfs), a home login through PAM with the package's module once
# `pam-auth-update --package --enable sigilfs` has put it into the stacks (pam_login.sh: a
# throw-away account's home set up by `sigilfs home setup`, mounted as fuse.sigilfs by pamtester's
# open_session, ciphertext in the vault, unmounted by close_session), then removed again: the
# stacks no longer name the module and the same login still works; the machine as it was.
#   install_test.sh SOURCE_DIR [BUILD_DIR]   (BUILD_DIR: kept between runs, so they build less)
# Needs root, apt-get and FUSE; exits 77 (skipped) without them, unless SIGILFS_REQUIRE_FUSE=1.
#
# What was there before is kept: an installed sigilfs package is left alone (the test skips),
# and the files the package would overwrite that no package owns (pam_sigilfs.so and the
# pam-auth-update profile of an install from source, scripts/install.sh), the PAM stacks its
# removal rewrites and the packages apt-get pulls in are noted first and put back after, even
# after a run that was killed: the next run puts them back before anything else; so is the
# login's account, vault and PAM service.
set -euo pipefail
top=$1
saved=/var/tmp/sigilfs-package-test
# shellcheck source=keep.sh
source "$top/tests/package/keep.sh"
# shellcheck source=pam_login.sh
source "$top/tests/package/pam_login.sh"
[[ $(id -u) == 0 ]] || skip "installing a package needs root"
command -v apt-get >/dev/null || skip "no apt-get"
[[ -c /dev/fuse ]] || skip "no /dev/fuse"

one_at_a_time
put_back() {
  [[ -d $saved ]] || return 0
  put_back_login
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
    remove_pulled_packages
  fi
  put_back_kept
}
put_back_killed_run
if sigilfs_package_installed; then
  skip "a sigilfs package is already installed here; this test leaves it alone"
fi

# The vaults in there too, so that the next run removes what a killed one left; the build
# there as well unless given a folder to keep.
work=$saved/work
build=${2:-$work/build}
mkdir -p "$work"
trap put_back EXIT

echo "== build and package (Release, prefix /usr, stripped)"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
quietly cmake -S "$top" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX=/usr -DSIGILFS_TESTS=OFF
quietly cmake --build "$build" -j"$(nproc)"
rm -f "$build"/sigilfs_*.deb
(cd "$build" && quietly cpack -G DEB)
deb=$(ls "$build"/sigilfs_*.deb)
echo "$deb"
# Read once into a variable: with pipefail, `grep -q` stopping early would fail dpkg-deb's pipe.
info=$(dpkg-deb --info "$deb")
grep -E "^ (Package|Version|Architecture|Depends):" <<<"$info"
depends=$(grep "^ Depends:" <<<"$info")
[[ $depends =~ (:|,)\ fuse3(,|$) ]] || fail "the package does not depend on fuse3"
[[ $depends == *libsodium* ]] || fail "the library dependencies are not declared"

echo "== note what the package would change"
note_packages
# Its files, by their real paths (/lib is /usr/lib on a merged /usr), that are there already,
# and what pam-auth-update rewrites when the package goes.
{
  dpkg-deb --fsys-tarfile "$deb" | tar -t | sed -n 's|^\./|/|p' | grep -v '/$' |
    while IFS= read -r f; do echo "$(realpath -m "$(dirname "$f")")/$(basename "$f")"; done
  pam_state
} | note_files
grep -v '^/etc/pam.d/\|^/var/lib/pam/' "$saved/kept" | sed 's/^/kept to put back: /' || true

echo "== install, beside another sigilfs first on PATH"
# The package's own sigilfs, not one installed from source in /usr/local/bin, which comes first
# on PATH (mount.fuse3 finds the program there too).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
# For dpkg alone, another sigilfs first on PATH: the package warns about it when installed.
# (apt-get gives dpkg a PATH of its own, DPkg::Path: /usr/sbin:/usr/bin:/sbin:/bin, so the
# package also looks in /usr/local/bin and /usr/local/sbin, where an install from source is.)
mkdir -p "$work/other"
printf '#!/bin/sh\necho another sigilfs\n' >"$work/other/sigilfs"
chmod +x "$work/other/sigilfs"
touch "$saved/installed"
quietly apt-get install -y -o DPkg::Path="$work/other:$PATH" "$deb"
warning="sigilfs: warning: $work/other/sigilfs comes first on PATH, before the package's /usr/bin/sigilfs: \`sigilfs\` runs that one (if it was installed from source, scripts/install.sh --uninstall removes it)"
# apt-get runs dpkg on a terminal of its own, which ends lines in CR LF.
tr -d '\r' <"$saved/step.log" | grep -qxF "$warning" || {
  cat "$saved/step.log" >&2
  fail "no warning about the other sigilfs first on PATH"
}
for f in /usr/bin/sigilfs /usr/share/man/man1/sigilfs.1 /usr/share/man/man8/pam_sigilfs.8 \
  /usr/share/bash-completion/completions/sigilfs /usr/share/pam-configs/sigilfs; do
  [[ -e $f ]] || fail "$f is not installed"
done
module=$(dpkg -L sigilfs | grep '/security/pam_sigilfs.so$') || fail "no pam_sigilfs.so in the package"
[[ -e $module ]] || fail "$module is not installed"
[[ $(command -v sigilfs) == /usr/bin/sigilfs ]] || fail "sigilfs is not /usr/bin/sigilfs on PATH"
for f in /usr/bin/sigilfs "$module"; do
  [[ $(file -b "$f") == *", stripped"* ]] || fail "$f is not stripped: $(file -b "$f")"
done
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

echo "== a home login through PAM, after pam-auth-update --enable sigilfs"
enable_pam_profile
pam_login_check /usr/bin/sigilfs

echo "== remove"
apt-get remove -y sigilfs >/dev/null 2>&1 || fail "apt-get remove"
[[ -e /usr/bin/sigilfs || -e $module ]] && fail "files left after the removal"
pam_login_without_module
put_back
echo "PASS"
