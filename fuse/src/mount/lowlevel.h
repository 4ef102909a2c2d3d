// The libfuse low-level operations table over a Filesystem.
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

namespace sigilfs::fuse {

// All operations, registered in one place; the session's userdata is the Filesystem.
const fuse_lowlevel_ops& Operations();

}  // namespace sigilfs::fuse
