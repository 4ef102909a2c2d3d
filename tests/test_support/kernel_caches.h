// Test helper: makes the kernel drop its unused dentries and inodes, as memory pressure would;
// for FUSE ones it sends FORGET, so the daemon sees nodes forgotten (root only).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace sigilfs::test {

// Time for the kernel's FORGETs to reach the daemon and be handled.
constexpr auto kForgetArrives = std::chrono::milliseconds(300);

// Whether this process may make the kernel drop its caches.
inline bool CanDropKernelCaches() { return ::access("/proc/sys/vm/drop_caches", W_OK) == 0; }

// Drops the dentry and inode caches (the pages of a FUSE inode go with it) and returns at
// once; false if this cannot.
inline bool DropKernelCachesNow() {
  const int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "2", 1) == 1;
  ::close(fd);
  return ok;
}

// Writes dirty data back, drops the caches and waits for the FORGETs to arrive.
inline bool DropKernelCaches() {
  ::sync();
  const bool ok = DropKernelCachesNow();
  std::this_thread::sleep_for(kForgetArrives);
  return ok;
}

}  // namespace sigilfs::test
