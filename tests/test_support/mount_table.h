// Test helper: the mounts on a path, read from /proc/self/mountinfo rather than by stat(), which
// a FUSE mount of another user answers root with EACCES.
#pragma once

#include <string>
#include <vector>

#include "sigilfs/core/mountinfo.h"

namespace sigilfs::test {

struct MountEntry {
  std::string type;           // "fuse.sigilfs"
  std::string super_options;  // "rw,user_id=1001,group_id=1001,default_permissions"
};

// The mounts whose mount point is exactly `path`.
inline std::vector<MountEntry> MountsAt(const std::string& path) {
  std::vector<MountEntry> found;
  for (const core::MountInfoEntry& m : core::ReadMountInfo())
    if (m.mount_point == path) found.push_back({m.type, m.super_options});
  return found;
}

}  // namespace sigilfs::test
