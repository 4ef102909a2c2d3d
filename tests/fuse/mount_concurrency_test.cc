// Several processes writing and reading different and the same files on one mount at once;
// afterwards (and after a remount) every byte is what the writers wrote.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/aio_abi.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bitset>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_support/mount.h"
#include "test_support/requirements.h"

namespace sigilfs {
namespace {

constexpr size_t kChunk = 12345;  // odd: writes straddle pages
constexpr int kRounds = 40;

// Each byte names its writer (a band of 24 values per writer, so at most 4 writers) and
// its round modulo 24, and depends on its offset; zero is never written.
char FillByte(int writer, int round, size_t offset) {
  return static_cast<char>(0x20 + writer * 24 + (round + offset) % 24);
}

std::string Fill(int writer, int round, size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = FillByte(writer, round, i);
  return s;
}

// Child process body: returns the exit code (0 = fine).
int Writer(const std::string& own, const std::string& shared, int id) {
  int fd = ::open(own.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  int sfd = ::open(shared.c_str(), O_RDWR);
  if (fd < 0 || sfd < 0) return 10;
  for (int round = 0; round < kRounds; ++round) {
    const std::string data = Fill(id, round, kChunk);
    if (::pwrite(fd, data.data(), data.size(), static_cast<off_t>(round) * kChunk) !=
        static_cast<ssize_t>(data.size()))
      return 11;
    // Its own stripe of the shared file: 4 KiB-aligned slots of 5000 bytes, one per writer.
    const std::string stripe = Fill(id, round, 5000);
    if (::pwrite(sfd, stripe.data(), stripe.size(), static_cast<off_t>(id) * 8192) !=
        static_cast<ssize_t>(stripe.size()))
      return 12;
    std::string back(kChunk, '\0');
    if (::pread(fd, back.data(), back.size(), static_cast<off_t>(round) * kChunk) !=
            static_cast<ssize_t>(back.size()) ||
        back != data)
      return 13;
    if (round % 10 == 9 && ::fsync(fd) != 0) return 14;
  }
  ::close(sfd);
  return ::close(fd) == 0 ? 0 : 15;
}

// Reads the shared file over and over. Linux does not make a read atomic against a
// concurrent write (the kernel copies into and out of a cached page without a common lock,
// on any filesystem), so a page may mix rounds: a copy running beside a write at about its
// speed crosses the write's front again and again (seen: 15 runs alternating between two
// rounds). What must hold is that every byte is one a writer wrote at that offset, or still
// zero, and that a page holds no more than the few rounds a copy can overlap: never a stale
// decryption, never garbage, never an error.
int Reader(const std::string& shared, int writers) {
  int fd = ::open(shared.c_str(), O_RDONLY);
  if (fd < 0) return 20;
  for (int i = 0; i < 200; ++i) {
    for (int w = 0; w < writers; ++w) {
      char buf[4096];
      if (::pread(fd, buf, sizeof buf, static_cast<off_t>(w) * 8192) != sizeof buf) return 21;
      std::bitset<24> rounds;  // modulo 24
      for (size_t b = 0; b < sizeof buf; ++b) {
        if (buf[b] == '\0') continue;  // not yet written
        const int value = static_cast<unsigned char>(buf[b]) - 0x20;
        if (value < w * 24 || value >= (w + 1) * 24) return 22;  // another writer's bytes
        rounds.set(static_cast<size_t>((value - w * 24 - static_cast<int>(b % 24) + 48) % 24));
      }
      // The rounds seen lie within three consecutive ones (a copy overlapping two writes at
      // most); anything else is bytes from an older page or from nowhere.
      bool within = rounds.none();
      for (size_t first = 0; first < 24 && !within; ++first) {
        std::bitset<24> window;
        for (size_t k = 0; k < 3; ++k) window.set((first + k) % 24);
        within = (rounds & ~window).none();
      }
      if (!within) return 23;
    }
  }
  ::close(fd);
  return 0;
}

TEST(MountConcurrencyTest, ProcessesWritingAndReadingAtOnce) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault vault;
  constexpr int kWriters = 4;  // FillByte has room for four
  const std::string shared = vault.path("shared");
  {
    int fd = ::open(shared.c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, kWriters * 8192), 0);
    ::close(fd);
  }
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(Writer(vault.path("own" + std::to_string(w)), shared, w));
    children.push_back(pid);
  }
  for (int r = 0; r < 2; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(Reader(shared, kWriters));
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "child " << pid << "\n" << vault.log();
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (int w = 0; w < kWriters; ++w) {
      std::string expect;
      for (int round = 0; round < kRounds; ++round) expect += Fill(w, round, kChunk);
      std::string got(expect.size() + 10, '\0');
      int fd = ::open(vault.path("own" + std::to_string(w)).c_str(), O_RDONLY);
      ASSERT_GE(fd, 0);
      const ssize_t n = ::read(fd, got.data(), got.size());
      ::close(fd);
      got.resize(n < 0 ? 0 : static_cast<size_t>(n));
      EXPECT_TRUE(got == expect) << "writer " << w << " pass " << pass;
      std::string stripe(5000, '\0');
      fd = ::open(shared.c_str(), O_RDONLY);
      ASSERT_EQ(::pread(fd, stripe.data(), stripe.size(), w * 8192), 5000);
      ::close(fd);
      EXPECT_TRUE(stripe == Fill(w, kRounds - 1, 5000)) << "stripe " << w << " pass " << pass;
    }
    vault.Remount();
  }
}

// ---------------------------------------------------------------------------------------------
// Direct writes and the kernel's page cache

constexpr size_t kDirectSize = 32 << 20;  // many requests: more than the kernel sends at once
constexpr size_t kTail = 1 << 20;         // the range read while the write is under way

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// Memory aligned for O_DIRECT, filled with `c`.
std::unique_ptr<char, decltype(&std::free)> AlignedFill(size_t size, char c) {
  void* p = nullptr;
  if (::posix_memalign(&p, 4096, size) != 0) return {nullptr, &std::free};
  std::memset(p, c, size);
  return {static_cast<char*>(p), &std::free};
}

// The first offset in [offset, offset+size) of `fd` that does not read as `c` (buffered), or -1.
long FirstByteNot(int fd, off_t offset, size_t size, char c) {
  std::string buf(size, '\0');
  if (::pread(fd, buf.data(), size, offset) != static_cast<ssize_t>(size)) return -2;
  for (size_t i = 0; i < size; ++i)
    if (buf[i] != c) return static_cast<long>(offset + i);
  return -1;
}

// A direct write reaches the file, not the kernel's page cache: a buffered read of its range
// afterwards, through a descriptor opened before the write (with the old contents cached) or
// one opened after, must return what was written.
TEST(MountConcurrencyTest, BufferedReadsAfterADirectWriteSeeIt) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault vault;
  const std::string f = vault.path("direct");
  {
    FdCloser w{::open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)};
    const std::string old(kDirectSize, 'a');
    ASSERT_EQ(::write(w.fd, old.data(), old.size()), static_cast<ssize_t>(old.size()));
  }
  FdCloser before{::open(f.c_str(), O_RDONLY)};
  ASSERT_GE(before.fd, 0);
  ASSERT_EQ(FirstByteNot(before.fd, 0, kDirectSize, 'a'), -1);  // now in the page cache
  FdCloser direct{::open(f.c_str(), O_RDWR | O_DIRECT)};
  ASSERT_GE(direct.fd, 0) << std::strerror(errno);
  auto data = AlignedFill(kDirectSize, 'b');
  ASSERT_NE(data, nullptr);
  ASSERT_EQ(::pwrite(direct.fd, data.get(), kDirectSize, 0), static_cast<ssize_t>(kDirectSize));
  EXPECT_EQ(FirstByteNot(before.fd, 0, kDirectSize, 'b'), -1);
  FdCloser after{::open(f.c_str(), O_RDONLY)};
  EXPECT_EQ(FirstByteNot(after.fd, 0, kDirectSize, 'b'), -1);
}

// Submits one Linux AIO write of `size` bytes at `offset` (the caller waits for it).
long SubmitWrite(aio_context_t ctx, iocb* cb, int fd, const char* data, size_t size, off_t offset) {
  *cb = iocb{};
  cb->aio_fildes = static_cast<uint32_t>(fd);
  cb->aio_lio_opcode = IOCB_CMD_PWRITE;
  cb->aio_buf = reinterpret_cast<uint64_t>(data);
  cb->aio_nbytes = size;
  cb->aio_offset = offset;
  iocb* list[1] = {cb};
  return ::syscall(SYS_io_submit, ctx, 1, list);
}

// An asynchronous direct write (Linux AIO): the kernel drops the cached pages of its range when
// the write starts, but not when it ends, as it does for a synchronous one. A read of the range
// in between is served from what the file held then and stays in the page cache: the daemon
// must have the kernel drop it once the write is stored. (The kernel's own check, comparing
// the file's mtime when it fetches attributes, does not catch it: a small write is kept in
// the daemon's cache and the cipher file's mtime moves only when it is written back.)
//
// The interleaving is forced: with the daemon stopped, a large direct write to another file
// takes every slot the kernel has for such requests, so the write under test, once past
// dropping its range's pages (mincore shows when), waits for a slot, while a read of the
// range through a mapping (one page, a request of its own) goes straight to the daemon's queue.
// Rounds where the daemon still stored the write first, so the read saw it, are repeated.
TEST(MountConcurrencyTest, BufferedReadsAfterAnAsyncDirectWriteSeeIt) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault vault;
  const std::string target = vault.path("target"), filler = vault.path("filler");
  constexpr size_t kTarget = 1 << 20, kWrite = 16 << 10, kFiller = 64 << 20;
  const long page = ::sysconf(_SC_PAGESIZE);
  {
    const std::string a(kTarget, 'a'), x(kFiller, 'x');
    FdCloser t{::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)};
    FdCloser f{::open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)};
    ASSERT_EQ(::write(t.fd, a.data(), a.size()), static_cast<ssize_t>(a.size()));
    ASSERT_EQ(::write(f.fd, x.data(), x.size()), static_cast<ssize_t>(x.size()));
  }
  FdCloser before{::open(target.c_str(), O_RDONLY)};
  FdCloser direct{::open(target.c_str(), O_RDWR | O_DIRECT)};
  FdCloser filler_direct{::open(filler.c_str(), O_RDWR | O_DIRECT)};
  ASSERT_TRUE(before.fd >= 0 && direct.fd >= 0 && filler_direct.fd >= 0) << std::strerror(errno);
  auto* map =
      static_cast<volatile char*>(::mmap(nullptr, kTarget, PROT_READ, MAP_SHARED, before.fd, 0));
  ASSERT_NE(map, MAP_FAILED);
  ASSERT_EQ(::madvise(const_cast<char*>(map), kTarget, MADV_RANDOM), 0);  // no read-ahead
  aio_context_t ctx = 0;
  ASSERT_EQ(::syscall(SYS_io_setup, 4, &ctx), 0) << std::strerror(errno);
  auto small = AlignedFill(4096, 's');
  auto filling = AlignedFill(kFiller, 'y');
  ASSERT_TRUE(small && filling);
  auto resident = [&] {
    unsigned char in = 0;
    return ::mincore(const_cast<char*>(map), static_cast<size_t>(page), &in) == 0 && (in & 1);
  };
  struct Resume {
    pid_t pid;
    ~Resume() { ::kill(pid, SIGCONT); }
  } resume{vault.pid()};

  bool overtaken = false;
  for (int round = 0; round < 10 && !overtaken; ++round) {
    const char c = static_cast<char>('b' + round);
    auto data = AlignedFill(kWrite, c);
    ASSERT_TRUE(data);
    // The kernel's attributes up to date (it compares the mtime with the next ones it gets),
    // then, as each write's first step asks the daemon for security.capability unless the
    // kernel already knows the file has none (which fetching attributes forgets), a write to
    // each file, so that the writes below do not wait on the stopped daemon before they start.
    // Then page 0 is cached, with the target's bytes before this round's write.
    struct stat st;
    ASSERT_EQ(::fstat(before.fd, &st), 0);
    ASSERT_EQ(::pwrite(direct.fd, small.get(), 4096, kTarget - 4096), 4096);
    ASSERT_EQ(::pwrite(filler_direct.fd, small.get(), 4096, 0), 4096);
    const char old = map[0];
    ASSERT_TRUE(resident());

    ASSERT_EQ(::kill(vault.pid(), SIGSTOP), 0);
    iocb filler_cb, cb;
    long filler_submitted = -1, submitted = -1;
    std::thread fill([&] {
      filler_submitted = SubmitWrite(ctx, &filler_cb, filler_direct.fd, filling.get(), kFiller, 0);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // its requests take the slots
    std::thread write([&] { submitted = SubmitWrite(ctx, &cb, direct.fd, data.get(), kWrite, 0); });
    for (int i = 0; i < 2000 && resident(); ++i)  // the write dropped its range's cached pages
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const bool dropped = !resident();
    char during = 0;
    std::thread read([&] { during = map[0]; });  // a request of its own, queued now
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_EQ(::kill(vault.pid(), SIGCONT), 0);
    fill.join();
    write.join();
    read.join();
    ASSERT_EQ(filler_submitted, 1);
    ASSERT_EQ(submitted, 1);
    io_event done[2];
    ASSERT_EQ(::syscall(SYS_io_getevents, ctx, 2, 2, done, nullptr), 2);
    for (const io_event& e : done) ASSERT_GT(e.res, 0);
    ASSERT_TRUE(dropped) << "the write did not start";
    if (during != old) continue;  // the daemon stored the write before it served the read
    overtaken = true;

    // Every read of the range now sees the write: cached, through a descriptor opened before
    // it, one opened after it, and the mapping.
    EXPECT_EQ(FirstByteNot(before.fd, 0, kWrite, c), -1) << "round " << round;
    FdCloser after{::open(target.c_str(), O_RDONLY)};
    EXPECT_EQ(FirstByteNot(after.fd, 0, kWrite, c), -1) << "round " << round;
    EXPECT_EQ(map[0], c) << "round " << round;
  }
  ::syscall(SYS_io_destroy, ctx);
  ::munmap(const_cast<char*>(map), kTarget);
  EXPECT_TRUE(overtaken) << "no round had the read served before the write was stored";
}

}  // namespace
}  // namespace sigilfs
