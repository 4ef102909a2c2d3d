// Readers following appenders through the mount (`tail -f`, a log shipper): a read that meets
// the end of a growing file returns what is there, never EIO, and every record read is whole.
// 8 s by default, 30 s under SIGILFS_LONG=1.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "test_support/mount.h"

namespace sigilfs {
namespace {

// Records of odd sizes (writes straddle pages and end mid-page), each "<writer><seq>:" and a
// body that repeats a byte derived from both, then '\n': a reader can check every one it sees.
constexpr size_t kRecord = 1237;

std::string Record(int writer, unsigned seq) {
  std::string head = std::to_string(writer) + "." + std::to_string(seq) + ":";
  std::string r = head + std::string(kRecord - head.size() - 1,
                                     static_cast<char>('a' + (writer * 7 + seq) % 26));
  r += '\n';
  return r;
}

// Appends records until `until`; exit code 0 or the failing step.
int Appender(const std::string& path, int writer, std::chrono::steady_clock::time_point until) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return 10;
  for (unsigned seq = 0; std::chrono::steady_clock::now() < until; ++seq) {
    const std::string r = Record(writer, seq);
    if (::write(fd, r.data(), r.size()) != static_cast<ssize_t>(r.size())) return 11;
    if (seq % 64 == 63 && ::fdatasync(fd) != 0) return 12;
  }
  return ::close(fd) == 0 ? 0 : 13;
}

// Checks a whole record; false if it is not one an appender wrote.
bool WellFormed(const std::string& r) {
  const size_t dot = r.find('.'), colon = r.find(':');
  if (r.size() != kRecord || dot == std::string::npos || colon == std::string::npos || dot > colon)
    return false;
  const int writer = std::atoi(r.substr(0, dot).c_str());
  const auto seq =
      static_cast<unsigned>(std::strtoul(r.substr(dot + 1, colon - dot - 1).c_str(), nullptr, 10));
  return r == Record(writer, seq);
}

// Follows the file from its start with reads of `chunk` bytes until `until` and a little after
// (to take in the last appends), checking every record if `check`; exit code 0, or 20 for an
// error (EIO), 21 for a bad record.
// With `direct` (O_DIRECT) the kernel passes reads past the end of the file on to the daemon
// instead of cutting them at the size it knows, so the daemon meets the growing end itself.
int Follower(const std::string& path, size_t chunk, bool direct, bool check,
             std::chrono::steady_clock::time_point until) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (fd < 0) return 19;
  std::string pending;
  std::vector<char> buf(chunk);
  off_t at = 0;
  const auto stop = until + std::chrono::milliseconds(500);
  while (std::chrono::steady_clock::now() < stop) {
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), at);
    if (n < 0) return 20;
    if (n == 0) {
      ::usleep(200);
      continue;
    }
    at += n;
    pending.append(buf.data(), static_cast<size_t>(n));
    while (pending.size() >= kRecord) {
      if (check && !WellFormed(pending.substr(0, kRecord))) {
        const std::string bad = pending.substr(0, kRecord);
        size_t zeros = 0;
        for (char c : bad) zeros += c == 0;
        std::fprintf(
            stderr,
            "bad record at %lld (read in pieces of %zu): %zu zero bytes, starts \"%.20s\"\n",
            static_cast<long long>(at) - static_cast<long long>(pending.size()), chunk, zeros,
            bad.c_str());
        return 21;
      }
      pending.erase(0, kRecord);
    }
  }
  return ::close(fd) == 0 ? 0 : 22;
}

// Three appenders and six followers (buffered and O_DIRECT, reads of three sizes); with
// `check_buffered`, the buffered followers check every record as the O_DIRECT ones do.
void FollowAppenders(bool check_buffered) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault vault;
  const std::string log = vault.path("log");
  {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  const auto seconds = std::getenv("SIGILFS_LONG") != nullptr ? 30 : 8;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::vector<std::pair<pid_t, std::string>> children;
  for (int w = 0; w < 3; ++w) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(Appender(log, w, until));
    children.emplace_back(pid, "appender " + std::to_string(w));
  }
  // Readers of several sizes: page-sized (the kernel's read-ahead), odd and large, through the
  // page cache and past it.
  for (size_t chunk : {size_t{4096}, size_t{1000}, size_t{200000}}) {
    for (bool direct : {false, true}) {
      const pid_t pid = ::fork();
      if (pid == 0) ::_exit(Follower(log, chunk, direct, direct || check_buffered, until));
      children.emplace_back(pid, std::string(direct ? "direct " : "") + "reader of " +
                                     std::to_string(chunk) + " bytes");
    }
  }
  for (const auto& [pid, what] : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << what;
    EXPECT_EQ(WEXITSTATUS(status), 0) << what << " (20: a read failed, 21: a bad record)\n"
                                      << vault.log();
  }
  // And the whole file, read again after the appends, is whole records.
  const std::string all = test::ReadAll(log);
  ASSERT_EQ(all.size() % kRecord, 0u);
  for (size_t i = 0; i < all.size(); i += kRecord)
    ASSERT_TRUE(WellFormed(all.substr(i, kRecord))) << "record at " << i;
}

TEST(MountFollowTest, ReadersFollowingAppendersNeverSeeAnError) { FollowAppenders(false); }

// Buffered followers check every record too; they read the kernel's cached pages. Under
// auto_inval_data the kernel dropped a file's pages whenever its mtime moved, and that drop
// could take the page an append had just copied in before the write reached the daemon; a read
// then cached the page as it was, and the record read as zeros (5 of 15 runs).
TEST(MountFollowTest, BufferedFollowersReadEveryRecordWhole) { FollowAppenders(true); }

}  // namespace
}  // namespace sigilfs
