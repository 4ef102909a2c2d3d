#!/usr/bin/env bash
# Installs the Debian 12 packages sigilfs needs to build, test and run (idempotent; run as root).
#   install-deps.sh [--for-demo]   (--for-demo: only what building and the demo need)
# Waits for apt's and dpkg's locks while another program holds them, up to SIGILFS_APT_WAIT
# seconds (600), saying which lock and which program.
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
  # Unattended upgrades hold apt's locks for minutes on a fresh machine, and apt-get then fails
  # at once (exit 100): wait for them, up to SIGILFS_APT_WAIT seconds in all. apt-get update
  # does not wait for the lists lock itself, so it is tried again while another holder has it;
  # apt-get install waits for dpkg's locks itself (DPkg::Lock::Timeout) if they are taken again.
  top=$(cd "$(dirname "$0")/.." && pwd)
  deadline=$((SECONDS + ${SIGILFS_APT_WAIT:-600}))
  locks=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock
         /var/cache/apt/archives/lock)
  left() { echo $((deadline > SECONDS ? deadline - SECONDS : 0)); }
  wait_for_apt() {
    "$top/scripts/wait-for-locks.sh" --as install-deps --timeout "$(left)" "${locks[@]}" || {
      echo "install-deps: run it again once that has finished (SIGILFS_APT_WAIT=SECONDS waits longer)" >&2
      exit 1
    }
  }
  # LC_ALL=C: the lock message below is matched in English.
  apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive LC_ALL=C apt-get)
  wait_for_apt
  until out=$("${apt[@]}" update -qq 2>&1); do
    # Only a lock taken between the wait and apt-get is worth another try.
    if ! grep -q "Could not get lock" <<<"$out" || ((SECONDS >= deadline)); then
      echo "$out" >&2
      exit 100
    fi
    wait_for_apt
  done
  [[ -z $out ]] || echo "$out"
  wait_for_apt
  "${apt[@]}" -o DPkg::Lock::Timeout="$(left)" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The FUSE mount needs the device node and the fusermount3 helper.
if [ ! -e /dev/fuse ]; then
  modprobe fuse 2>/dev/null || true
fi
