#!/usr/bin/env bash
# README command 1: install what is needed, build the sigilfs program (only: the test suites
# are scripts/test.sh's), and run the built-in demo. demo.sh --keep keeps the demo vault.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh" --for-demo
"$top/scripts/build.sh" "$top/build" --target=sigilfs
status=0
"$top/build/fuse/sigilfs" demo "$@" || status=$?
echo
echo "The program: $top/build/fuse/sigilfs (sigilfs --help lists its commands)."
[[ " $* " == *" --keep "* ]] || echo "Run ./scripts/demo.sh --keep to keep the demo vault and look around."
exit "$status"
