// Test helper: a size-limited tmpfs in a temporary directory (root only), detached at scope
// exit, for running a vault out of space.
#pragma once

#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

#include "test_support/temp_dir.h"

namespace sigilfs::test {

class SmallFilesystem {
 public:
  // Mounting needs CAP_SYS_ADMIN; Available() says whether this process has a chance.
  static bool Available() { return ::geteuid() == 0; }

  explicit SmallFilesystem(uint64_t bytes) {
    const std::string options = "size=" + std::to_string(bytes) + ",mode=0755";
    if (::mount("sigilfs-test", dir_.path().c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                options.c_str()) != 0)
      throw std::system_error(errno, std::generic_category(), "mount tmpfs");
  }
  ~SmallFilesystem() {
    // Lazily: a failed test may leave the daemon's descriptors behind for a moment.
    ::umount2(dir_.path().c_str(), MNT_DETACH);
  }
  SmallFilesystem(const SmallFilesystem&) = delete;
  SmallFilesystem& operator=(const SmallFilesystem&) = delete;

  const std::filesystem::path& path() const { return dir_.path(); }

  // Bytes still free for an unprivileged writer.
  uint64_t FreeBytes() const {
    struct statvfs sv;
    if (::statvfs(dir_.path().c_str(), &sv) != 0) return 0;
    return static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
  }

 private:
  TempDir dir_;
};

}  // namespace sigilfs::test
