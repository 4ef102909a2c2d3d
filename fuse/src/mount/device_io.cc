// The daemon's reads and writes of the FUSE device: FUSE_HANDLE_KILLPRIV_V2 for libfuse 3.14.
#include "device_io.h"

#include <linux/fuse.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace sigilfs::fuse {
namespace {

// INIT, as the kernel sent it: which request to amend the reply of, and whether it may be.
std::atomic<uint64_t> g_init_unique{0};
std::atomic<bool> g_offered{false};

// Set by Read for the request this thread goes on to serve (libfuse reads a request and runs
// its handler on the same thread).
thread_local bool t_clears_set_id = false;
thread_local bool t_direct_write = false;
std::atomic<bool> g_taken_over{false};

// Whether request argument T, following the header in `buf`, has `mask` set in `field`.
template <typename T>
bool Flagged(const void* buf, ssize_t n, uint32_t T::*field, uint32_t mask) {
  T arg;
  if (n < static_cast<ssize_t>(sizeof(fuse_in_header) + sizeof arg)) return false;
  std::memcpy(&arg, static_cast<const char*>(buf) + sizeof(fuse_in_header), sizeof arg);
  return (arg.*field & mask) != 0;
}

ssize_t Read(int fd, void* buf, size_t len, void*) {
  const ssize_t n = ::read(fd, buf, len);
  t_clears_set_id = false;
  t_direct_write = false;
  if (n < static_cast<ssize_t>(sizeof(fuse_in_header))) return n;
  fuse_in_header in;
  std::memcpy(&in, buf, sizeof in);
  switch (in.opcode) {
    case FUSE_INIT: {
      // major, minor, max_readahead, flags: the fields every protocol version has.
      uint32_t head[4];
      if (n >= static_cast<ssize_t>(sizeof in + sizeof head)) {
        std::memcpy(head, static_cast<const char*>(buf) + sizeof in, sizeof head);
        g_offered.store((head[3] & FUSE_HANDLE_KILLPRIV_V2) != 0);
        g_init_unique.store(in.unique);
      }
      break;
    }
    case FUSE_WRITE:
      t_clears_set_id = Flagged(buf, n, &fuse_write_in::write_flags, FUSE_WRITE_KILL_SUIDGID);
      // The kernel's direct I/O names the lock owner; writes from its page cache do not.
      t_direct_write = Flagged(buf, n, &fuse_write_in::write_flags, FUSE_WRITE_LOCKOWNER) &&
                       !Flagged(buf, n, &fuse_write_in::write_flags, FUSE_WRITE_CACHE);
      break;
    case FUSE_SETATTR:
      t_clears_set_id = Flagged(buf, n, &fuse_setattr_in::valid, FATTR_KILL_SUIDGID);
      break;
    case FUSE_OPEN:
      t_clears_set_id = Flagged(buf, n, &fuse_open_in::open_flags, FUSE_OPEN_KILL_SUIDGID);
      break;
    case FUSE_CREATE:
      t_clears_set_id = Flagged(buf, n, &fuse_create_in::open_flags, FUSE_OPEN_KILL_SUIDGID);
      break;
    default:
      break;
  }
  return n;
}

ssize_t Writev(int fd, iovec* iov, int count, void*) {
  const uint64_t init = g_init_unique.load();
  if (init != 0 && count >= 2 && iov[0].iov_len >= sizeof(fuse_out_header) &&
      iov[1].iov_len >= 4 * sizeof(uint32_t)) {
    fuse_out_header out;
    std::memcpy(&out, iov[0].iov_base, sizeof out);
    if (out.unique == init && out.error == 0) {
      g_init_unique.store(0);
      if (g_offered.load()) {
        // fuse_init_out: major, minor, max_readahead, flags, ...
        auto* words = static_cast<uint32_t*>(iov[1].iov_base);
        words[3] |= FUSE_HANDLE_KILLPRIV_V2;
      }
    }
  }
  return ::writev(fd, iov, count);
}

}  // namespace

bool TakeOverDeviceIo(fuse_session* se) {
  static const fuse_custom_io io = {Writev, Read, nullptr, nullptr};
  const bool taken = fuse_session_custom_io(se, &io, fuse_session_fd(se)) == 0;
  g_taken_over.store(taken);
  return taken;
}

bool RequestClearsSetId() { return t_clears_set_id; }

bool RequestIsDirectWrite(const fuse_file_info* fi) {
  // Without the device I/O, what libfuse passes on: the lock owner, zero for page-cache writes.
  if (!g_taken_over.load(std::memory_order_relaxed)) return fi->lock_owner != 0 && !fi->writepage;
  return t_direct_write;
}

}  // namespace sigilfs::fuse
