// What keeps a mount busy, found as `fuser -m` finds it, for `sigilfs unmount` to name: the
// processes with their current or root directory, program, open files or mapped files on it,
// and the mounts below it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "sigilfs/core/mountinfo.h"

namespace sigilfs::cli {

struct MountHolder {
  pid_t pid = 0;
  std::string command;            // its name (/proc/PID/comm)
  std::vector<std::string> uses;  // "current directory", "open file", ...
};

struct MountHolders {
  std::vector<MountHolder> processes;  // those this process may look into
  std::vector<std::string> mounts;     // mount points below the mount
};

// Nothing here looks at a file on the mount, whose daemon may not answer (or be gone): open
// files are matched by the mount id /proc/PID/fdinfo gives, mapped ones by the device in
// /proc/PID/maps, directories and programs by their path.
MountHolders HoldersOf(const core::MountInfoEntry& mount);

// "process 1234 (sleep: current directory)", "processes 1234 (sleep: current directory) and
// 1240 (less: open file)", "the mount on /m/usb": who holds it, for a message; with nothing
// found, "a process this user cannot see" (or, for root, the kernel's own use).
std::string DescribeHolders(const MountHolders& holders);

}  // namespace sigilfs::cli
