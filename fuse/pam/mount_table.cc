// /proc/self/mountinfo: field 5 is the mount point (with \ooo escapes), the type follows " - ".
#include "mount_table.h"

#include <fstream>
#include <sstream>

#include "sigilfs/fuse/mountinfo.h"

namespace sigilfs::pam {

bool IsSigilfsMounted(const std::string& mount_point) {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    if (!(fields >> id >> parent >> dev >> root >> point)) continue;
    const size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream tail(line.substr(sep + 3));
    std::string type;
    tail >> type;
    if (type == "fuse.sigilfs" && sigilfs::fuse::UnescapeMountField(point) == mount_point)
      return true;
  }
  return false;
}

}  // namespace sigilfs::pam
