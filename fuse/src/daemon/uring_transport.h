// FUSE requests over io_uring (Linux 6.14+): ring entries per CPU queue, each served by a
// thread of its own on the queue's CPU, replies committed with the fetch of the next request.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sigilfs/mutex.h"
#include "sigilfs/status.h"

namespace sigilfs::fuse {

// How requests reach the daemon: over io_uring where the kernel offers it (auto), only over
// /dev/fuse (dev), or over io_uring or not at all (uring: the mount checks the kernel first).
enum class Transport { kAuto, kDev, kUring };

// Whether this kernel carries FUSE requests over io_uring for a new mount of this process: the
// fuse module's `enable_uring` parameter is on, and io_uring is not disabled for its user (a
// ring is set up to see). The error says what to change.
Status UringOffered();

// The transport named by -o transport= or --transport: auto, dev or uring. uring is refused here,
// with what to change, where the kernel would not give it (UringOffered).
Result<Transport> ChooseTransport(const std::string& name);

class UringTransport {
 public:
  // Serves one request: `msg` holds it as /dev/fuse would give it (header, the op's argument,
  // payload), `size` bytes, writable. The reply comes back through TakeReply on this thread.
  using Serve = void (*)(void* msg, size_t size);
  // Told, once, that the ring failed and why (instead of logging that requests go on over
  // /dev/fuse): for a mount that must not serve without io_uring. Runs on a ring thread.
  using OnFailure = void (*)(const std::string& why);

  // Registers `depth` entries on each of the kernel's queues (one per possible CPU) on the
  // session's `fd`, once the kernel has taken the INIT reply that accepted io_uring, each entry
  // with `payload_size` bytes for a request's or reply's arguments. Until every queue has an
  // entry the kernel holds new requests back. A failed registration is not fatal: the kernel
  // then turns io_uring off for the connection and goes on with /dev/fuse.
  UringTransport(int fd, size_t payload_size, Serve serve, OnFailure on_failure = nullptr,
                 unsigned depth = DefaultDepth());
  ~UringTransport() { Stop(); }
  // Ends every thread, once each has replied to the request it serves: each leaves its ring, so
  // the kernel cancels its waiting entry. Called once, by one thread.
  void Stop();
  UringTransport(const UringTransport&) = delete;
  UringTransport& operator=(const UringTransport&) = delete;

  // Takes the reply `iov[0..count)` (fuse_out_header first) if it answers the ring request this
  // thread is serving: it goes into the entry's buffers and is sent with the next fetch.
  static bool TakeReply(const iovec* iov, int count);

  // Where a reply's payload of `size` bytes can be made in place for the ring request this
  // thread is serving (the entry's own buffer, which the kernel copies from): a reply whose
  // payload is there is sent without being copied into it. Null when this thread serves no ring
  // request or the reply would not fit; valid until that reply.
  static void* ReplySpace(size_t size);

  // Requests served through the ring so far.
  uint64_t requests() const { return requests_.load(std::memory_order_relaxed); }
  unsigned queues() const { return queues_; }
  unsigned depth() const { return depth_; }
  // Whether an entry failed (the kernel declined the ring, or setting one up failed): requests
  // then stay on /dev/fuse.
  bool failed() const { return failed_.load(); }

  // Entries per queue: 8 on machines of up to 4 CPUs, fewer on larger ones (at least 2), so the
  // threads number about 32 and their buffers (a megabyte each, touched as used) stay few.
  static unsigned DefaultDepth();

  // Whether this process can set up a ring for the transport at all (io_uring may be disabled,
  // or limited to a group): asked before the INIT reply accepts io_uring, since once accepted
  // the kernel holds requests back until every queue has an entry. The error says why not.
  static Status CanStart();

 private:
  struct Entry;
  struct Offload;
  void Run(unsigned qid, unsigned index);
  // Serves the request `msg` on the helper thread while this entry's thread waits; false (and
  // nothing done) if the helper is busy or ending.
  bool ServeOnHelper(void* msg, size_t size);
  void Help();
  void Fail(const std::string& what);

  const int fd_;
  const size_t payload_size_;
  const Serve serve_;
  const OnFailure on_failure_;
  const unsigned queues_;
  const unsigned depth_;
  // How long going to SCHED_IDLE and back takes this process's threads; nothing where they may
  // not come back (no CAP_SYS_NICE).
  const std::optional<std::chrono::nanoseconds> idle_round_trip_;
  // Whether replies are committed under SCHED_IDLE (TakeReply): where that round trip is cheap.
  const bool idle_commit_;
  // Whether RELEASE is served on its entry's thread: wherever a thread may leave SCHED_IDLE
  // (measured: with the commit under SCHED_IDLE, and with plain commits where the round trip is
  // dear); elsewhere on the helper.
  const bool release_in_place_;
  int stop_fd_ = -1;  // eventfd: readable once the threads are to end
  std::atomic<uint64_t> requests_{0};
  std::atomic<bool> failed_{false};
  std::vector<std::thread> threads_;
  // The helper: one unpinned thread for requests no caller waits for (RELEASE), so that their
  // work runs beside the caller instead of on its CPU. One request at a time, handed over.
  Mutex helper_mu_;
  CondVar helper_wake_;  // a request for the helper, or the end
  CondVar helper_done_;  // the helper finished a request
  Offload* helper_job_ SIGILFS_GUARDED_BY(helper_mu_) = nullptr;
  bool helper_busy_ SIGILFS_GUARDED_BY(helper_mu_) = false;
  bool helper_stop_ SIGILFS_GUARDED_BY(helper_mu_) = false;
  std::thread helper_;
};

}  // namespace sigilfs::fuse
