// Internal: replies refused on purpose, for tests of what a daemon does when the kernel refuses
// one.
#pragma once

#include <linux/fuse.h>
#include <sys/uio.h>

#include <cstddef>

namespace sigilfs::fuse {

// The test knob SIGILFS_FAULT_REPLIES=N: every Nth reply of each kind of request is refused as
// the kernel refuses a reply it no longer waits for (an interrupted caller, an aborted
// connection). The caller gets EIO in its place, so the kernel holds nothing the daemon thinks
// it gave back; the daemon sees its reply fail (ENOENT) and must give back what the reply
// handed over, without touching the request again. Used by both daemons (the mount's device
// I/O and the reverse view's), over both transports.

// Reads the knob: once, before the session's threads start. Whether it is set.
bool ReplyFaultsFromEnvironment();

// Notes the request this thread goes on to serve (`n` bytes from the device or a ring entry,
// its header first): replies are matched to it by their unique id.
void NoteRequestForReplyFaults(const void* request, size_t n);

// Whether the reply in `iov[0..count)` (its header first) is to be refused; if so, `failed`
// is the EIO reply to send the kernel in its place.
bool RefuseReply(const iovec* iov, int count, fuse_out_header* failed);

}  // namespace sigilfs::fuse
