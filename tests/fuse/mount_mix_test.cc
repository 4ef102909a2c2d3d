// A random mix of mapped and ordinary I/O, fallocate and truncates on one file, against a model.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "test_support/mount.h"
#include "test_support/process.h"
#include "test_support/syscall_assert.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kPage = 4096;
constexpr uint64_t kFileBytes = 8 << 20;  // the file's largest size, and the mapping's length
constexpr uint64_t kMaxIo = 256 << 10;
// An operation (or one call of the reader) taking longer than this is a hang.
constexpr int64_t kStallNs = 30'000'000'000;
constexpr int kSigbusExit = 3;

enum Kind {
  kSetup,
  kPwrite,
  kPread,
  kMapWrite,
  kMapRead,
  kReserve,
  kPunch,
  kZeroKeepSize,
  kZero,
  kShrink,
  kGrow,
  kMsync,
  kFsync,
  kRemap,
  kDropCache,
  kFinal,
  // The reader's calls.
  kReadSequential,
  kReadRandom,
  kFstat,
  kAdviseDontNeed,
  kAdviseWillNeed,
  kKinds
};
constexpr const char* kKindNames[] = {"setup",
                                      "pwrite",
                                      "pread",
                                      "mapped write",
                                      "mapped read",
                                      "fallocate KEEP_SIZE",
                                      "fallocate PUNCH_HOLE|KEEP_SIZE",
                                      "fallocate ZERO_RANGE|KEEP_SIZE",
                                      "fallocate ZERO_RANGE",
                                      "ftruncate down",
                                      "ftruncate up",
                                      "msync",
                                      "fsync",
                                      "remap",
                                      "fadvise DONTNEED",
                                      "final check",
                                      "sequential read",
                                      "random pread",
                                      "fstat",
                                      "fadvise DONTNEED",
                                      "fadvise WILLNEED"};
static_assert(std::size(kKindNames) == kKinds);
// The mix's operations and their weights (percent).
constexpr Kind kMixKinds[] = {kPwrite, kPread,        kMapWrite, kMapRead,  kReserve,
                              kPunch,  kZeroKeepSize, kZero,     kShrink,   kGrow,
                              kMsync,  kFsync,        kRemap,    kDropCache};
constexpr int kMixWeights[] = {16, 14, 12, 14, 3, 5, 4, 4, 12, 8, 3, 2, 1, 2};
static_assert(std::size(kMixKinds) == std::size(kMixWeights));

int64_t NowNs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// What one process is doing, published for the watchdog in the parent.
struct Beat {
  std::atomic<uint64_t> number{0};  // the mix: its operation under way; the reader: calls begun
  std::atomic<int> kind{kSetup};
  std::atomic<uint64_t> offset{0}, length{0}, size{0};  // the call's arguments; the file's size
  std::atomic<int64_t> since_ns{0};                     // when it began
  std::atomic<bool> running{false};                     // whether the watchdog looks at it

  void Start(int what, uint64_t at, uint64_t bytes, uint64_t file_size) {
    size.store(file_size);
    kind.store(what);
    offset.store(at);
    length.store(bytes);
    since_ns.store(NowNs());
  }
};

// Shared (MAP_SHARED anonymous) between the parent and the forked child, so the parent sees the
// child's progress even when the child is stuck in the kernel and can say nothing itself.
struct Shared {
  Beat mix, reader;
  std::atomic<int> failed{0};  // 1 once `failure` holds the first failure's account
  std::atomic<int> sigbus{0};
  std::atomic<uint64_t> sigbus_offset{0};
  std::atomic<int64_t> start_ns{0};    // when the mix (after the setup) began
  std::atomic<int64_t> elapsed_ns{0};  // the whole mix, set when it ends well
  char failure[16384] = {};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
              std::atomic<int64_t>::is_always_lock_free);

std::string Describe(const Beat& b) {
  const int kind = b.kind.load();
  return "#" + std::to_string(b.number.load()) + " (" +
         (kind >= 0 && kind < kKinds ? kKindNames[kind] : "?") + " at " +
         std::to_string(b.offset.load()) + " length " + std::to_string(b.length.load()) +
         ", file size " + std::to_string(b.size.load()) + ")";
}

// Records the first failure of either thread of the child and ends the child. A second one
// waits for the first to end the process, so it cannot cut the first one's account short.
[[noreturn]] void FailChild(Shared* shared, const std::string& text) {
  int expected = 0;
  if (!shared->failed.compare_exchange_strong(expected, 1)) {
    for (;;) ::pause();
  }
  std::snprintf(shared->failure, sizeof shared->failure, "%s", text.c_str());
  ::_exit(1);
}

// A mapped access past the end of the file, or to a page the daemon fails to read, raises
// SIGBUS: the handler says where before the child dies, instead of a bare signal.
Shared* g_shared = nullptr;
std::atomic<const uint8_t*> g_map{nullptr};
void OnSigbus(int, siginfo_t* info, void*) {
  g_shared->sigbus_offset.store(
      static_cast<uint64_t>(static_cast<const uint8_t*>(info->si_addr) - g_map.load()));
  g_shared->sigbus.store(1);
  ::_exit(kSigbusExit);
}

class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  uint64_t Pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }
  uint64_t Between(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }
  bool Chance(int percent) { return Pick(100) < static_cast<uint64_t>(percent); }
  void Fill(uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
      const uint64_t w = rng_();
      for (size_t b = 0; b < 8 && i + b < n; ++b) p[i + b] = static_cast<uint8_t>(w >> (8 * b));
    }
  }
  // Lengths of every kind the daemon treats differently: a few bytes within one page, whole
  // pages, tens of KiB across page boundaries, and runs long enough that it reads them past its
  // page cache.
  uint64_t Length() {
    switch (Pick(4)) {
      case 0:
        return Between(1, 600);
      case 1:
        return kPage * Between(1, 16);
      case 2:
        return Between(600, 64 << 10);
      default:
        return Between(64 << 10, kMaxIo);
    }
  }

 private:
  std::mt19937_64 rng_;
};

// Keeps the reader's calls out of the window of a write through the descriptor. Without a
// write-back cache such a write copies its bytes into the kernel's page cache first and sends
// the WRITE after; a read or fstat that refreshes the attributes meanwhile and finds them
// changed makes the kernel drop every cached page of the file, those just written included, and
// read-ahead may fetch them from the daemon again before the WRITE has reached it: the old bytes
// then stay cached over the new ones. That race is the kernel's, not the daemon's. So the
// reader's calls and the mix's writes take turns; the read-ahead those calls start still runs
// beside everything, truncates included.
class Turns {
 public:
  std::unique_lock<std::mutex> ForReader() {
    while (writer_waiting_.load()) std::this_thread::yield();  // the writer is not starved
    return std::unique_lock(mu_);
  }
  std::unique_lock<std::mutex> ForWriter() {
    writer_waiting_.store(true);
    std::unique_lock lock(mu_);
    writer_waiting_.store(false);
    return lock;
  }

 private:
  std::mutex mu_;
  std::atomic<bool> writer_waiting_{false};
};

// The reader beside the mix: its own descriptor, sequential scans (which the kernel follows with
// read-ahead), random reads and cache hints. Its data cannot be checked (the mix changes the file
// under it), only its errors: a racing truncate explains a short read or none, never an error.
class Reader {
 public:
  Reader(const std::string& path, uint64_t seed, Shared* shared, Turns& turns)
      : rng_(seed), shared_(shared), turns_(turns), buf_(kMaxIo) {
    fd_ = ::open(path.c_str(), O_RDONLY);
    if (fd_ < 0) FailChild(shared_, "reader: open: " + test::ErrnoName(errno));
  }
  ~Reader() { ::close(fd_); }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  void Run(const std::atomic<bool>& stop) {
    while (!stop.load(std::memory_order_relaxed)) {
      Begin(kFstat, 0, 0);
      struct stat st;
      if (Call([&] { return ::fstat(fd_, &st); }) != 0) Fail("fstat", errno);
      size_ = static_cast<uint64_t>(st.st_size);
      const uint64_t size = size_;
      const uint64_t r = rng_.Pick(100);
      if (r < 55) {
        // From the start or from a page inside the file, to its end or for a while.
        uint64_t pos = rng_.Chance(50) || size == 0 ? 0 : rng_.Pick(size) / kPage * kPage;
        const uint64_t chunk = rng_.Chance(50) ? 128 << 10 : rng_.Between(1, kMaxIo);
        if (::lseek(fd_, static_cast<off_t>(pos), SEEK_SET) < 0) Fail("lseek", errno);
        for (int i = 0; i < 64 && !stop.load(std::memory_order_relaxed); ++i) {
          Begin(kReadSequential, pos, chunk);
          const ssize_t n = Call([&] { return ::read(fd_, buf_.data(), chunk); });
          if (n < 0) Fail("read", errno);
          if (n == 0) break;
          pos += static_cast<uint64_t>(n);
        }
      } else if (r < 82) {
        const uint64_t off = rng_.Pick(kFileBytes);
        const uint64_t len = std::min(rng_.Length(), kFileBytes - off);
        Begin(kReadRandom, off, len);
        if (Call([&] { return ::pread(fd_, buf_.data(), len, static_cast<off_t>(off)); }) < 0)
          Fail("pread", errno);
      } else if (r < 90) {
        // Drops the clean pages of the kernel's cache: the next reads ask the daemon.
        Begin(kAdviseDontNeed, 0, 0);
        const int e = Call([&] { return ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED); });
        if (e != 0) Fail("posix_fadvise(DONTNEED)", e);
      } else {
        // Read-ahead without a reader waiting for it: READs in flight when a truncate comes.
        const uint64_t off = rng_.Pick(kFileBytes) / kPage * kPage;
        const uint64_t len = rng_.Between(kPage, 2 << 20);
        Begin(kAdviseWillNeed, off, len);
        const int e = Call([&] {
          return ::posix_fadvise(fd_, static_cast<off_t>(off), static_cast<off_t>(len),
                                 POSIX_FADV_WILLNEED);
        });
        if (e != 0) Fail("posix_fadvise(WILLNEED)", e);
      }
    }
  }

 private:
  // One call, in the reader's turn.
  template <typename F>
  std::invoke_result_t<F> Call(F f) {
    auto turn = turns_.ForReader();
    return f();
  }
  void Begin(Kind kind, uint64_t offset, uint64_t length) {
    shared_->reader.Start(kind, offset, length, size_);
    shared_->reader.number.fetch_add(1);
  }
  [[noreturn]] void Fail(const char* call, int e) {
    FailChild(shared_, std::string("reader: ") + call + " failed with " + test::ErrnoName(e) +
                           " in call " + Describe(shared_->reader) + "; the mix was at " +
                           Describe(shared_->mix));
  }

  Random rng_;
  Shared* shared_;
  Turns& turns_;
  std::vector<uint8_t> buf_;
  int fd_ = -1;
  uint64_t size_ = 0;  // as the last fstat saw it
};

// The mix: one descriptor and a shared mapping of the whole 8 MiB, every result compared with a
// model of the contents. Bytes of the model past `size_` are kept zero, which is what a file
// grown over them reads.
class Mix {
 public:
  Mix(std::string path, uint64_t seed, uint64_t ops, Shared* shared, std::string model_out)
      : path_(std::move(path)),
        rng_(seed),
        ops_(ops),
        shared_(shared),
        model_out_(std::move(model_out)),
        model_(kFileBytes, 0),
        buf_(kMaxIo) {}

  [[noreturn]] void Run() {
    Begin(kSetup, 0, kFileBytes);
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd_ < 0) Fail("open", errno);
    rng_.Fill(model_.data(), kFileBytes);
    for (uint64_t at = 0; at < kFileBytes; at += kMaxIo)
      if (::pwrite(fd_, model_.data() + at, kMaxIo, static_cast<off_t>(at)) !=
          static_cast<ssize_t>(kMaxIo))
        Fail("pwrite", errno);
    size_ = kFileBytes;
    Map();
    g_shared = shared_;
    struct sigaction sa = {};
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO;
    ::sigaction(SIGBUS, &sa, nullptr);

    std::atomic<bool> stop{false};
    Reader reader(path_, rng_.Pick(UINT64_MAX), shared_, turns_);
    shared_->reader.since_ns.store(NowNs());
    shared_->reader.running.store(true);
    std::thread reading([&] { reader.Run(stop); });
    const int64_t start = NowNs();
    shared_->start_ns.store(start);
    std::discrete_distribution<int> pick(std::begin(kMixWeights), std::end(kMixWeights));
    std::mt19937_64 kinds(rng_.Pick(UINT64_MAX));
    for (op_ = 1; op_ <= ops_; ++op_) Do(kMixKinds[pick(kinds)]);
    stop.store(true);
    reading.join();
    shared_->reader.running.store(false);

    Begin(kFinal, 0, 0);
    CheckRead(0, kFileBytes);
    ::munmap(map_, kFileBytes);
    if (::fsync(fd_) != 0) Fail("fsync", errno);
    ::close(fd_);
    std::ofstream(model_out_, std::ios::binary)
        .write(reinterpret_cast<const char*>(model_.data()), static_cast<std::streamsize>(size_));
    shared_->elapsed_ns.store(NowNs() - start);
    ::_exit(0);
  }

 private:
  void Do(Kind kind) {
    switch (kind) {
      case kPwrite: {
        const uint64_t off = Offset();
        const uint64_t len = Clip(off, rng_.Length());
        Begin(kind, off, len);
        rng_.Fill(buf_.data(), len);
        CleanEndPageBeforeGrowing(off, len);
        const ssize_t n = [&] {
          auto turn = turns_.ForWriter();
          return ::pwrite(fd_, buf_.data(), len, static_cast<off_t>(off));
        }();
        if (n != static_cast<ssize_t>(len)) Fail("pwrite", n < 0 ? errno : 0, n);
        std::memcpy(model_.data() + off, buf_.data(), len);
        size_ = std::max(size_, off + len);
        break;
      }
      case kPread: {
        // Sometimes past the end of the file, which reads short or nothing.
        const uint64_t off = rng_.Chance(10) ? rng_.Pick(kFileBytes) : Offset();
        CheckRead(off, Clip(off, rng_.Length()));
        break;
      }
      case kMapWrite: {
        if (size_ == 0) {  // nothing to map
          Begin(kind, 0, 0);
          break;
        }
        const uint64_t off = Inside();
        const uint64_t len = std::min(rng_.Length(), size_ - off);
        Begin(kind, off, len);
        rng_.Fill(model_.data() + off, len);
        std::memcpy(map_ + off, model_.data() + off, len);
        for (uint64_t p = off / kPage; p <= (off + len - 1) / kPage; ++p) mapped_dirty_[p] = true;
        break;
      }
      case kMapRead: {
        if (size_ == 0) {
          Begin(kind, 0, 0);
          break;
        }
        const uint64_t off = Inside();
        const uint64_t len = std::min(rng_.Length(), size_ - off);
        Begin(kind, off, len);
        if (std::memcmp(map_ + off, model_.data() + off, len) != 0)
          Mismatch(off, map_ + off, len, "the mapping");
        break;
      }
      case kReserve:
      case kPunch:
      case kZeroKeepSize:
      case kZero: {
        const uint64_t off = Offset();
        const uint64_t len = Clip(off, rng_.Length());
        Begin(kind, off, len);
        const int mode = kind == kReserve ? FALLOC_FL_KEEP_SIZE
                         : kind == kPunch ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                         : kind == kZero  ? FALLOC_FL_ZERO_RANGE
                                          : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
        if (::fallocate(fd_, mode, static_cast<off_t>(off), static_cast<off_t>(len)) != 0)
          Fail("fallocate", errno);
        if (kind == kReserve) break;
        const uint64_t end = kind == kZero ? off + len : std::min(size_, off + len);
        if (off < end) std::fill(model_.begin() + off, model_.begin() + end, 0);
        if (kind == kZero) size_ = std::max(size_, off + len);
        break;
      }
      case kShrink: {
        // Half the time a little off the end (inside the read-ahead window of a reader near
        // the end), else anywhere.
        const uint64_t to = size_ == 0        ? 0
                            : rng_.Chance(50) ? size_ - std::min(size_, rng_.Between(1, kMaxIo))
                                              : rng_.Pick(size_);
        Truncate(kind, rng_.Chance(30) ? to / kPage * kPage : to);
        break;
      }
      case kGrow: {
        const uint64_t r = rng_.Pick(10);
        const uint64_t to = r < 2 || size_ == kFileBytes ? kFileBytes
                            : r < 5 ? std::min(kFileBytes, size_ + rng_.Between(1, kMaxIo))
                                    : rng_.Between(size_ + 1, kFileBytes);
        Truncate(kind, to);
        break;
      }
      case kMsync: {
        Begin(kind, 0, size_);
        const bool sync = rng_.Chance(50);
        if (::msync(map_, kFileBytes, sync ? MS_SYNC : MS_ASYNC) != 0) Fail("msync", errno);
        if (sync) std::fill(mapped_dirty_.begin(), mapped_dirty_.end(), false);
        break;
      }
      case kFsync:
        Begin(kind, 0, size_);
        if ((rng_.Chance(50) ? ::fsync(fd_) : ::fdatasync(fd_)) != 0) Fail("fsync", errno);
        std::fill(mapped_dirty_.begin(), mapped_dirty_.end(), false);
        break;
      case kRemap:
        Begin(kind, 0, kFileBytes);
        if (::munmap(map_, kFileBytes) != 0) Fail("munmap", errno);
        Map();
        break;
      case kDropCache: {
        Begin(kind, 0, 0);
        const int e = ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
        if (e != 0) Fail("posix_fadvise(DONTNEED)", e);
        break;
      }
      default:
        break;
    }
    Note();
  }

  // An offset for a write or fallocate: mostly inside the file, sometimes past its end.
  uint64_t Offset() {
    const uint64_t bound = std::min(kFileBytes, size_ + (64 << 10));
    const uint64_t off = rng_.Pick(bound);
    return rng_.Chance(30) ? off / kPage * kPage : off;
  }
  uint64_t Inside() {
    const uint64_t off = rng_.Pick(size_);
    return rng_.Chance(30) ? off / kPage * kPage : off;
  }
  static uint64_t Clip(uint64_t off, uint64_t len) { return std::min(len, kFileBytes - off); }

  // The kernel writes back the page holding the end of the file only up to the end, and zeroes
  // the rest of it (a mapping may have put bytes there). A write through the descriptor that
  // grows the file copies its bytes into that page before it moves the end: a write-back of the
  // page dirtied through the mapping at that moment zeroes them again, in the page cache or, if
  // still unsent, in the WRITE itself. That race is the kernel's, not the daemon's, so such a
  // page is written back before a write that grows the file into it.
  void CleanEndPageBeforeGrowing(uint64_t off, uint64_t len) {
    const uint64_t page = size_ / kPage;
    if (size_ % kPage == 0 || off + len <= size_ || off >= (page + 1) * kPage ||
        !mapped_dirty_[page])
      return;
    if (::msync(map_ + page * kPage, kPage, MS_SYNC) != 0) Fail("msync", errno);
    mapped_dirty_[page] = false;
  }

  void Truncate(Kind kind, uint64_t to) {
    Begin(kind, to, 0);
    if (::ftruncate(fd_, static_cast<off_t>(to)) != 0) Fail("ftruncate", errno);
    if (to < size_) std::fill(model_.begin() + to, model_.begin() + size_, 0);
    size_ = to;
  }

  void CheckRead(uint64_t off, uint64_t len) {
    if (shared_->mix.kind.load() != kFinal) Begin(kPread, off, len);
    std::vector<uint8_t>& out = len <= buf_.size() ? buf_ : whole_;
    out.resize(std::max<size_t>(out.size(), len));
    const ssize_t n = ::pread(fd_, out.data(), len, static_cast<off_t>(off));
    const uint64_t expected = off >= size_ ? 0 : std::min(len, size_ - off);
    if (n != static_cast<ssize_t>(expected))
      Fail("pread (expected " + std::to_string(expected) + " bytes)", n < 0 ? errno : 0, n);
    if (std::memcmp(out.data(), model_.data() + off, expected) != 0)
      Mismatch(off, out.data(), expected, "pread");
  }

  void Map() {
    void* p = ::mmap(nullptr, kFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) Fail("mmap", errno);
    map_ = static_cast<uint8_t*>(p);
    g_map.store(map_);
  }

  // --- Reporting. ---
  void Begin(Kind kind, uint64_t offset, uint64_t length) {
    shared_->mix.number.store(op_);
    shared_->mix.Start(kind, offset, length, size_);
  }
  // The operations done, for the report of a failure: the last few, and the last ones that
  // touched the byte found wrong.
  struct Done {
    uint64_t op;
    int kind;
    uint64_t offset, length, size;
  };
  void Note() {
    const Beat& b = shared_->mix;
    history_[op_ % kHistory] = {op_, b.kind.load(), b.offset.load(), b.length.load(),
                                b.size.load()};
  }
  static std::string Text(const Done& d) {
    return "#" + std::to_string(d.op) + " (" + kKindNames[d.kind] + " at " +
           std::to_string(d.offset) + " length " + std::to_string(d.length) + ", file size " +
           std::to_string(d.size) + ")";
  }
  // Whether `d` read, wrote or cut any byte of the page holding `at` (a truncate: the bytes
  // between both sizes): the kernel caches, and writes back, whole pages.
  static bool Touched(const Done& d, uint64_t at) {
    const uint64_t page = at / kPage * kPage;
    uint64_t lo = d.offset, hi = d.offset + d.length;
    if (d.kind == kShrink || d.kind == kGrow) {
      lo = std::min(d.offset, d.size);
      hi = std::max(d.offset, d.size);
    }
    return lo < page + kPage && hi > page;
  }

  [[noreturn]] void Fail(const std::string& what, int e, ssize_t returned = -1) {
    std::string text = what + (returned >= 0 ? " returned " + std::to_string(returned)
                                             : " failed with " + test::ErrnoName(e));
    Report(text, UINT64_MAX);
  }
  [[noreturn]] void Mismatch(uint64_t off, const uint8_t* got, uint64_t len, const char* via) {
    uint64_t i = 0;
    while (i < len && got[i] == model_[off + i]) ++i;
    const uint64_t at = off + i;
    // The stretches that differ (up to a few), which tell a lost page from a lost write.
    std::string runs;
    uint64_t differ = 0, shown = 0;
    for (uint64_t k = i; k < len;) {
      if (got[k] == model_[off + k]) {
        ++k;
        continue;
      }
      uint64_t e = k;
      // A byte that matches by chance (1 in 256) does not end a stretch.
      while (e < len &&
             (got[e] != model_[off + e] || (e + 1 < len && got[e + 1] != model_[off + e + 1])))
        ++e;
      differ += e - k;
      if (shown++ < 6)
        runs += " [" + std::to_string(off + k) + ", " + std::to_string(off + e) + ")";
      k = e;
    }
    char text[256];
    std::snprintf(text, sizeof text,
                  "%s read differs from the model at offset %llu (read 0x%02x, model 0x%02x); "
                  "%llu bytes in %llu stretches differ:",
                  via, static_cast<unsigned long long>(at), got[i], model_[at],
                  static_cast<unsigned long long>(differ), static_cast<unsigned long long>(shown));
    Report(text + runs + Reread(at, got[i]), at);
  }
  // Reads the wrong byte again through the kernel's cache, and with O_DIRECT from the daemon,
  // to tell a wrong page in the kernel's cache from wrong contents in the daemon.
  std::string Reread(uint64_t at, uint8_t bad) {
    auto verdict = [&](uint8_t v) {
      return v == model_[at] ? std::string("the model's") : v == bad ? "the same wrong" : "another";
    };
    std::string out;
    uint8_t v = 0;
    if (::pread(fd_, &v, 1, static_cast<off_t>(at)) == 1)
      out += "\nread again: " + verdict(v) + " byte";
    const int direct = ::open(path_.c_str(), O_RDONLY | O_DIRECT);
    void* page = nullptr;
    if (direct >= 0 && ::posix_memalign(&page, kPage, kPage) == 0) {
      const off_t start = static_cast<off_t>(at / kPage * kPage);
      const ssize_t n = ::pread(direct, page, kPage, start);
      if (n > static_cast<ssize_t>(at % kPage))
        out +=
            "; read with O_DIRECT: " + verdict(static_cast<uint8_t*>(page)[at % kPage]) + " byte";
      else
        out += "; read with O_DIRECT: " +
               (n < 0 ? test::ErrnoName(errno) : std::to_string(n) + " bytes");
    }
    std::free(page);
    if (direct >= 0) ::close(direct);
    return out;
  }
  [[noreturn]] void Report(const std::string& what, uint64_t at) {
    std::string text = "mix operation " + Describe(shared_->mix) + ": " + what +
                       "\nthe reader was at " + Describe(shared_->reader) +
                       "\nthe operations before it:";
    for (uint64_t k = op_ > 24 ? op_ - 24 : 1; k < op_; ++k)
      text += "\n| " + Text(history_[k % kHistory]);
    if (at != UINT64_MAX) {
      std::vector<const Done*> touched;
      for (uint64_t k = op_ - 1; k >= 1 && k + kHistory > op_ && touched.size() < 12; --k)
        if (Touched(history_[k % kHistory], at)) touched.push_back(&history_[k % kHistory]);
      text += "\nthe last operations that touched the page of offset " + std::to_string(at) + ":";
      for (auto it = touched.rbegin(); it != touched.rend(); ++it) text += "\n| " + Text(**it);
    }
    FailChild(shared_, text);
  }

  std::string path_;
  Random rng_;
  uint64_t ops_;
  uint64_t op_ = 0;  // the operation under way: 0 the setup, ops_ + 1 the final check
  Shared* shared_;
  std::string model_out_;
  std::vector<uint8_t> model_;
  std::vector<uint8_t> buf_, whole_;
  uint64_t size_ = 0;
  int fd_ = -1;
  uint8_t* map_ = nullptr;
  // Pages written through the mapping since the last msync(MS_SYNC) or fsync (some of them may
  // have been written back since).
  std::vector<bool> mapped_dirty_ = std::vector<bool>(kFileBytes / kPage);
  Turns turns_;
  static constexpr uint64_t kHistory = 8192;
  std::vector<Done> history_ = std::vector<Done>(kHistory);
};

// Each thread of `pid`: its state and, where the kernel shows it, where it waits.
std::string Threads(pid_t pid, bool stacks) {
  std::string out;
  std::error_code ec;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  for (auto it = fs::directory_iterator(task, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string stat = test::ReadAll(it->path() / "stat");
    const size_t paren = stat.rfind(')');
    const char state =
        paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : '?';
    out += "  thread " + it->path().filename().string() + " state " + state + " wchan " +
           test::ReadAll(it->path() / "wchan") + "\n";
    if (!stacks) continue;
    const std::string stack = test::ReadAll(it->path() / "stack");
    size_t lines = 0, at = 0;
    while (at < stack.size() && lines < 8) {
      const size_t nl = stack.find('\n', at);
      out += "    " + stack.substr(at, nl == std::string::npos ? nl : nl - at + 1);
      at = nl == std::string::npos ? stack.size() : nl + 1;
      ++lines;
    }
  }
  return out;
}

std::string Tail(const std::string& s, size_t n) {
  return s.substr(s.size() - std::min(n, s.size()));
}

// One process makes a long random mix of calls on one 8 MiB file, through a shared mapping and
// through its descriptor, while a second thread reads the file with read-ahead beside it. The
// mix runs in a forked child watched by the parent, so that a call that never returns (a
// deadlock in the daemon) fails the test after 30 s, naming the call, instead of hanging it.
// 30,000 operations by default (10,000 under a sanitizer), 1,000,000 under SIGILFS_LONG=1;
// SIGILFS_SEED replays a run's operations (not the timing of the reader against them).
TEST(MountMixTest, MappedAndOrdinaryIoFallocateAndTruncatesMatchAModel) {
  SIGILFS_NEEDS_FUSE();
  const char* env_seed = std::getenv("SIGILFS_SEED");
  const uint32_t seed = env_seed ? static_cast<uint32_t>(std::strtoul(env_seed, nullptr, 10))
                                 : static_cast<uint32_t>(std::random_device{}());
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr uint64_t kShort = 10'000;  // the daemon runs several times slower there
#else
  constexpr uint64_t kShort = 30'000;
#endif
  const uint64_t ops = std::getenv("SIGILFS_LONG") != nullptr ? 1'000'000 : kShort;
  const std::string replay = "seed " + std::to_string(seed) + ", " + std::to_string(ops) +
                             " operations (rerun with SIGILFS_SEED=" + std::to_string(seed) + ")";
  std::printf("mix: %s\n", replay.c_str());
  std::fflush(stdout);

  test::MountedVault vault;
  test::TempDir outside;
  const std::string model_path = (outside.path() / "model").string();
  void* mem =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  Shared* shared = new (mem) Shared;
  shared->mix.since_ns.store(NowNs());
  shared->mix.running.store(true);

  const pid_t child = ::fork();
  ASSERT_GE(child, 0) << test::ErrnoName(errno);
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test killed outright takes its mix along
    Mix(vault.path("f"), seed, ops, shared, model_path).Run();
  }

  // Watch until the child ends; a call begun more than 30 s ago is a hang.
  int status = 0;
  std::string stall;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    const int64_t now = NowNs();
    for (const Beat* b : {&shared->mix, &shared->reader}) {
      if (!b->running.load() || now - b->since_ns.load() <= kStallNs) continue;
      stall += std::string(b == &shared->mix ? "the mix" : "the reader") + " has been in call " +
               Describe(*b) + " for " + std::to_string((now - b->since_ns.load()) / 1'000'000'000) +
               " s\n";
    }
    if (!stall.empty() && shared->start_ns.load() != 0) {
      const int64_t began = shared->start_ns.load();
      stall += "(the mix's current call began " +
               std::to_string((shared->mix.since_ns.load() - began) / 1'000'000) +
               " ms into the mix)\n";
    }
    if (!stall.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!stall.empty()) {
    const std::string where = "the test process:\n" + Threads(child, true) + "the daemon:\n" +
                              Threads(vault.pid(), false);
    ::kill(child, SIGKILL);
    // The stuck call waits for the daemon, and SIGKILL does not end a wait for a page lock:
    // killing the daemon aborts the connection, which ends every request pending on it.
    vault.Kill();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    bool reaped = false;
    while (!(reaped = ::waitpid(child, &status, WNOHANG) == child) &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ADD_FAILURE() << "hang, " << replay << ":\n"
                  << stall << where << (reaped ? "" : "the test process could not be reaped\n")
                  << "daemon log (end):\n"
                  << Tail(vault.log(), 3000);
    ::munmap(mem, sizeof(Shared));
    return;
  }

  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (shared->sigbus.load() != 0) {
    ADD_FAILURE() << replay << ": SIGBUS on the mapping at offset " << shared->sigbus_offset.load()
                  << " in operation " << Describe(shared->mix) << "\ndaemon log (end):\n"
                  << Tail(vault.log(), 3000);
  } else if (!ok) {
    ADD_FAILURE() << replay << ": "
                  << (shared->failed.load() != 0
                          ? shared->failure
                          : "the mix ended with status " + std::to_string(status) +
                                " in operation " + Describe(shared->mix))
                  << "\ndaemon log (end):\n"
                  << Tail(vault.log(), 3000);
  }
  const int64_t elapsed_ns = shared->elapsed_ns.load();
  const uint64_t reader_calls = shared->reader.number.load();
  ::munmap(mem, sizeof(Shared));
  if (!ok) return;
  std::printf("mix: %llu operations in %.1f s; the reader made %llu calls beside them\n",
              static_cast<unsigned long long>(ops), static_cast<double>(elapsed_ns) / 1e9,
              static_cast<unsigned long long>(reader_calls));

  // What the mix left must also be what the vault holds once mounted again.
  vault.Remount();
  const std::string model = test::ReadAll(model_path);
  const std::string file = test::ReadAll(vault.path("f"));
  ASSERT_EQ(file.size(), model.size()) << replay;
  size_t i = 0;
  while (i < file.size() && file[i] == model[i]) ++i;
  EXPECT_EQ(i, file.size()) << replay << ": after a remount the file differs from the model at "
                            << "offset " << i;
}

}  // namespace
}  // namespace sigilfs
