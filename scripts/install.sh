#!/usr/bin/env bash
# Installs sigilfs system-wide: Debian packages, a release build, then `sigilfs` into
# /usr/local/bin (where mount.fuse3 finds it for fstab and remount) and pam_sigilfs.so into
# Debian's PAM module directory. install.sh [BUILD_DIR]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh" "$build"
cmake --install "$build"
echo "installed: $(command -v sigilfs) and pam_sigilfs.so (see docs/home.md to enable it)"
