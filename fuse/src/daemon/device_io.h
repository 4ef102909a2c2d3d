// The daemon's reads and writes of the FUSE device, for what libfuse 3.14 cannot negotiate:
// clearing set-ID bits in the daemon (FUSE_HANDLE_KILLPRIV_V2), and requests over io_uring.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "libfuse.h"
#include "uring_transport.h"

namespace sigilfs::fuse {

// Makes `se` (mounted, its loop not started) read and write the device itself: the reply to the
// kernel's INIT then also takes FUSE_HANDLE_KILLPRIV_V2 where the kernel offers it. With it the
// kernel no longer asks for `security.capability` before every write (a round trip per
// write(2): half of a 4 KiB write's time), and leaves clearing set-user-ID and set-group-ID on
// write, truncate and O_TRUNC to the daemon, flagging the requests that need it (see
// RequestClearsSetId). With `transport` other than kDev the reply also accepts io_uring where the
// kernel offers it, and the ring's threads start once the kernel has taken it. Returns false,
// changing nothing, if libfuse refuses. Without `amend_init` the INIT reply goes as libfuse wrote
// it (no FUSE_HANDLE_KILLPRIV_V2, no io_uring): what a server that writes nothing needs, where it
// reads and writes the device only so that replies can be refused on purpose (reply_faults.h).
bool TakeOverDeviceIo(fuse_session* se, Transport transport, bool amend_init);

// Ends the ring's threads, if any: after the session loop, before the session is destroyed
// (their waiting commands hold the device open, so the kernel could not end a lazily unmounted
// connection while they wait).
void StopDeviceIo();

// Which transport the mount uses, why, and what went through each.
struct TransportStats {
  const char* transport = "dev";  // "uring" once the ring serves requests, else "dev"
  const char* asked = "dev";      // what the mount was told: "auto", "dev" or "uring"
  std::string why;                // why `transport` serves, in a few words
  uint64_t dev_requests = 0;      // requests read from /dev/fuse (INIT, FORGET, INTERRUPT, ...)
  uint64_t uring_requests = 0;    // requests served through the ring
  unsigned queues = 0;            // the ring's queues (one per possible CPU) and entries in each
  unsigned depth = 0;
  // Requests of each kind that came ("lookup", "write", ...: the FUSE opcode's name), over
  // each transport; kinds none came of are left out. In opcode order.
  struct Kind {
    std::string name;
    uint64_t dev = 0;
    uint64_t uring = 0;
  };
  std::vector<Kind> kinds;
};
TransportStats DeviceIoStats();

// Why a mount asked to serve over io_uring only (Transport::kUring) ended itself: the kernel did
// not offer io_uring, or the ring could not be set up. Empty if it did not.
std::string DeviceIoRefusal();

// Whether the request this thread is serving is a write, a truncate or an O_TRUNC open by a
// caller without CAP_FSETID, after which set-user-ID, and set-group-ID where the group may
// execute or the caller is not in the file's group, must be cleared (as the kernel's
// file_remove_privs and setattr_should_drop_suidgid do). The kernel flags requests so only once
// it took FUSE_HANDLE_KILLPRIV_V2.
bool RequestClearsSetId();

// Whether the write this thread is serving (`fi` its file info) comes from the kernel's direct
// I/O (O_DIRECT), whose data went past the page cache, rather than from the page cache, whose
// pages the writer holds locked until the reply.
bool RequestIsDirectWrite(const fuse_file_info* fi);

}  // namespace sigilfs::fuse
