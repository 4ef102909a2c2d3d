#!/usr/bin/env bash
# Installs sigilfs from source, for a machine without the Debian package (scripts/package.sh is
# the recommended way), and takes it out again:
#   install.sh [--build-dir DIR] [--with-library]
#       installs the Debian packages it needs, builds a Release tree in DIR (build-release/),
#       and installs it stripped: /usr/local/bin/sigilfs (where mount.fuse3 finds it for fstab),
#       the man pages and bash completion under /usr/local/share, pam_sigilfs.so in PAM's module
#       directory and the profile pam-auth-update reads in /usr/share/pam-configs (off until
#       `pam-auth-update --enable sigilfs`). --with-library adds the library: headers, static
#       archives, CMake and pkg-config files under /usr/local.
#   install.sh --uninstall
#       removes what it installed, and the profile from the PAM stacks if it was enabled.
# What it installed, with the folders it made, is listed in
# /usr/local/share/sigilfs/installed-files; --uninstall removes exactly those (a file a package
# has taken over since stays the package's).
# It refuses files a package owns (the sigilfs package: apt-get remove sigilfs first), and
# warns when another sigilfs comes first on PATH or another pam_sigilfs.so is in the way.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
prefix=/usr/local
manifest=$prefix/share/sigilfs/installed-files
build=$top/build-release
components=(program)
uninstall=0
while (($# > 0)); do
  case "$1" in
    --build-dir) build=${2:?--build-dir needs a folder}; shift 2 ;;
    --with-library) components+=(library); shift ;;
    --uninstall) uninstall=1; shift ;;
    *) echo "usage: install.sh [--build-dir DIR] [--with-library] | --uninstall" >&2; exit 2 ;;
  esac
done
say() { echo "install.sh: $*"; }
warn() { echo "install.sh: warning: $*" >&2; }
die() {
  echo "install.sh: $*" >&2
  exit 1
}
# The steps that write outside the build folder run as root (through sudo when not root).
as_root=()
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || die "installing needs root (run it as root or install sudo)"
  as_root=(sudo)
fi
owner_package() {  # prints the package that owns file $1, if any
  dpkg-query -S "$1" 2>/dev/null | sed -n '1s/: .*//p' || true
}
# PAM's stacks as pam-auth-update writes them.
pam_stacks=(/etc/pam.d/common-{auth,account,password,session,session-noninteractive})
pam_lines() {  # pam_lines FILE...: the lines naming pam_sigilfs.so, as FILE:LINE:TEXT
  grep -HnE '^[^#]*pam_sigilfs\.so' "$@" 2>/dev/null || true
}

if ((uninstall)); then
  if [[ ! -f $manifest ]]; then
    say "nothing to remove: no $manifest (sigilfs was not installed with install.sh here)"
    exit 0
  fi
  mapfile -t entries < <(grep -v '^#' "$manifest" | grep -v '^$')
  # Out of the PAM stacks first, while the module and the profile are still there.
  profile=$(printf '%s\n' "${entries[@]}" | grep '/pam-configs/sigilfs$' || true)
  if [[ -n $profile && -e $profile && -z $(owner_package "$profile") &&
    -n $(pam_lines "${pam_stacks[@]}") ]]; then
    say "taking pam_sigilfs out of the PAM stacks (pam-auth-update --remove sigilfs)"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive pam-auth-update --package --remove sigilfs
  fi
  removed=0
  for entry in "${entries[@]}"; do
    [[ $entry == */ ]] && continue
    [[ -e $entry || -L $entry ]] || continue
    package=$(owner_package "$entry")
    if [[ -n $package ]]; then
      say "leaving $entry: it belongs to the package $package now"
      continue
    fi
    "${as_root[@]}" rm -f "$entry"
    removed=$((removed + 1))
  done
  # The folders it made, deepest first, if nothing else has come into them.
  while IFS= read -r dir; do
    [[ -d $dir ]] || continue
    "${as_root[@]}" rmdir "$dir" 2>/dev/null || say "leaving $dir: it holds other files"
  done < <(printf '%s\n' "${entries[@]}" | grep '/$' | awk '{ print gsub("/", "/"), $0 }' |
    sort -rn | cut -d' ' -f2-)
  say "removed $removed files"
  if [[ -n $(pam_lines /etc/pam.d/*) ]]; then
    warn "PAM still names pam_sigilfs.so (lines not written by pam-auth-update?):"
    pam_lines /etc/pam.d/* | sed 's/^/  /' >&2
  fi
  if command -v sigilfs >/dev/null; then
    say "another sigilfs stays on PATH: $(command -v sigilfs)"
  fi
  exit 0
fi

if dpkg-query -W -f='${Status}' sigilfs 2>/dev/null | grep -q "install ok installed"; then
  die "the sigilfs package is installed, and install.sh would overwrite its pam_sigilfs.so and" \
    "PAM profile; remove it first (apt-get remove sigilfs) or keep using it"
fi
# A build folder of its own: the developer's build/ is RelWithDebInfo with the tests, and a
# folder configured otherwise would be reconfigured under its owner.
cache=$build/CMakeCache.txt
if [[ -f $cache ]]; then
  for setting in CMAKE_BUILD_TYPE:STRING=Release SIGILFS_TESTS:BOOL=OFF \
    CMAKE_INSTALL_PREFIX:PATH=$prefix; do
    grep -qx "$setting" "$cache" ||
      die "$build is configured otherwise (not $setting); give --build-dir an empty or new folder"
  done
fi
"$top/scripts/install-deps.sh" --for-demo
"$top/scripts/build.sh" "$build" -DCMAKE_BUILD_TYPE=Release -DSIGILFS_TESTS=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix"

# Installed into a scratch folder first, to know every file before any is written.
stage=$(mktemp -d "${TMPDIR:-/tmp}/sigilfs-install.XXXXXX")
trap 'rm -rf "$stage"' EXIT
for component in "${components[@]}"; do
  DESTDIR=$stage cmake --install "$build" --component "$component" --strip >/dev/null
done
mapfile -t files < <(cd "$stage" && find . \( -type f -o -type l \) | sed 's|^\.||' | sort)
files+=("$manifest")

# Files a package owns stay the package's: dpkg would remove ours with it.
for f in "${files[@]}"; do
  package=$(owner_package "$f")
  [[ -z $package ]] ||
    die "$f belongs to the package $package; remove it first (apt-get remove $package) or keep using it"
done
earlier=()
[[ -f $manifest ]] && mapfile -t earlier < <(grep -v '^#' "$manifest" | grep -v '^$')
module=
for f in "${files[@]}"; do
  [[ $f == */pam_sigilfs.so ]] && module=$f
  if [[ -e $f ]] && ! printf '%s\n' "${earlier[@]}" | grep -qxF -- "$f"; then
    warn "replacing $f, which install.sh did not put there (--uninstall will remove it)"
  fi
done
# The folders it makes, so that --uninstall takes them away again.
made=()
for f in "${files[@]}"; do
  dir=$(dirname "$f")
  while [[ ! -e $dir ]]; do
    made+=("$dir/")
    dir=$(dirname "$dir")
  done
done

for component in "${components[@]}"; do
  "${as_root[@]}" cmake --install "$build" --component "$component" --strip >/dev/null
done
{
  echo "# Installed by sigilfs's scripts/install.sh; \`scripts/install.sh --uninstall\` removes them"
  echo "# (the lines ending in / are the folders it made)."
  printf '%s\n' "${earlier[@]}" "${files[@]}" "${made[@]}" | grep -v '^#' | grep -v '^$' | sort -u
} >"$stage/installed-files"
"${as_root[@]}" mkdir -p "$(dirname "$manifest")"
"${as_root[@]}" install -m 644 "$stage/installed-files" "$manifest"

# What runs instead: a sigilfs before ours on PATH (what users and mount.fuse3 run), or a PAM
# line naming another pam_sigilfs.so by its path.
ours=$prefix/bin/sigilfs
mapfile -t on_path < <(type -ap sigilfs)
if [[ ${#on_path[@]} == 0 ]]; then
  warn "$prefix/bin is not on PATH: run $ours by its path, or add $prefix/bin to PATH"
elif [[ ! ${on_path[0]} -ef $ours ]]; then
  warn "${on_path[0]} comes first on PATH, before $ours installed here: \`sigilfs\` runs that one"
fi
pam_lines /etc/pam.d/* | while IFS= read -r line; do
  named=$(grep -oE '/[^[:space:]]*pam_sigilfs\.so' <<<"${line#*:*:}" | head -n 1 || true)
  if [[ -n $named && ! $named -ef $module ]]; then
    warn "${line%%:*} names $named, not $module installed here"
  fi
done

say "installed $ours, pam_sigilfs.so ($module) and the man pages$(
  [[ ${components[*]} == *library* ]] && echo ", and the library under $prefix")"
say "PAM: \`pam-auth-update --enable sigilfs\` (docs/home.md); to remove: scripts/install.sh --uninstall"
