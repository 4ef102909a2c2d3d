# What the install tests share (sourced by install_test.sh and from_source_test.sh): skipping
# without root, failing, one run at a time, and the files a run changes kept in $saved (set by
# the test) to be put back after it, and after a run that was killed: by the next run, first.
# The tests run as root and change the machine's own files (its PAM stacks among them), so
# what is kept stays on disk (across a reboot too) until it is put back.
# shellcheck shell=bash
: "${saved:?keep.sh: set saved, the folder the notes are kept in, before sourcing it}"

# Exits 77 (skipped), or fails where the test is required (SIGILFS_REQUIRE_FUSE=1, as in CI).
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
quietly() {  # runs "$@"; its output is shown only if it fails
  "$@" >"$saved/step.log" 2>&1 || { cat "$saved/step.log" >&2; fail "$*"; }
}

# One install test at a time, whichever: they write the same PAM stacks and module.
one_at_a_time() {
  local lock=/run/lock/sigilfs-package-test.lock
  [[ -w /run/lock ]] || lock=/tmp/sigilfs-package-test.lock
  exec 9>"$lock"
  flock -n 9 || fail "another install test is running ($lock)"
}

installed_packages() {
  dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" {print $2}' | sort
}
# Notes the installed packages, so that remove_pulled_packages can take out what the run adds.
note_packages() {
  installed_packages >"$saved/packages.new"
  mv "$saved/packages.new" "$saved/packages"
}
remove_pulled_packages() {
  [[ -f $saved/packages ]] || return 0
  local pulled
  mapfile -t pulled < <(comm -13 "$saved/packages" <(installed_packages))
  if ((${#pulled[@]} > 0)); then
    echo "removing what the run pulled in: ${pulled[*]}"
    apt-get remove -y "${pulled[@]}" >/dev/null 2>&1 || echo "warning: could not remove ${pulled[*]}" >&2
  fi
}

# PAM's stacks and pam-auth-update's own state, which enabling or removing a profile rewrites.
pam_state() {
  printf '%s\n' /etc/pam.d/common-{auth,account,password,session,session-noninteractive}
  find /var/lib/pam -type f 2>/dev/null || true
}

# Reads paths on standard input and keeps a copy of each that is there in $saved/files;
# $saved/kept lists them. Prints nothing.
note_files() {
  local f
  sort -u | while IFS= read -r f; do
    if [[ -e $f || -L $f ]]; then
      mkdir -p "$saved/files$(dirname "$f")"
      cp -a "$f" "$saved/files$f"
      echo "$f"
    fi
  done >"$saved/kept"
}
is_kept() {
  [[ -f $saved/kept ]] && grep -qxF -- "$1" "$saved/kept"
}
# Puts back every kept file that differs from its copy, then drops the notes.
put_back_kept() {
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
# Before anything else: what a killed run left, put back by the test's own put_back.
put_back_killed_run() {
  [[ -d $saved ]] || return 0
  echo "== putting back what a killed run left"
  put_back
}
sigilfs_package_installed() {
  dpkg-query -W -f='${Status}' sigilfs 2>/dev/null | grep -q "install ok installed"
}
