#!/usr/bin/env bash
# Checks formatting (clang-format) and runs clang-tidy over every source, warnings as errors.
# Needs a configured build folder for compile_commands.json: lint.sh [BUILD_DIR].
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
cd "$top"
mapfile -t sources < <(git ls-files 'crypt/*.cc' 'crypt/*.h' 'core/*.cc' 'core/*.h' 'fuse/*.cc' \
  'fuse/*.h' 'tests/*.cc' 'tests/*.h' 'benchmarks/*.cc')
clang-format --dry-run -Werror "${sources[@]}"
mapfile -t units < <(git ls-files 'crypt/src/*.cc' 'core/src/*.cc' 'fuse/src/*.cc')
[ -f "$build/compile_commands.json" ] || { echo "lint: no $build/compile_commands.json" >&2; exit 2; }
# One clang-tidy per core, a few units each (a unit takes it half a minute or more).
if ! out=$(printf '%s\0' "${units[@]}" |
  xargs -0 -P "$(nproc)" -n 3 clang-tidy -p "$build" --quiet --warnings-as-errors='*' 2>&1); then
  echo "$out" | grep -E "(warning|error):" -A3 >&2 || echo "$out" >&2
  exit 1
fi
echo "lint: clean"
