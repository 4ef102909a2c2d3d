#!/usr/bin/env bash
# Builds the Debian package: sigilfs_VERSION_ARCH.deb in build-package/ (a stripped Release build
# that installs to /usr).
#   package.sh            then: apt-get install ./build-package/sigilfs_*.deb
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
# Release: no debug information to build, and cpack strips what it packs (CPACK_STRIP_FILES).
"$top/scripts/build.sh" "$top/build-package" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DSIGILFS_TESTS=OFF
cd "$top/build-package"
cpack -G DEB
ls "$top"/build-package/sigilfs_*.deb
