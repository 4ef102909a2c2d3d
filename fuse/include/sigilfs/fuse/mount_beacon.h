// The daemon that serves a mount, found by the mount's device number: for `sigilfs unmount` to
// wait on where the vault lock names no process (shared mounts, several to one vault).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "sigilfs/core/unique_fd.h"
#include "sigilfs/fuse/vault_lock.h"
#include "sigilfs/status.h"

namespace sigilfs::fuse {

// An abstract Unix socket, "sigilfs-mount-MAJOR:MINOR", that a daemon listens on while it
// serves the mount of that device. It goes with the process (no file to go stale after a
// crash), and its peer credentials name the process to whoever connects.
class MountBeacon {
 public:
  MountBeacon() = default;  // listens for nothing

  // Starts listening for the mount whose device is `device` ("major:minor", as mountinfo gives
  // it). EADDRINUSE if another process listens for that device.
  static Result<MountBeacon> Listen(const std::string& device);

  // The process listening for `device`, if one does and it runs as `uid` (the mount's user_id:
  // another user's socket of that name is not taken for the daemon).
  static std::optional<VaultLock::Process> DaemonOf(const std::string& device, uid_t uid);

 private:
  core::UniqueFd fd_;
};

}  // namespace sigilfs::fuse
