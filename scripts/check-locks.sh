#!/usr/bin/env bash
# Builds the libraries, the command and the PAM module with Clang, whose thread-safety analysis
# checks the lock rules written as annotations (sigilfs/thread_annotations.h); any breach fails.
#   check-locks.sh [BUILD_DIR]   (default: build-clang/)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
command -v clang++ >/dev/null || { echo "check-locks: no clang++ (install-deps.sh has it)" >&2; exit 2; }
"$top/scripts/build.sh" "${1:-$top/build-clang}" -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DSIGILFS_WERROR=ON -DSIGILFS_TESTS=OFF
echo "check-locks: the lock rules hold"
