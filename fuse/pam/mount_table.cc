// /proc/self/mountinfo: field 5 is the mount point (with \ooo escapes), the type follows " - ".
#include "mount_table.h"

#include <fstream>
#include <sstream>

namespace sigilfs::pam {
namespace {

// Undoes the kernel's octal escapes of space, tab, newline and backslash.
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && field[i + 1] >= '0' && field[i + 1] <= '3') {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                               (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

}  // namespace

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
    if (type == "fuse.sigilfs" && Unescape(point) == mount_point) return true;
  }
  return false;
}

}  // namespace sigilfs::pam
