#!/usr/bin/env bash
# Configures and builds sigilfs into a build folder:
#   build.sh [BUILD_DIR] [extra cmake -D options] [--target=NAME]   (default: every target)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
shift || true
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake_opts=()
targets=()
for arg in "$@"; do
  case "$arg" in
    --target=*) targets+=(--target "${arg#--target=}") ;;
    *) cmake_opts+=("$arg") ;;
  esac
done
cmake -S "$top" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cmake_opts[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" "${targets[@]}"
