#!/usr/bin/env bash
# scripts/install.sh end to end: a stripped Release build installed under /usr/local with only
# what a user of the program needs, its warnings about another sigilfs first on PATH and a
# pam_sigilfs.so it did not put there, its PAM profile found by pam-auth-update, a home login
# through PAM with the installed module (pam_login.sh: a throw-away account's home set up by
# `sigilfs home setup`, mounted as fuse.sigilfs by pamtester's open_session, ciphertext in the
# vault, unmounted by close_session), the library added by --with-library, and --uninstall
# leaving nothing behind, the stacks without the module and the same login still working; then
# the machine as it was.
#   from_source_test.sh SOURCE_DIR BUILD_DIR   (BUILD_DIR: install.sh's build folder, kept
#                                               between runs, so that they build less)
# Needs root and Debian's dpkg and pam-auth-update; exits 77 (skipped) without them, unless
# SIGILFS_REQUIRE_FUSE=1.
#
# What was there before is kept, as by install_test.sh (keep.sh): an installed sigilfs package or
# an install from source is left alone (the test skips), and the files install.sh writes, the
# PAM stacks and the packages install-deps.sh pulls in are noted first and put back after, even
# after a run that was killed: the next run puts them back before anything else; so is the
# login's account, vault and PAM service.
set -euo pipefail
top=$1
build=$2
saved=/var/tmp/sigilfs-install-test
# shellcheck source=keep.sh
source "$top/tests/package/keep.sh"
# shellcheck source=pam_login.sh
source "$top/tests/package/pam_login.sh"
[[ $(id -u) == 0 ]] || skip "installing needs root"
if ! command -v pam-auth-update >/dev/null || ! command -v dpkg-query >/dev/null; then
  skip "no pam-auth-update or dpkg-query (not Debian)"
fi
one_at_a_time

prefix=/usr/local
manifest=$prefix/share/sigilfs/installed-files
module=$(pkg-config --variable=libdir pam)/security/pam_sigilfs.so
# What install.sh installs without --with-library: these and nothing else.
expected=(
  "$prefix/bin/sigilfs"
  "$prefix/share/man/man1/sigilfs.1"
  "$prefix/share/man/man8/pam_sigilfs.8"
  "$prefix/share/bash-completion/completions/sigilfs"
  /usr/share/pam-configs/sigilfs
  "$module"
  "$manifest"
)

# Removes what install.sh wrote, the files it listed and those the test expects, except the ones
# that were there before (put back from their copies), and the folders that were not there.
put_back() {
  [[ -d $saved ]] || return 0
  put_back_login
  # "installed" is written once the notes are complete, just before install.sh runs.
  if [[ -e $saved/installed ]]; then
    local listed=() f
    [[ -f $manifest ]] && mapfile -t listed < <(grep -v '^#' "$manifest")
    printf '%s\n' "${expected[@]}" "${listed[@]}" | grep -v '/$' | sort -u | while IFS= read -r f; do
      is_kept "$f" || rm -f "$f"
    done
    { cat "$saved/made"; printf '%s\n' "${listed[@]}" | grep '/$' || true; } | sort -u |
      awk '{ print gsub("/", "/"), $0 }' | sort -rn | cut -d' ' -f2- | while IFS= read -r f; do
      rmdir "$f" 2>/dev/null || true
    done
    remove_pulled_packages
  fi
  put_back_kept
}
put_back_killed_run
if sigilfs_package_installed; then
  skip "a sigilfs package is installed here (install.sh refuses beside it); this test leaves it alone"
fi
[[ -e $manifest ]] && skip "sigilfs is installed from source here ($manifest); this test leaves it alone"
work=$saved/work
mkdir -p "$work"
trap put_back EXIT

echo "== note what install.sh would change"
note_packages
{
  printf '%s\n' "${expected[@]}"
  pam_state
} | note_files
grep -v '^/etc/pam.d/\|^/var/lib/pam/' "$saved/kept" | sed 's/^/kept to put back: /' || true
# The folders it would make.
for f in "${expected[@]}"; do
  dir=$(dirname "$f")
  while [[ ! -e $dir ]]; do
    echo "$dir/"
    dir=$(dirname "$dir")
  done
done | sort -u >"$saved/made"

echo "== install, beside another sigilfs first on PATH and a pam_sigilfs.so of another install"
mkdir -p "$work/other"
printf '#!/bin/sh\necho another sigilfs\n' >"$work/other/sigilfs"
chmod +x "$work/other/sigilfs"
touch "$saved/installed"
[[ -e $module ]] || echo "not a PAM module" >"$module"
PATH=$work/other:$PATH quietly "$top/scripts/install.sh" --build-dir "$build"
for warning in \
  "install.sh: warning: replacing $module, which install.sh did not put there (--uninstall will remove it)" \
  "install.sh: warning: $work/other/sigilfs comes first on PATH, before $prefix/bin/sigilfs installed here: \`sigilfs\` runs that one"; do
  grep -qxF "$warning" "$saved/step.log" || {
    cat "$saved/step.log" >&2
    fail "install.sh did not say: $warning"
  }
done
for f in "${expected[@]}"; do
  [[ -e $f ]] || fail "$f is not installed"
done
manifest_files() { grep -v '^#' "$manifest" | grep -v '/$'; }
[[ $(manifest_files) == "$(printf '%s\n' "${expected[@]}" | sort)" ]] ||
  fail "install.sh installed otherwise than expected:$(diff <(printf '%s\n' "${expected[@]}" | sort) <(manifest_files))"
for f in "$prefix/bin/sigilfs" "$module"; do
  [[ $(file -b "$f") == *", stripped"* ]] || fail "$f is not stripped: $(file -b "$f")"
done
[[ $("$prefix/bin/sigilfs" --version) == "sigilfs "* ]] || fail "$prefix/bin/sigilfs --version"

echo "== pam-auth-update --enable sigilfs finds its profile"
enable_pam_profile
echo "== a home login through PAM with the installed module"
pam_login_check "$prefix/bin/sigilfs"

echo "== --with-library adds the library"
quietly "$top/scripts/install.sh" --build-dir "$build" --with-library
for f in "${expected[@]}"; do
  manifest_files | grep -qxF "$f" || fail "$f is no longer listed after a second install"
done
for pattern in '/include/sigilfs/' '/libsigilfs_core\.a$' '/sigilfsConfig\.cmake$' '/sigilfs\.pc$'; do
  manifest_files | grep -q "$pattern" || fail "--with-library installed nothing matching $pattern"
done
[[ $(pkg-config --modversion sigilfs) == [0-9]* ]] || fail "pkg-config does not find the installed library"

echo "== --uninstall"
cp "$manifest" "$work/installed-files"
quietly "$top/scripts/install.sh" --uninstall
grep -qxF "install.sh: taking pam_sigilfs out of the PAM stacks (pam-auth-update --remove sigilfs)" \
  "$saved/step.log" || fail "install.sh --uninstall did not take the profile out"
if grep -HE '^[^#]*pam_sigilfs\.so' /etc/pam.d/*; then
  fail "PAM still names pam_sigilfs.so after --uninstall"
fi
left=$(grep -v '^#' "$work/installed-files" | while IFS= read -r f; do
  if [[ -e ${f%/} || -L ${f%/} ]]; then echo "$f"; fi
done)
[[ -z $left ]] || fail "left after --uninstall: $left"
pam_login_without_module

put_back
echo "PASS"
