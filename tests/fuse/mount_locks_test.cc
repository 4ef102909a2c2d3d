// flock and POSIX record locks between processes on a mount. sigilfs leaves locking to the
// kernel (no lock operations registered, so FUSE keeps the locks locally, which is exact for
// processes on this machine); these tests hold it to the semantics programs rely on.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "test_support/mount.h"
#include "test_support/requirements.h"

namespace sigilfs {
namespace {

// A child process that takes a lock with `lock(fd)`, signals through a pipe, and holds it until
// the parent closes the other pipe.
class LockHolder {
 public:
  template <typename Lock>
  LockHolder(const std::string& path, Lock lock) {
    int ready[2], release[2];
    if (::pipe(ready) != 0 || ::pipe(release) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(release[1]);
      const int fd = ::open(path.c_str(), O_RDWR);
      const char ok = fd >= 0 && lock(fd) ? '1' : '0';
      (void)!::write(ready[1], &ok, 1);
      char c;
      (void)!::read(release[0], &c, 1);  // until the parent lets go
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(release[0]);
    release_ = release[1];
    char ok = '0';
    (void)!::read(ready[0], &ok, 1);
    ::close(ready[0]);
    locked_ = ok == '1';
  }
  ~LockHolder() {
    ::close(release_);
    int status;
    ::waitpid(pid_, &status, 0);
  }
  bool locked() const { return locked_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int release_ = -1;
  bool locked_ = false;
};

struct flock Range(short type, off_t start, off_t len) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = start;
  fl.l_len = len;
  return fl;
}

TEST(MountLocksTest, FlockExcludesOtherProcesses) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault vault;
  const std::string f = vault.path("f");
  std::ofstream(f) << "data";
  const int fd = ::open(f.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  {
    LockHolder holder(f, [](int lfd) { return ::flock(lfd, LOCK_EX) == 0; });
    ASSERT_TRUE(holder.locked());
    EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), -1);
    EXPECT_EQ(errno, EWOULDBLOCK);
    EXPECT_EQ(::flock(fd, LOCK_SH | LOCK_NB), -1);
  }
  EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);  // released when the holder exited
  ::close(fd);
}

TEST(MountLocksTest, PosixRecordLocksConflictOnlyWhereRangesOverlap) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault vault;
  const std::string f = vault.path("f");
  std::ofstream(f) << std::string(100, 'x');
  const int fd = ::open(f.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  LockHolder holder(f, [](int lfd) {
    struct flock fl = Range(F_WRLCK, 0, 10);
    return ::fcntl(lfd, F_SETLK, &fl) == 0;
  });
  ASSERT_TRUE(holder.locked());
  struct flock overlap = Range(F_WRLCK, 5, 1);
  EXPECT_EQ(::fcntl(fd, F_SETLK, &overlap), -1);
  EXPECT_TRUE(errno == EAGAIN || errno == EACCES) << errno;
  struct flock query = Range(F_RDLCK, 0, 100);
  ASSERT_EQ(::fcntl(fd, F_GETLK, &query), 0);
  EXPECT_EQ(query.l_type, F_WRLCK);
  EXPECT_EQ(query.l_pid, holder.pid());
  struct flock beside = Range(F_WRLCK, 10, 90);
  EXPECT_EQ(::fcntl(fd, F_SETLK, &beside), 0);
  // Open file description locks (as used by, e.g., SQLite's unix-excl VFS and QEMU).
  struct flock ofd = Range(F_RDLCK, 0, 1);
  EXPECT_EQ(::fcntl(fd, F_OFD_SETLK, &ofd), -1);
  ::close(fd);
}

}  // namespace
}  // namespace sigilfs
