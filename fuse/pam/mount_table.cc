// Whether a sigilfs mount sits on a mount point, from /proc/self/mountinfo.
#include "mount_table.h"

#include "sigilfs/core/mountinfo.h"

namespace sigilfs::pam {

bool IsSigilfsMounted(const std::string& mount_point) {
  for (const sigilfs::core::MountInfoEntry& m : sigilfs::core::ReadMountInfo())
    if (m.type == "fuse.sigilfs" && m.mount_point == mount_point) return true;
  return false;
}

}  // namespace sigilfs::pam
