#!/usr/bin/env bash
# README command 2: install what is needed, build, and run the whole test suite through CTest.
#   test.sh                 the default suite (optimised build, in build/)
#   test.sh --sanitize=address|thread   the suite under ASan+UBSan or TSan (build-asan/, build-tsan/)
#   test.sh --werror        treat compiler warnings as errors (CI does)
#   test.sh --long          also the long stress runs (CTest label 'long'; SIGILFS_LONG=1)
#   test.sh --only=REGEX    only the tests whose names match (ctest -R)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
cmake_opts=(-DSIGILFS_TESTS=ON)
ctest_opts=()
exclude=long
for arg in "$@"; do
  case "$arg" in
    --sanitize=address) build=$top/build-asan; cmake_opts+=(-DSIGILFS_ASAN=ON); sanitized=1 ;;
    --sanitize=thread) build=$top/build-tsan; cmake_opts+=(-DSIGILFS_TSAN=ON); sanitized=1 ;;
    --werror) cmake_opts+=(-DSIGILFS_WERROR=ON) ;;
    --long) exclude=; export SIGILFS_LONG=1 ;;
    --only=*) ctest_opts+=(-R "${arg#--only=}") ;;
    *) echo "test.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done
# The package tests build their own, unsanitized trees: once, in the plain run, is enough.
if [[ ${sanitized:-0} == 1 ]]; then exclude=${exclude:+$exclude|}package; fi
[[ -n $exclude ]] && ctest_opts+=(-LE "$exclude")
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh" "$build" "${cmake_opts[@]}"
cd "$build"
status=0
# Kept to count the skips: CTest lists them ("(Skipped)") but counts them among the passed.
ctest --output-on-failure --timeout 900 -j"$(nproc)" "${ctest_opts[@]}" 2>&1 |
  tee "$build/ctest-output.log" || status=$?
skipped=$(grep -c ' (Skipped)$' "$build/ctest-output.log" || true)
echo "test.sh: $skipped tests skipped (listed above, after 'The following tests did not run')"
if [[ $exclude == long* ]]; then
  # CTest does not say what a label left out: the long stress runs, named here.
  left_out=$(ctest -N -L long | sed -n 's/^Total Tests: //p')
  echo "test.sh: ${left_out:-0} long stress tests left out (label 'long'; --long runs them)"
fi
exit "$status"
