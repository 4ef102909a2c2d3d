// Running a mount: FUSE session setup, daemonizing, the request loop, clean unmount.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../daemon/uring_transport.h"
#include "filesystem.h"
#include "sigilfs/core/volume.h"

namespace sigilfs::fuse {

struct DaemonOptions {
  std::string mountpoint;
  bool foreground = false;
  bool read_only = false;
  bool xattrs = true;  // `user.*` extended attributes (-o noxattr: off, for faster small writes)
  // POSIX ACLs, where extended attributes are on and the backing store keeps them: stored,
  // inherited and shown; with kernel_acls also checked by the kernel.
  bool acls = true;
  bool kernel_acls = false;
  std::string stats_file;        // page-layer counters as JSON, on unmount and on SIGUSR1
  std::chrono::seconds idle{0};  // unmount after this long without requests or open files
  size_t handle_cache = MountOptions::kDefaultHandleCache;  // forgotten nodes kept for handles
  // The kernel's read-ahead for the mount, in KiB (0: its default of 128 KiB). Set as root only:
  // it is the mount's backing device's read_ahead_kb in sysfs.
  size_t readahead_kib = kDefaultReadaheadKib;
  static constexpr size_t kDefaultReadaheadKib = 2048;
  std::vector<std::string> fuse_options;  // passed to the kernel mount (allow_other, ...)
  // Other mounts serve the vault at the same time (the volume's page layer is in shared mode).
  bool shared = false;
  // How requests reach the daemon (-o transport=auto|uring|dev).
  Transport transport = Transport::kAuto;
  // Called in the serving process once it has detached (fuse_daemonize forks).
  std::function<void()> on_serving;
};

// Mounts `volume` and serves it until unmounted or signalled (SIGINT/SIGTERM/SIGHUP flush and
// unmount). Returns the process exit code; prints nothing on success.
int RunDaemon(std::unique_ptr<core::Volume> volume, const DaemonOptions& options);

}  // namespace sigilfs::fuse
