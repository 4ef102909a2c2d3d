// Internal: what both daemons (the mount and the reverse view) do alike before they mount.
#pragma once

#include <sys/resource.h>

#include <string>

namespace sigilfs::fuse {

// One descriptor per open file and directory handle, and one or two per operation in flight:
// the soft limit raised to the hard one, as libfuse's passthrough_hp does. The limit after it.
inline rlim_t RaiseFileLimit() {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

// `value` for a -o option of libfuse, which splits at commas and takes a backslash as an escape.
inline std::string EscapeOption(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == ',' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace sigilfs::fuse
