// FUSE requests over io_uring: one thread and one small ring per entry, pinned to the queue's
// CPU, and a helper thread for the requests no caller waits for.
#include "uring_transport.h"

#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <system_error>
#include <thread>

#include "log.h"
#include "uring_abi.h"

#if defined(__SANITIZE_THREAD__)
#define SIGILFS_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SIGILFS_UNDER_TSAN 1
#endif
#endif
#ifdef SIGILFS_UNDER_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace sigilfs::fuse {
namespace {

// What a completion is for.
constexpr uint64_t kFetched = 1;  // the entry holds a request (or the kernel ended it)
constexpr uint64_t kStop = 2;     // the stop eventfd became readable

// Room in front of an entry's payload for the request's header and its op's argument, so the
// request reaches libfuse in one piece, as from /dev/fuse, without moving its payload.
constexpr size_t kHeadroom = 4096;

// The request this thread is serving, for TakeReply.
thread_local struct Serving {
  fuse_uring_req_header* header = nullptr;
  char* payload = nullptr;
  size_t payload_size = 0;
  uint64_t unique = 0;
  bool replied = false;
  // Where the reply is committed from: the thread's ring, the device, the queue, the commit id.
  io_uring* ring = nullptr;
  int fd = -1;
  uint16_t qid = 0;
  uint64_t commit_id = 0;
  bool committed = false;    // the commit (and fetch) went to the kernel with the reply
  bool idle_commit = false;  // the commit is submitted under SCHED_IDLE (UringTransport::Run)
} t_serving;

// Requests the kernel sends in the background: no caller waits for their reply.
bool Background(uint32_t opcode) { return opcode == FUSE_RELEASE || opcode == FUSE_RELEASEDIR; }

// A READ of this size or more (the kernel's read-ahead) is work enough, about half a
// millisecond a MiB to read and decrypt, that the thread serving it should not be held to
// its queue's CPU (UringTransport::Run).
constexpr uint32_t kLargeRead = 128 * 1024;

bool LargeRead(const fuse_in_header& in, const char* arg) {
  if (in.opcode != FUSE_READ || in.len < sizeof in + sizeof(fuse_read_in)) return false;
  fuse_read_in read;
  std::memcpy(&read, arg, sizeof read);
  return read.size >= kLargeRead;
}

// A ring, set up and ended. liburing maps and unmaps a ring's memory with system calls of its
// own, which ThreadSanitizer does not see: a ring mapped where an ended one was (a thread that
// starts after another has left its ring) looked to it like memory the two threads share
// without order. The kernel orders the unmap before the map; under TSan these say so.
#ifdef SIGILFS_UNDER_TSAN
char ring_memory;  // the synchronization object of those maps and unmaps
char ring_order;   // and of replies and the requests after them (ReplyGoes)
#endif

int InitRing(unsigned entries, io_uring* ring, unsigned flags) {
  const int err = ::io_uring_queue_init(entries, ring, flags);
#ifdef SIGILFS_UNDER_TSAN
  if (err == 0) __tsan_acquire(&ring_memory);
#endif
  return err;
}

void ExitRing(io_uring* ring) {
#ifdef SIGILFS_UNDER_TSAN
  __tsan_release(&ring_memory);
#endif
  ::io_uring_queue_exit(ring);
}

// What the kernel orders between requests: a reply goes to it before any request it sends
// after. TSan sees that order over /dev/fuse (a write to a descriptor before a read of it) but
// not through a ring, so a request's handler and an earlier one's (a READDIR, then the
// RELEASEDIR of its directory, on two threads) looked unordered to it. Under TSan these say so.
void ReplyGoes() {
#ifdef SIGILFS_UNDER_TSAN
  __tsan_release(&ring_order);
#endif
}

void RequestCame() {
#ifdef SIGILFS_UNDER_TSAN
  __tsan_acquire(&ring_order);
#endif
}

// How long a thread of this process takes to go to SCHED_IDLE and come back (the cheapest of a
// few tries), or nothing where it may not come back: that needs CAP_SYS_NICE or an RLIMIT_NICE
// that allows nice 0, which an unprivileged daemon rarely has. Tried on a thread of its own,
// which ends either way.
std::optional<std::chrono::nanoseconds> IdleRoundTrip() {
  std::optional<std::chrono::nanoseconds> best;
  std::thread probe([&best] {
    sched_param none{};
    for (int i = 0; i < 8; ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (::sched_setscheduler(0, SCHED_IDLE, &none) != 0) return;
      if (::sched_setscheduler(0, SCHED_OTHER, &none) != 0) {
        best.reset();
        return;
      }
      const auto took = std::chrono::steady_clock::now() - start;
      if (!best || took < *best) best = took;
    }
  });
  probe.join();
  return best;
}

// Above this, the round trip a SCHED_IDLE commit adds to every request (TakeReply) costs more
// than keeping the caller on its CPU gains. Measured on an AMD EPYC virtual machine whose system
// calls cost about 1 µs, where the round trip takes 3.1 µs: 10,000 creates over io_uring took
// 2.42 s with plain commits against 2.64 s under SCHED_IDLE, and 1.66 against 2.38 s in another
// run, writes the same either way (docs/benchmarks.md, "The SCHED_IDLE commit").
constexpr std::chrono::nanoseconds kIdleCommitAtMost{1500};

// errno's text (strerror is not thread-safe).
std::string Why(int err) { return std::generic_category().message(err); }

std::string ReadLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The kernel's queue count: one per possible CPU (its nr_cpu_ids), from "0-N" ranges.
unsigned PossibleCpus() {
  const std::string s = ReadLine("/sys/devices/system/cpu/possible");
  unsigned highest = 0;
  bool any = false;
  size_t i = 0;
  while (i < s.size()) {
    size_t end = s.find(',', i);
    if (end == std::string::npos) end = s.size();
    const std::string range = s.substr(i, end - i);
    const size_t dash = range.find('-');
    try {
      highest = std::max(highest, static_cast<unsigned>(std::stoul(
                                      dash == std::string::npos ? range : range.substr(dash + 1))));
      any = true;
    } catch (const std::exception&) {
    }
    i = end + 1;
  }
  if (!any) {
    const long n = ::sysconf(_SC_NPROCESSORS_CONF);
    return n > 0 ? static_cast<unsigned>(n) : 1;
  }
  return highest + 1;
}

// Queues a URING_CMD on /dev/fuse for an entry: REGISTER gives its buffers `iov`,
// COMMIT_AND_FETCH its reply. False if the ring has no free SQE (it has room for both of the
// thread's commands, so never).
bool PrepareCommand(io_uring* ring, int fd, uint32_t op, uint16_t qid, uint64_t commit_id,
                    const iovec* iov) {
  io_uring_sqe* sqe = ::io_uring_get_sqe(ring);
  if (sqe == nullptr) return false;
    // A 128-byte SQE: the command's data runs past struct io_uring_sqe, which GCC cannot know.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
  std::memset(sqe, 0, 2 * sizeof *sqe);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd;
  sqe->cmd_op = op;
  if (op == FUSE_IO_URING_CMD_REGISTER) {
    sqe->addr = reinterpret_cast<uint64_t>(iov);
    sqe->len = 2;
  }
  fuse_uring_cmd_req req{};
  req.qid = qid;
  req.commit_id = commit_id;
  std::memcpy(sqe->cmd, &req, sizeof req);
#pragma GCC diagnostic pop
  sqe->user_data = kFetched;
  return true;
}

}  // namespace

Status UringOffered() {
  const std::string param = ReadLine("/sys/module/fuse/parameters/enable_uring");
  if (param.empty())
    return Status(Code::kNotSupported,
                  "this kernel has no FUSE over io_uring (Linux 6.14 or later has it)");
  if (param != "Y" && param != "1")
    return Status(Code::kNotSupported,
                  "FUSE over io_uring is off: as root, echo Y > "
                  "/sys/module/fuse/parameters/enable_uring (or add 'options fuse enable_uring=1' "
                  "to a file in /etc/modprobe.d)");
  const std::string disabled = ReadLine("/proc/sys/kernel/io_uring_disabled");
  if (disabled == "2")
    return Status(Code::kNotSupported, "io_uring is disabled (kernel.io_uring_disabled = 2)");
  if (Status ring = UringTransport::CanStart(); !ring.ok()) {
    if (disabled == "1")
      return Status(Code::kNotSupported,
                    ring.message() +
                        " (kernel.io_uring_disabled = 1 allows io_uring to root and to the "
                        "group in kernel.io_uring_group only)");
    return ring;
  }
  return Status::Ok();
}

Result<Transport> ChooseTransport(const std::string& name) {
  if (name == "auto") return Transport::kAuto;
  if (name == "dev") return Transport::kDev;
  if (name != "uring")
    return Status(Code::kInvalidArgument, "unknown transport '" + name + "' (auto, uring or dev)");
  if (Status offered = UringOffered(); !offered.ok()) return offered;
  return Transport::kUring;
}

unsigned UringTransport::DefaultDepth() {
  return std::clamp(32 / std::max(1u, PossibleCpus()), 2u, 8u);
}

Status UringTransport::CanStart() {
  io_uring ring;
  const int err = InitRing(2, &ring, IORING_SETUP_SQE128);
  if (err < 0)
    return Status(Code::kNotSupported, "this process cannot set up an io_uring ring: " + Why(-err));
  ExitRing(&ring);
  return Status::Ok();
}

// A request an entry's thread hands to the helper, and how it was served.
struct UringTransport::Offload {
  void* msg = nullptr;
  size_t size = 0;
  Serving serving;
  bool done = false;
};

struct UringTransport::Entry {
  fuse_uring_req_header* header = nullptr;
  char* area = nullptr;  // kHeadroom, then the payload
  size_t area_size = 0;
  iovec iov[2]{};
};

UringTransport::UringTransport(int fd, size_t payload_size, Serve serve, OnFailure on_failure,
                               unsigned depth)
    : fd_(fd),
      payload_size_(payload_size),
      serve_(serve),
      on_failure_(on_failure),
      queues_(PossibleCpus()),
      depth_(depth == 0 ? 1 : depth),
      idle_round_trip_(IdleRoundTrip()),
      idle_commit_(idle_round_trip_ && *idle_round_trip_ <= kIdleCommitAtMost),
      release_in_place_(idle_round_trip_.has_value()) {
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    Fail(std::string("eventfd: ") + Why(errno));
    return;
  }
  if (!idle_round_trip_)
    Log("io_uring transport: this daemon may not leave SCHED_IDLE again; replies are committed "
        "plainly, RELEASE served on a helper thread");
  else if (!idle_commit_)
    Log("io_uring transport: replies committed plainly (a SCHED_IDLE round trip takes %lld ns "
        "here)",
        static_cast<long long>(idle_round_trip_->count()));
  if (!release_in_place_) helper_ = std::thread([this] { Help(); });
  threads_.reserve(static_cast<size_t>(queues_) * depth_);
  for (unsigned q = 0; q < queues_; ++q)
    for (unsigned i = 0; i < depth_; ++i) threads_.emplace_back([this, q, i] { Run(q, i); });
}

void UringTransport::Stop() {
  if (stop_fd_ < 0) return;
  const uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  {
    MutexLock lock(helper_mu_);
    helper_stop_ = true;
  }
  helper_wake_.NotifyOne();
  if (helper_.joinable()) helper_.join();
  ::close(stop_fd_);
  stop_fd_ = -1;
}

void UringTransport::Fail(const std::string& what) {
  if (!failed_.exchange(true)) {
    if (on_failure_ != nullptr)
      on_failure_(what);
    else
      Log("io_uring transport: %s; requests go on over /dev/fuse", what.c_str());
  }
}

bool UringTransport::TakeReply(const iovec* iov, int count) {
  Serving& s = t_serving;
  if (s.header == nullptr || s.replied || count < 1 || iov[0].iov_len < sizeof(fuse_out_header))
    return false;
  fuse_out_header out;
  std::memcpy(&out, iov[0].iov_base, sizeof out);
  if (out.unique != s.unique) return false;
  size_t n = 0;
  for (int i = 1; i < count; ++i) {
    if (iov[i].iov_base == s.payload + n && iov[i].iov_len <= s.payload_size - n) {
      n += iov[i].iov_len;  // made in place (ReplySpace)
      continue;
    }
    if (iov[i].iov_len > s.payload_size - n) {  // cannot happen: replies fit the request's max
      out.error = -EIO;
      n = 0;
      break;
    }
    // memmove: a reply may carry bytes from the request's own payload.
    std::memmove(s.payload + n, iov[i].iov_base, iov[i].iov_len);
    n += iov[i].iov_len;
  }
  out.len = static_cast<uint32_t>(sizeof out + n);
  std::memcpy(s.header->in_out, &out, sizeof out);
  s.header->ring_ent_in_out.payload_sz = static_cast<uint32_t>(n);
  s.replied = true;
  // Committed at once, as a reply written to /dev/fuse would be: the caller wakes now, not
  // after the handler and libfuse have finished with the request. The fetch that comes with it
  // may copy the next request into the entry's buffers before this returns; nothing reads the
  // request once it is answered (its header and unique are kept in Run's locals).
  // (Should the submit fail, the command stays queued and goes with Run's next wait.)
  // (On the helper there is no ring: the entry's thread, the ring's only submitter, commits.)
  s.committed =
      s.ring != nullptr &&
      PrepareCommand(s.ring, s.fd, FUSE_IO_URING_CMD_COMMIT_AND_FETCH, s.qid, s.commit_id, nullptr);
  if (s.committed) {
    ReplyGoes();
    // The reply wakes its caller inside this submit, while this thread still runs on the
    // caller's CPU, and the scheduler puts a woken task on an idle CPU rather than a busy one:
    // the caller moved to the other CPU at most replies, and each request then woke a CPU
    // from idle. A CPU whose running task is SCHED_IDLE counts as idle, and the woken caller
    // preempts that task: so the caller stays, and goes first. This thread is back to
    // SCHED_OTHER as soon as it runs again.
    sched_param none{};
    if (s.idle_commit) (void)::sched_setscheduler(0, SCHED_IDLE, &none);
    (void)::io_uring_submit(s.ring);
    static std::atomic<bool> told{false};  // said once: it would fail at every reply
    if (s.idle_commit && ::sched_setscheduler(0, SCHED_OTHER, &none) != 0 && !told.exchange(true))
      Log("io_uring transport: leaving SCHED_IDLE: %s", Why(errno).c_str());
  }
  return true;
}

void* UringTransport::ReplySpace(size_t size) {
  const Serving& s = t_serving;
  if (s.header == nullptr || s.replied || size > s.payload_size) return nullptr;
  return s.payload;
}

bool UringTransport::ServeOnHelper(void* msg, size_t size) {
  Offload job{msg, size, t_serving};
  job.serving.ring = nullptr;
  MutexLock lock(helper_mu_);
  if (helper_busy_ || helper_stop_) return false;
  helper_busy_ = true;
  helper_job_ = &job;
  helper_wake_.NotifyOne();
  while (!job.done) helper_done_.Wait(helper_mu_);
  t_serving = job.serving;
  return true;
}

void UringTransport::Help() {
  sigset_t all;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
  ::pthread_setname_np(::pthread_self(), "sigilfs-qhelp");
  MutexLock lock(helper_mu_);
  for (;;) {
    while (helper_job_ == nullptr && !helper_stop_) helper_wake_.Wait(helper_mu_);
    if (helper_job_ == nullptr) return;
    Offload& job = *helper_job_;
    helper_job_ = nullptr;
    lock.Unlock();
    t_serving = job.serving;
    serve_(job.msg, job.size);
    job.serving = t_serving;
    t_serving = {};
    lock.Lock();
    job.done = true;
    helper_busy_ = false;
    helper_done_.NotifyAll();
  }
}

void UringTransport::Run(unsigned qid, unsigned index) {
  // Signals go to libfuse's threads, whose blocked read of /dev/fuse SIGTERM must interrupt.
  sigset_t all;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
  char name[16];
  std::snprintf(name, sizeof name, "sigilfs-q%u.%u", qid, index);
  ::pthread_setname_np(::pthread_self(), name);
  // The kernel queues a request on the queue of the CPU its caller runs on, and every entry of
  // that queue serves it on that CPU: the caller sleeps and the entry's thread runs where it
  // slept, with no wake-up of another CPU either way (4 KiB writes ran 1.4 to 2.9 times as
  // fast as over /dev/fuse). Where replies are committed under SCHED_IDLE the caller goes first
  // (TakeReply). Requests no caller waits for (RELEASE) are served here where this process may
  // leave SCHED_IDLE again (with plain commits too: on a machine where that round trip is dear,
  // creates ran faster so than on the helper). A daemon that may not hands them to the helper,
  // which the scheduler places: served in place without the SCHED_IDLE commit on another
  // machine, they took the caller's CPU while the other idled, and `cp -a` ran a quarter
  // slower. A CPU this process may not use leaves the thread free.
  // A large READ (LargeRead: read-ahead) lets go of the CPU until a small request comes again:
  // read-ahead fills the queue of the reader's CPU alone, and its decryption held to that CPU
  // ran cold sequential reads at two thirds of /dev/fuse's speed; the thread, free while it
  // waits, is woken where the scheduler finds room, as /dev/fuse's threads are.
  cpu_set_t own, any;
  CPU_ZERO(&own);
  CPU_SET(qid, &own);
  const bool can_pin = ::sched_getaffinity(0, sizeof any, &any) == 0 && CPU_ISSET(qid, &any);
  bool pinned = can_pin && ::sched_setaffinity(0, sizeof own, &own) == 0;

  io_uring ring;
  // One submitter, which is also the only waiter: completions' work runs when it waits.
  int err = InitRing(4, &ring,
                     IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
  if (err == -EINVAL) err = InitRing(4, &ring, IORING_SETUP_SQE128);
  if (err < 0) {
    // CanStart made a ring a moment ago: this is a lack of memory, and the kernel, which
    // waits for this queue's entries, cannot be told (it will wait while other queues serve).
    Fail(std::string("io_uring_queue_init: ") + Why(-err));
    return;
  }

  Entry e;
  e.area_size = kHeadroom + payload_size_;
  void* area = ::mmap(nullptr, e.area_size + sizeof(fuse_uring_req_header), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) {
    Fail(std::string("entry buffers: ") + Why(errno));
    // An entry the kernel refuses (no payload buffer) makes it give up io_uring for the
    // connection and serve everything over /dev/fuse, instead of waiting for this queue.
    static char header[sizeof(fuse_uring_req_header)];
    const iovec refused[2] = {{header, sizeof header}, {header, 0}};
    if (PrepareCommand(&ring, fd_, FUSE_IO_URING_CMD_REGISTER, static_cast<uint16_t>(qid), 0,
                       refused))
      (void)::io_uring_submit_and_wait(&ring, 1);
    ExitRing(&ring);
    return;
  }
  e.area = static_cast<char*>(area);
  e.header = reinterpret_cast<fuse_uring_req_header*>(e.area + e.area_size);
  e.iov[0] = {e.header, sizeof *e.header};
  e.iov[1] = {e.area + kHeadroom, payload_size_};

  bool stop = false;
  if (io_uring_sqe* sqe = ::io_uring_get_sqe(&ring); sqe != nullptr) {
    ::io_uring_prep_poll_add(sqe, stop_fd_, POLLIN);
    sqe->user_data = kStop;
  }
  if (!PrepareCommand(&ring, fd_, FUSE_IO_URING_CMD_REGISTER, static_cast<uint16_t>(qid), 0,
                      e.iov)) {
    Fail("no room in a new ring");
    stop = true;
  }
  bool registered = false;
  while (!stop) {
    err = ::io_uring_submit_and_wait(&ring, 1);
    if (err < 0 && err != -EINTR) {
      Fail(std::string("io_uring_submit_and_wait: ") + Why(-err));
      break;
    }
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0;
    unsigned seen = 0;
    bool fetched = false;
    int res = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++seen;
      if (cqe->user_data == kStop) stop = true;
      if (cqe->user_data == kFetched) {
        fetched = true;
        res = cqe->res;
      }
    }
    ::io_uring_cq_advance(&ring, seen);
    if (stop || !fetched) continue;
    if (res < 0) {
      // ENOTCONN, ENODEV, ECANCELED: the connection is going away; anything else on the first
      // command is the kernel declining the ring.
      if (!registered && res != -ENOTCONN && res != -ENODEV && res != -ECANCELED)
        Fail(std::string("registering an entry: ") + Why(-res));
      break;
    }
    registered = true;
    RequestCame();
    // The request: its header and its op's argument in front of the payload, as one message.
    fuse_in_header in;
    std::memcpy(&in, e.header->in_out, sizeof in);
    const fuse_uring_ent_in_out io = e.header->ring_ent_in_out;
    const size_t payload = std::min<size_t>(io.payload_sz, payload_size_);
    size_t op = in.len >= sizeof in + payload ? in.len - sizeof in - payload : 0;
    op = std::min<size_t>(op, FUSE_URING_OP_IN_OUT_SZ);
    char* msg = e.area + kHeadroom - op - sizeof in;
    in.len = static_cast<uint32_t>(sizeof in + op + payload);
    std::memcpy(msg, &in, sizeof in);
    std::memcpy(msg + sizeof in, e.header->op_in, op);
    t_serving = {e.header, e.area + kHeadroom,         payload_size_, in.unique, false,       &ring,
                 fd_,      static_cast<uint16_t>(qid), io.commit_id,  false,     idle_commit_};
    // A large READ's thread lets go of its CPU (above); its reply, a MiB the kernel copies
    // inside the commit, is not committed under SCHED_IDLE, where any task would preempt it.
    const bool large = LargeRead(in, msg + sizeof in);
    if (can_pin && large == pinned && ::sched_setaffinity(0, sizeof own, large ? &any : &own) == 0)
      pinned = !large;
    if (large) t_serving.idle_commit = false;
    // A background request goes to the helper where it is not served in place (above).
    if (release_in_place_ || !Background(in.opcode) || !ServeOnHelper(msg, in.len))
      serve_(msg, in.len);
    const bool committed = t_serving.committed;
    if (!t_serving.replied) {
      // Every request the ring carries has a reply; one never sent would hold the entry.
      Log("io_uring transport: no reply to request %llu (opcode %u)",
          static_cast<unsigned long long>(in.unique), in.opcode);
      const fuse_out_header out{sizeof(fuse_out_header), -EIO, in.unique};
      std::memcpy(e.header->in_out, &out, sizeof out);
      e.header->ring_ent_in_out.payload_sz = 0;
    }
    t_serving = {};
    requests_.fetch_add(1, std::memory_order_relaxed);
    if (!committed) ReplyGoes();
    if (!committed && !PrepareCommand(&ring, fd_, FUSE_IO_URING_CMD_COMMIT_AND_FETCH,
                                      static_cast<uint16_t>(qid), io.commit_id, e.iov))
      break;
  }
  // Leaving the ring cancels a command still waiting in the kernel.
  ExitRing(&ring);
  ::munmap(area, e.area_size + sizeof(fuse_uring_req_header));
}

}  // namespace sigilfs::fuse
