// A daemon's FUSE session from set-up to teardown: the kernel mount, the device I/O, detaching,
// the request loop, the unmount. The mount and the reverse view differ only in the steps given.
#pragma once

#include <sys/resource.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "libfuse.h"
#include "uring_transport.h"

namespace sigilfs::fuse {

struct Session {
  std::string mountpoint;            // absolute: the daemon changes to / when it detaches
  std::string source;                // what the mount table shows as the mount's source
  std::string subtype;               // the mount's type is fuse.<subtype>
  std::vector<std::string> options;  // for the kernel mount (ro, allow_other, ...)
  bool foreground = false;           // else the process detaches and logs to syslog
  const fuse_lowlevel_ops* ops = nullptr;
  void* server = nullptr;  // each request's userdata (Request<Server>::server())
  // Set: the daemon reads and writes the device itself (device_io.h): FUSE_HANDLE_KILLPRIV_V2,
  // and requests over this transport. Unset: libfuse does, except while replies are refused on
  // purpose (SIGILFS_FAULT_REPLIES), which only the daemon's own device I/O can do.
  std::optional<Transport> transport;

  // The steps between, each optional. Mounted, before the device I/O is set up (the loop has
  // not started, so no request is served yet).
  std::function<void(fuse_session*)> mounted;
  // On the terminal, before detaching: false ends the session unserved (having said why).
  std::function<bool()> detaching;
  // In the serving process, before the loop: threads start here, since they would not survive
  // the fork of detaching.
  std::function<void()> serving;
  // After the loop, the exit code decided; then (also where nothing was served) after the
  // device I/O stopped, before the unmount.
  std::function<void()> served;
  std::function<void()> unmounting;
};

// Mounts, serves until unmounted or signalled (SIGINT/SIGTERM/SIGHUP: a clean unmount, exit 0),
// unmounts. Returns the process exit code; says on stderr what failed.
int RunSession(const Session& session);

// One descriptor per open file and directory handle, and one or two per operation in flight:
// the soft limit raised to the hard one, as libfuse's passthrough_hp does. The limit after it.
rlim_t RaiseFileLimit();

// `value` for a -o option of libfuse, which splits at commas and takes a backslash as an escape.
std::string EscapeOption(const std::string& value);

}  // namespace sigilfs::fuse
