// The daemon's reads and writes of the FUSE device: FUSE_HANDLE_KILLPRIV_V2 for libfuse 3.14,
// and the INIT reply that hands requests to the io_uring transport.
#include "device_io.h"

#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>

#include "log.h"
#include "reply_faults.h"
#include "uring_abi.h"
#include "uring_transport.h"

namespace sigilfs::fuse {
namespace {

// INIT, as the kernel sent it: which request to amend the reply of, and what it offered.
std::atomic<uint64_t> g_init_unique{0};
std::atomic<bool> g_offered{false};        // FUSE_HANDLE_KILLPRIV_V2
std::atomic<bool> g_uring_offered{false};  // FUSE_OVER_IO_URING

std::atomic<fuse_session*> g_session{nullptr};
Transport g_transport = Transport::kAuto;
bool g_amend_init = true;  // set before the session's threads start, then only read
std::atomic<uint64_t> g_dev_requests{0};

// Requests by kind (their opcode; FUSE's run to 52, kinds past the table count in its last
// slot) and by transport: [0] /dev/fuse, [1] the ring.
constexpr size_t kKinds = 64;
std::array<std::array<std::atomic<uint64_t>, kKinds>, 2> g_kinds{};

// Why the transport in use serves: set at INIT (or when the ring fails), read by the stats.
Mutex g_why_mu;
std::string g_why SIGILFS_GUARDED_BY(g_why_mu);
void SetWhy(std::string why) {
  MutexLock lock(g_why_mu);
  g_why = std::move(why);
}

// The names of the request kinds as the stats show them, by opcode (FUSE's, to FUSE_STATX, 52,
// of Linux 6.6; nullptr for the numbers FUSE leaves unused).
constexpr const char* kKindNames[] = {
    nullptr,        "lookup",        "forget",      "getattr",  "setattr",  "readlink",
    "symlink",      nullptr,         "mknod",       "mkdir",    "unlink",   "rmdir",
    "rename",       "link",          "open",        "read",     "write",    "statfs",
    "release",      nullptr,         "fsync",       "setxattr", "getxattr", "listxattr",
    "removexattr",  "flush",         "init",        "opendir",  "readdir",  "releasedir",
    "fsyncdir",     "getlk",         "setlk",       "setlkw",   "access",   "create",
    "interrupt",    "bmap",          "destroy",     "ioctl",    "poll",     "notify_reply",
    "batch_forget", "fallocate",     "readdirplus", "rename2",  "lseek",    "copy_file_range",
    "setupmapping", "removemapping", "syncfs",      "tmpfile",  "statx"};
static_assert(std::size(kKindNames) < kKinds);  // the last slot counts the rest

// The name of request kind `opcode`; nullptr for one FUSE does not have.
const char* KindName(size_t opcode) {
  return opcode < std::size(kKindNames) ? kKindNames[opcode] : nullptr;
}

// The ring: set once, by the thread that sent the INIT reply; stopped, and kept for its counts,
// by StopDeviceIo.
std::mutex g_uring_mu;
std::unique_ptr<UringTransport> g_uring;

// Set for the request this thread goes on to serve (libfuse reads a request and runs its handler
// on the same thread; a ring thread serves the request its entry holds).
thread_local bool t_clears_set_id = false;
thread_local bool t_direct_write = false;
std::atomic<bool> g_taken_over{false};

// Why a mount asked to serve over io_uring (Transport::kUring) cannot: set once, before the
// daemon ends itself.
std::mutex g_refusal_mu;
std::string g_refusal;

// Ends a mount that must serve over io_uring and cannot: says why, and stops the session loop
// as SIGTERM does (the loop's threads block the signal; the main thread takes it).
void RefuseRing(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(g_refusal_mu);
    if (!g_refusal.empty()) return;
    g_refusal = "io_uring transport: " + why + "; --transport uring serves over io_uring only";
  }
  Log("%s: unmounting", DeviceIoRefusal().c_str());
  ::kill(::getpid(), SIGTERM);
}

// Whether request argument T, following the header in `buf`, has `mask` set in `field`.
template <typename T>
bool Flagged(const void* buf, size_t n, uint32_t T::*field, uint32_t mask) {
  T arg;
  if (n < sizeof(fuse_in_header) + sizeof arg) return false;
  std::memcpy(&arg, static_cast<const char*>(buf) + sizeof(fuse_in_header), sizeof arg);
  return (arg.*field & mask) != 0;
}

// Notes what the request in `buf` (`n` bytes) asks beyond its arguments, for this thread, and
// counts it by kind for the transport it came by (`ring`).
void NoteRequest(const void* buf, size_t n, bool ring) {
  t_clears_set_id = false;
  t_direct_write = false;
  NoteRequestForReplyFaults(buf, n);
  if (n < sizeof(fuse_in_header)) return;
  fuse_in_header in;
  std::memcpy(&in, buf, sizeof in);
  g_kinds[ring ? 1 : 0][std::min<size_t>(in.opcode, kKinds - 1)].fetch_add(
      1, std::memory_order_relaxed);
  switch (in.opcode) {
    case FUSE_INIT: {
      // major, minor, max_readahead, flags, flags2 (the last only with FUSE_INIT_EXT).
      uint32_t head[5] = {};
      if (n >= sizeof in + 4 * sizeof(uint32_t)) {
        std::memcpy(head, static_cast<const char*>(buf) + sizeof in,
                    std::min(sizeof head, n - sizeof in));
        g_offered.store((head[3] & FUSE_HANDLE_KILLPRIV_V2) != 0);
        g_uring_offered.store((head[3] & FUSE_INIT_EXT) != 0 &&
                              (head[4] & static_cast<uint32_t>(FUSE_OVER_IO_URING >> 32)) != 0);
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
}

ssize_t Read(int fd, void* buf, size_t len, void*) {
  const ssize_t n = ::read(fd, buf, len);
  if (n > 0) {
    g_dev_requests.fetch_add(1, std::memory_order_relaxed);
    NoteRequest(buf, static_cast<size_t>(n), false);
  } else {
    NoteRequest(buf, 0, false);
  }
  return n;
}

// A request from the ring, served on the entry's thread as a read one would be.
void ServeFromRing(void* msg, size_t size) {
  NoteRequest(msg, size, true);
  fuse_buf buf{};
  buf.mem = msg;
  buf.size = size;
  fuse_session_process_buf(g_session.load(), &buf);
}

// The payload an entry needs, as the kernel computes it from fuse_init_out's max_write and
// max_pages (it refuses smaller entries).
size_t PayloadSize(const iovec& init_out) {
  uint32_t max_write = 0;
  uint16_t max_pages = 0;
  const auto* bytes = static_cast<const char*>(init_out.iov_base);
  if (init_out.iov_len >= offsetof(fuse_init_out, max_pages) + sizeof max_pages) {
    std::memcpy(&max_write, bytes + offsetof(fuse_init_out, max_write), sizeof max_write);
    std::memcpy(&max_pages, bytes + offsetof(fuse_init_out, max_pages), sizeof max_pages);
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return std::max<size_t>({max_write, size_t{max_pages} * page, FUSE_MIN_READ_BUFFER});
}

ssize_t Writev(int fd, iovec* iov, int count, void*) {
  if (fuse_out_header out; RefuseReply(iov, count, &out)) {
    iovec failed{&out, sizeof out};
    if (!UringTransport::TakeReply(&failed, 1)) (void)!::writev(fd, &failed, 1);
    errno = ENOENT;  // as writev(2) fails for a request the kernel no longer waits for
    return -1;
  }
  if (UringTransport::TakeReply(iov, count)) {
    size_t total = 0;
    for (int i = 0; i < count; ++i) total += iov[i].iov_len;
    return static_cast<ssize_t>(total);
  }
  const uint64_t init = g_amend_init ? g_init_unique.load() : 0;
  bool start_ring = false;
  size_t payload = 0;
  if (init != 0 && count >= 2 && iov[0].iov_len >= sizeof(fuse_out_header) &&
      iov[1].iov_len >= 4 * sizeof(uint32_t)) {
    fuse_out_header out;
    std::memcpy(&out, iov[0].iov_base, sizeof out);
    if (out.unique == init && out.error == 0) {
      g_init_unique.store(0);
      // fuse_init_out: major, minor, max_readahead, flags, ..., flags2 at its offset.
      auto* words = static_cast<uint32_t*>(iov[1].iov_base);
      if (g_offered.load()) words[3] |= FUSE_HANDLE_KILLPRIV_V2;
      Status ring = Status::Ok();
      if (g_transport != Transport::kDev && !g_uring_offered.load()) {
        ring = Status(Code::kNotSupported, "the kernel did not offer io_uring for this mount");
      } else if (g_transport != Transport::kDev &&
                 iov[1].iov_len < offsetof(fuse_init_out, flags2) + sizeof(uint32_t)) {
        ring = Status(Code::kNotSupported, "libfuse's INIT reply has no room for io_uring");
      } else if (g_transport != Transport::kDev) {
        ring = UringTransport::CanStart();
      }
      if (g_transport != Transport::kDev && ring.ok()) {
        words[3] |= FUSE_INIT_EXT;
        uint32_t flags2 = 0;
        char* flags2_at = static_cast<char*>(iov[1].iov_base) + offsetof(fuse_init_out, flags2);
        std::memcpy(&flags2, flags2_at, sizeof flags2);
        flags2 |= static_cast<uint32_t>(FUSE_OVER_IO_URING >> 32);
        std::memcpy(flags2_at, &flags2, sizeof flags2);
        start_ring = true;
        payload = PayloadSize(iov[1]);
        SetWhy(g_transport == Transport::kUring ? "asked for: --transport uring"
                                                : "auto: the kernel offers io_uring");
      } else if (g_transport == Transport::kUring) {
        // Asked for by name: no request is served over /dev/fuse. An INIT refused makes the
        // kernel refuse every request of the connection (ECONNREFUSED), and the daemon ends.
        RefuseRing(ring.message());
        out.len = sizeof out;
        out.error = -EPROTO;
        iovec refused{&out, sizeof out};
        return ::writev(fd, &refused, 1);
      } else if (g_transport == Transport::kAuto && g_uring_offered.load()) {
        Log("io_uring transport: %s; requests go over /dev/fuse", ring.message().c_str());
        SetWhy("auto: the kernel offers io_uring, but " + ring.message());
      } else if (g_transport == Transport::kAuto) {
        SetWhy(
            "auto: the kernel does not offer io_uring; Linux 6.14 and later do, with the fuse "
            "module's enable_uring on");
      }
    }
  }
  const ssize_t n = ::writev(fd, iov, count);
  // The kernel registers ring entries only once it has taken the INIT reply.
  if (start_ring && n >= 0) {
    std::lock_guard<std::mutex> lock(g_uring_mu);
    g_uring = std::make_unique<UringTransport>(
        fd, payload, ServeFromRing, g_transport == Transport::kUring ? RefuseRing : nullptr);
  }
  return n;
}

}  // namespace

bool TakeOverDeviceIo(fuse_session* se, Transport transport, bool amend_init) {
  static const fuse_custom_io io = {Writev, Read, nullptr, nullptr};
  g_session.store(se);
  g_transport = transport;
  g_amend_init = amend_init;
  SetWhy(transport == Transport::kDev ? "asked for: --transport dev" : "not yet chosen (no INIT)");
  ReplyFaultsFromEnvironment();
  const bool taken = fuse_session_custom_io(se, &io, fuse_session_fd(se)) == 0;
  g_taken_over.store(taken);
  return taken;
}

void StopDeviceIo() {
  UringTransport* ring = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_uring_mu);
    ring = g_uring.get();
  }
  // Outside the lock: the threads' last requests may still ask for the stats.
  if (ring != nullptr) ring->Stop();
}

std::string DeviceIoRefusal() {
  std::lock_guard<std::mutex> lock(g_refusal_mu);
  return g_refusal;
}

TransportStats DeviceIoStats() {
  TransportStats s;
  s.asked = g_transport == Transport::kAuto    ? "auto"
            : g_transport == Transport::kUring ? "uring"
                                               : "dev";
  s.dev_requests = g_dev_requests.load(std::memory_order_relaxed);
  bool ring_failed = false;
  {
    std::lock_guard<std::mutex> lock(g_uring_mu);
    if (g_uring != nullptr) {
      s.uring_requests = g_uring->requests();
      s.queues = g_uring->queues();
      s.depth = g_uring->depth();
      ring_failed = g_uring->failed();
      if (!ring_failed) s.transport = "uring";
    }
  }
  {
    MutexLock lock(g_why_mu);
    s.why = ring_failed ? "the ring failed, so /dev/fuse; the daemon's log says why" : g_why;
  }
  TransportStats::Kind other{"other"};  // opcodes this table does not name, together
  for (size_t kind = 0; kind < kKinds; ++kind) {
    const uint64_t dev = g_kinds[0][kind].load(std::memory_order_relaxed);
    const uint64_t uring = g_kinds[1][kind].load(std::memory_order_relaxed);
    if (dev == 0 && uring == 0) continue;
    if (const char* name = KindName(kind); name != nullptr) {
      s.kinds.push_back({name, dev, uring});
    } else {
      other.dev += dev;
      other.uring += uring;
    }
  }
  if (other.dev + other.uring > 0) s.kinds.push_back(std::move(other));
  return s;
}

bool RequestClearsSetId() { return t_clears_set_id; }

bool RequestIsDirectWrite(const fuse_file_info* fi) {
  // Without the device I/O, what libfuse passes on: the lock owner, zero for page-cache writes.
  if (!g_taken_over.load(std::memory_order_relaxed)) return fi->lock_owner != 0 && !fi->writepage;
  return t_direct_write;
}

}  // namespace sigilfs::fuse
