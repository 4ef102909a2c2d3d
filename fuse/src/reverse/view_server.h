// `sigilfs reverse`'s daemon: serves a read-only store (reverse mode's encrypted view) as it is
// over FUSE — lookups, attributes, listings, reads, symlinks and extended attributes.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sigilfs/core/backing_dir.h"

namespace sigilfs::fuse {

struct ViewServerOptions {
  std::string mountpoint;  // absolute
  std::string source;      // what the mount table shows as the mount's source
  bool foreground = false;
  std::vector<std::string> fuse_options;  // passed to the kernel mount (allow_other, ...)
  // Directory handles kept open at most (0: a quarter of the descriptor limit); beyond it the
  // least recently used are closed and opened again when needed.
  size_t max_open_dirs = 0;
};

// Mounts `root` read only (type fuse.sigilfs-reverse) and serves it until unmounted or
// signalled. Returns the process exit code.
int ServeView(std::unique_ptr<core::BackingDir> root, const ViewServerOptions& options);

}  // namespace sigilfs::fuse
