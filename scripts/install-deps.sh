#!/usr/bin/env bash
# Installs the Debian 12 packages sigilfs needs to build, test and run (idempotent; run as root).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libssl-dev libsodium-dev libfuse3-dev fuse3 libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  libfsverity-dev fsverity attr acl rsync e2fsprogs procps
  libpam0g-dev pamtester passwd
  dpkg-dev file
  clang clang-format clang-tidy llvm
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: missing ${missing[*]}; run as root" >&2; exit 1; }
    sudo=(sudo)
  fi
  echo "install-deps: installing ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The FUSE mount needs the device node and the fusermount3 helper.
if [ ! -e /dev/fuse ]; then
  modprobe fuse 2>/dev/null || true
fi
