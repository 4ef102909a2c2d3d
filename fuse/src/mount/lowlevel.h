// The libfuse low-level operations table over a Filesystem.
#pragma once

#include "../daemon/libfuse.h"

namespace sigilfs::fuse {

// All operations, registered in one place; the session's userdata is the Filesystem.
// Without `xattrs` the extended-attribute operations are left out: the kernel then stops asking
// (it otherwise asks for security.capability before every write, one round trip each).
const fuse_lowlevel_ops& Operations(bool xattrs);

// The session the operations answer on, for telling the kernel to drop what it caches (set once,
// before the request loop starts; null until then).
void SetSession(fuse_session* se);

}  // namespace sigilfs::fuse
