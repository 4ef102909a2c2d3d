// Whether the home is mounted, from the kernel's mount table rather than by looking at it.
#pragma once

#include <string>

namespace sigilfs::pam {

// True if a sigilfs mount (type fuse.sigilfs) sits on `mount_point` in this mount namespace.
// Read from /proc/self/mountinfo: a stat() of the home would fail, since a FUSE mount without
// allow_other answers everyone but its owner (root included) with EACCES.
bool IsSigilfsMounted(const std::string& mount_point);

}  // namespace sigilfs::pam
