// Several processes writing and reading different and the same files on one mount at once;
// afterwards (and after a remount) every byte is what the writers wrote.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
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
// on any filesystem), so a page may mix two rounds. What must hold is that every byte is one
// a writer wrote at that offset, or still zero: never a stale decryption, never garbage,
// never an error.
int Reader(const std::string& shared, int writers) {
  int fd = ::open(shared.c_str(), O_RDONLY);
  if (fd < 0) return 20;
  for (int i = 0; i < 200; ++i) {
    for (int w = 0; w < writers; ++w) {
      char buf[4096];
      if (::pread(fd, buf, sizeof buf, static_cast<off_t>(w) * 8192) != sizeof buf) return 21;
      int runs = 0;
      int last_round = -1;
      for (size_t b = 0; b < sizeof buf; ++b) {
        if (buf[b] == '\0') continue;  // not yet written
        const int value = static_cast<unsigned char>(buf[b]) - 0x20;
        if (value < w * 24 || value >= (w + 1) * 24) return 22;  // another writer's bytes
        const int round = (value - w * 24 - static_cast<int>(b % 24) + 48) % 24;
        if (round != last_round) ++runs;
        last_round = round;
      }
      // A torn copy joins a few whole runs; more means bytes from nowhere.
      if (runs > 8) return 23;
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

}  // namespace
}  // namespace sigilfs
