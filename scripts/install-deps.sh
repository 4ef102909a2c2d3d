#!/usr/bin/env bash
# Installs the Debian 12 packages sigilfs needs to build, test and run (idempotent; run as root).
#   install-deps.sh [--for-demo]   (--for-demo: only what building and the demo need)
set -euo pipefail

# What building sigilfs and running its demo need (the configure step looks for GoogleTest and
# libfsverity too); --for-demo stops there, so a first run does not wait for Clang and the rest.
packages=(
  build-essential cmake ninja-build pkg-config git
  libssl-dev libsodium-dev libfuse3-dev liburing-dev fuse3 libfmt-dev
  libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev
  libfsverity-dev fsverity libpam0g-dev passwd procps
)
# What the test suites, the linters, the benchmarks and the package test add.
if [[ ${1:-} != --for-demo ]]; then
  packages+=(
    libbenchmark-dev attr acl rsync e2fsprogs pamtester restic
    sshfs openssh-server openssh-client syncthing
    dpkg-dev file
    clang clang-format clang-tidy llvm
  )
fi

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
