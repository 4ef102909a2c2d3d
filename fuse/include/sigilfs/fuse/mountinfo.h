// Reading /proc/self/mountinfo fields: shared by the CLI and the PAM module (header-only, as the
// module links none of sigilfs' libraries).
#pragma once

#include <string>

namespace sigilfs::fuse {

// Undoes the kernel's octal escapes (space, tab, newline, backslash) in a mountinfo field.
inline std::string UnescapeMountField(const std::string& field) {
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

}  // namespace sigilfs::fuse
