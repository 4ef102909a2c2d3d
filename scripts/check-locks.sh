#!/usr/bin/env bash
# Checks the lock rules written as annotations (sigilfs/thread_annotations.h) with Clang's
# thread-safety analysis alone, run by clang-tidy over every library, command and PAM source;
# any breach fails. lint.sh runs the same analysis beside its other checks (CI runs lint.sh).
# Needs a configured build folder for compile_commands.json: check-locks.sh [BUILD_DIR].
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
cd "$top"
command -v clang-tidy >/dev/null || { echo "check-locks: no clang-tidy (install-deps.sh has it)" >&2; exit 2; }
[ -f "$build/compile_commands.json" ] || { echo "check-locks: no $build/compile_commands.json" >&2; exit 2; }
mapfile -t units < <(git ls-files 'crypt/src/*.cc' 'core/src/*.cc' 'fuse/src/*.cc')
if ! out=$(printf '%s\0' "${units[@]}" |
  xargs -0 -P "$(nproc)" -n 3 clang-tidy -p "$build" --quiet --checks='-*,clang-diagnostic-thread-safety*' \
    --warnings-as-errors='*' 2>&1); then
  echo "$out" | grep -E "(warning|error):" -A3 >&2 || echo "$out" >&2
  exit 1
fi
echo "check-locks: the lock rules hold"
