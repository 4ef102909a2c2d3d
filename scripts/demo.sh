#!/usr/bin/env bash
# README command 1: install what is needed, build, and run the built-in demo.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh" "$top/build"
exec "$top/build/fuse/sigilfs" demo "$@"
