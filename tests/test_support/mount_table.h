// Test helper: the mounts on a path, read from /proc/self/mountinfo rather than by stat(), which
// a FUSE mount of another user answers root with EACCES.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace sigilfs::test {

struct MountEntry {
  std::string type;           // "fuse.sigilfs"
  std::string super_options;  // "rw,user_id=1001,group_id=1001,default_permissions"
};

// The mounts whose mount point is exactly `path` (no octal escapes: test paths have no spaces).
inline std::vector<MountEntry> MountsAt(const std::string& path) {
  std::vector<MountEntry> found;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    if (!(fields >> id >> parent >> dev >> root >> point) || point != path) continue;
    const size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream tail(line.substr(sep + 3));
    MountEntry e;
    std::string source;
    tail >> e.type >> source >> e.super_options;
    found.push_back(e);
  }
  return found;
}

}  // namespace sigilfs::test
