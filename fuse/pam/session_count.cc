// The counter file: one decimal number, rewritten in place under flock (closing unlocks).
#include "session_count.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

namespace sigilfs::pam {
namespace {

// Longer than a mount may take (home_session.cc gives it 60 s).
constexpr std::chrono::seconds kLockWait{75};

// /run/sigilfs must be root's own directory: anyone able to replace it could make a user's
// session count lie (mount or unmount at the wrong time).
bool RunDirIsSafe(const Log& log) {
  if (::mkdir(kRunDir, 0700) != 0 && errno != EEXIST) {
    log.Error("mkdir %s: %s", kRunDir, ErrorText(errno).c_str());
    return false;
  }
  struct stat st;
  if (::lstat(kRunDir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
      (st.st_mode & 022) != 0) {
    log.Error("%s is not a directory of root's that only root can write: not used", kRunDir);
    return false;
  }
  return true;
}

}  // namespace

std::optional<SessionCount> SessionCount::Lock(uid_t uid, const Log& log) {
  if (!RunDirIsSafe(log)) return std::nullopt;
  const std::string path = std::string(kRunDir) + "/" + std::to_string(uid);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    log.Error("open %s: %s", path.c_str(), ErrorText(errno).c_str());
    return std::nullopt;
  }
  // The holder may run a mount (up to a minute); one that never lets go (a stopped login
  // process) must not hold every later login of this user forever: wait a bounded time.
  const auto deadline = std::chrono::steady_clock::now() + kLockWait;
  int rc;
  while ((rc = ::flock(fd, LOCK_EX | LOCK_NB)) != 0 &&
         (errno == EINTR || (errno == EWOULDBLOCK && std::chrono::steady_clock::now() < deadline)))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (rc != 0) {
    log.Error("lock %s: %s: the home is left as it is", path.c_str(),
              errno == EWOULDBLOCK ? "still held by another session after 75 s"
                                   : ErrorText(errno).c_str());
    ::close(fd);
    return std::nullopt;
  }
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  const long value = n > 0 ? std::strtol(buf, nullptr, 10) : 0;
  return SessionCount(fd, value > 0 && value < 1000000 ? static_cast<int>(value) : 0);
}

SessionCount::SessionCount(SessionCount&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), value_(other.value_) {}

SessionCount::~SessionCount() {
  if (fd_ >= 0) ::close(fd_);
}

bool SessionCount::Set(int value, const Log& log) {
  const std::string text = std::to_string(value) + "\n";
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    log.Error("cannot write the session count: %s", ErrorText(errno).c_str());
    return false;
  }
  value_ = value;
  return true;
}

}  // namespace sigilfs::pam
