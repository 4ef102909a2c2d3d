#!/usr/bin/env bash
# Installs the library from a sigilfs build into a scratch prefix, then builds and runs a
# program outside the tree against it twice: through find_package(sigilfs) and through
# pkg-config, and builds and runs the program README.md shows. run.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/sigilfs-consumer.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix
cmake --install "$build" --component library --prefix "$prefix" >/dev/null

# A sanitizer build's libraries need the sanitizer's runtime in the program that links them.
flags=()
grep -q '^SIGILFS_ASAN:BOOL=ON' "$build/CMakeCache.txt" && flags=(-fsanitize=address,undefined)
grep -q '^SIGILFS_TSAN:BOOL=ON' "$build/CMakeCache.txt" && flags=(-fsanitize=thread)

echo "== find_package(sigilfs)"
cmake -S "$here" -B "$scratch/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_FLAGS="${flags[*]:-}" -DCMAKE_EXE_LINKER_FLAGS="${flags[*]:-}" >/dev/null
cmake --build "$scratch/cmake" >/dev/null
mkdir "$scratch/vault1"
"$scratch/cmake/consumer" "$scratch/vault1"

echo "== pkg-config sigilfs"
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name sigilfs.pc)")
# shellcheck disable=SC2046 # the flags are words
c++ -std=c++20 "${flags[@]}" "$here/consumer.cc" -o "$scratch/consumer-pc" \
  $(pkg-config --cflags --libs sigilfs)
mkdir "$scratch/vault2"
"$scratch/consumer-pc" "$scratch/vault2"

echo "== the README's program"
# The cpp block after the README's marker, as a reader would copy it.
awk '/<!-- the README.s program:/ { marked = 1; next }
     marked && /^```cpp/ { inside = 1; next }
     inside && /^```/ { exit }
     inside { print }' "$here/../../README.md" >"$scratch/hello_vault.cc"
[ -s "$scratch/hello_vault.cc" ] || { echo "run.sh: no program found in README.md" >&2; exit 1; }
# shellcheck disable=SC2046 # the flags are words
c++ -std=c++20 -Wall -Wextra -Werror "${flags[@]}" "$scratch/hello_vault.cc" \
  -o "$scratch/hello_vault" $(pkg-config --cflags --libs sigilfs)
mkdir "$scratch/vault3"
"$scratch/hello_vault" "$scratch/vault3"
# What it wrote is there: a vault whose check is clean, holding a file and a symlink.
checked=$("$build/fuse/sigilfs" fsck "$scratch/vault3" \
  --passfile <(printf 'correct horse battery staple\n'))
echo "$checked"
grep -q '1 file .*1 symlink checked; 0 problems' <<<"$checked"
