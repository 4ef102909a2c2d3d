#!/usr/bin/env bash
# Installs the Debian 12 packages benchmarks/compare needs (idempotent, quiet on success; as root).
set -euo pipefail

# What the harness drives. A package missing from the archive is reported and left out: the
# harness skips the system (or step) that needs it and measures the rest.
packages=(
  iozone3 fio gnuplot-nox rsync fsverity
  libfuse3-dev fuse3 gcc pkg-config
  gocryptfs securefs encfs cryfs
)
# iozone3 is in Debian's non-free component, which a default install does not enable.
nonfree_list=/etc/apt/sources.list.d/sigilfs-non-free.sources

die() {
  echo "install-bench-deps: $*" >&2
  exit 1
}

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || die "needs root (or sudo) to install packages"
  sudo=(sudo)
fi
as_root() { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive "$@"; }

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

# True when apt has a version of the package to install. (awk reads all of apt-cache's output, so
# pipefail sees no SIGPIPE from a reader that stops early.)
candidate() {
  local v
  v=$(apt-cache policy "$1" 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')
  [ -n "$v" ] && [ "$v" != "(none)" ]
}

missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0

# True when an enabled source already carries the non-free component (non-free-firmware, which
# bookworm enables by default, does not hold iozone3).
has_nonfree() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
    /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    grep -Eq '^[^#]*(^|[[:space:]])non-free([[:space:]]|$)' "$f" && return 0
  done
  return 1
}

# A Debian archive URI: a mirror's .../debian or .../debian-security, or a snapshot of either.
debian_uri='debian(-security)?(/[0-9]+T[0-9]+Z)?/?$'
# An entry signed by a keyring other than Debian's is some other vendor's repository.
debian_key='debian-archive'

# Prints deb822 stanzas for non-free that mirror the machine's own Debian bookworm entries (same
# mirror, suites and keyring), so that a local or snapshot mirror keeps being used.
nonfree_entries() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    if [ ! -f "$f" ] || [ "$f" = "$nonfree_list" ]; then continue; fi
    awk -v uri_re="$debian_uri" -v key_re="$debian_key" 'BEGIN { RS = ""; ORS = "" }
      /(^|\n)Enabled:[ \t]*no/ { next }
      {
        n = split($0, line, "\n"); suite = 0; uri = 0; key = 1; out = ""
        for (i = 1; i <= n; i++) {
          if (line[i] ~ /^#/) continue
          if (line[i] ~ /^Suites:.*bookworm/) suite = 1
          if (line[i] ~ /^Signed-By:/ && line[i] !~ key_re) key = 0
          if (line[i] ~ /^URIs:/) {
            u = line[i]; sub(/^URIs:[ \t]*/, "", u)
            if (u ~ uri_re) uri = 1
          }
          if (line[i] ~ /^Components:/) line[i] = "Components: non-free"
          out = out line[i] "\n"
        }
        if (suite && uri && key) print out "\n"
      }' "$f"
  done
  # The one-line format: deb [options] URI SUITE COMPONENT...
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v uri_re="$debian_uri" -v key_re="$debian_key" '$1 == "deb" {
        i = 2; signed = ""
        if ($2 ~ /^\[/) {
          for (; i <= NF; i++) {
            if ($i ~ /signed-by=/) {
              signed = $i; sub(/^\[?signed-by=/, "", signed); sub(/\]$/, "", signed)
            }
            if ($i ~ /\]$/) { i++; break }
          }
        }
        if ($(i + 1) !~ /^bookworm/ || $i !~ uri_re) next
        if (signed != "" && signed !~ key_re) next
        printf "Types: deb\nURIs: %s\nSuites: %s\nComponents: non-free\n", $i, $(i + 1)
        if (signed != "") printf "Signed-By: %s\n", signed
        printf "\n"
      }' "$f"
  done
}

added_source=0
if [[ " ${missing[*]} " == *" iozone3 "* ]] && ! has_nonfree; then
  entries=$(nonfree_entries)
  [ -n "$entries" ] || die "no bookworm entry in /etc/apt/sources.list(.d) to copy for non-free"
  printf '# Debian non-free, for iozone3 (added by scripts/install-bench-deps.sh).\n%s\n' \
    "$entries" | "${sudo[@]}" tee "$nonfree_list" >/dev/null
  added_source=1
fi

# Refresh the lists when a source was added or apt does not know a wanted package (lists never
# fetched, or stale).
update=$added_source
for p in "${missing[@]}"; do candidate "$p" || update=1; done
if [ "$update" -eq 1 ]; then
  as_root apt-get update -qq >/dev/null || die "apt-get update failed"
fi

available=()
for p in "${missing[@]}"; do
  if candidate "$p"; then
    available+=("$p")
  else
    echo "install-bench-deps: $p is not in this machine's Debian archive;" \
      "benchmarks/compare skips what needs it" >&2
  fi
done

if [ ${#available[@]} -gt 0 ]; then
  # Quiet on success; apt's whole output when it fails.
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  as_root apt-get install -y -qq --no-install-recommends "${available[@]}" >"$log" 2>&1 \
    || { cat "$log" >&2; die "apt-get install ${available[*]} failed"; }
fi

# The FUSE mounts need the device node.
[ -e /dev/fuse ] || modprobe fuse 2>/dev/null || true
