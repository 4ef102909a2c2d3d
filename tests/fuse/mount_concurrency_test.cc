// Several processes writing and reading different and the same files on one mount at once;
// afterwards (and after a remount) every byte is what the writers wrote.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "test_support/mount.h"

namespace sigilfs {
namespace {

constexpr size_t kChunk = 12345;  // odd: writes straddle pages
constexpr int kRounds = 40;

std::string Fill(int writer, int round, size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>('A' + (writer * 7 + round + i) % 26);
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

// Reads the shared file over and over: every 5000-byte stripe must be one writer's whole
// round (a write is never seen torn within a page it wrote in one call).
int Reader(const std::string& shared, int writers) {
  int fd = ::open(shared.c_str(), O_RDONLY);
  if (fd < 0) return 20;
  for (int i = 0; i < 200; ++i) {
    for (int w = 0; w < writers; ++w) {
      char buf[4096];
      if (::pread(fd, buf, sizeof buf, static_cast<off_t>(w) * 8192) != sizeof buf) return 21;
      // The first page of a stripe comes from one write call: all from one round.
      bool one_round = false;
      for (int round = -1; round < kRounds && !one_round; ++round) {
        const std::string expect = round < 0 ? std::string(4096, '\0') : Fill(w, round, 4096);
        one_round = std::memcmp(buf, expect.data(), 4096) == 0;
      }
      if (!one_round) return 22;
    }
  }
  ::close(fd);
  return 0;
}

TEST(MountConcurrencyTest, ProcessesWritingAndReadingAtOnce) {
  if (!test::FuseAvailable()) GTEST_SKIP() << "no FUSE here";
  test::MountedVault vault;
  constexpr int kWriters = 4;
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
