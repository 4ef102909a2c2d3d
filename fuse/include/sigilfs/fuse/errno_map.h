// The one place a sigilfs Status becomes an errno for the kernel (and exit codes for the CLI).
#pragma once

#include "sigilfs/status.h"

namespace sigilfs::fuse {

// Positive errno for a non-OK status (EIO for corruption and failed tags: never data).
int ErrnoFor(const Status& status);

}  // namespace sigilfs::fuse
