// The mount record: a locked file per mount in a directory that only the mount's user can write,
// and the socket beside it on which the daemon answers `sigilfs stats`.
#include "sigilfs/fuse/mount_record.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>

namespace sigilfs::fuse {
namespace {

// "major:minor", and nothing that could lead out of the directory.
bool IsDevice(const std::string& device) {
  const size_t colon = device.find(':');
  if (colon == 0 || colon == std::string::npos || colon + 1 == device.size()) return false;
  for (size_t i = 0; i < device.size(); ++i)
    if (i != colon && (device[i] < '0' || device[i] > '9')) return false;
  return true;
}

// A directory opened where it is, and its path for messages.
struct Dir {
  core::UniqueFd fd;
  std::string path;
};

// Opens directory `name` in `parent` (shown as `path`), made 0700 if `make` and it is missing,
// and refused unless it is a directory (not a symbolic link) that `uid` owns and that neither
// group nor others may write: anyone else able to write it could plant or replace a record.
// Missing: kNotFound.
Result<Dir> OpenOwnedDir(int parent, const std::string& name, const std::string& path, uid_t uid,
                         bool make) {
  constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  Dir dir{core::UniqueFd(::openat(parent, name.c_str(), kFlags)), path};
  if (dir.fd.get() < 0 && errno == ENOENT && make) {
    if (::mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST)
      return Status::FromErrno(errno, "mount record directory " + path);
    dir.fd = core::UniqueFd(::openat(parent, name.c_str(), kFlags));
  }
  if (dir.fd.get() < 0) {
    if (errno == ELOOP || errno == ENOTDIR)
      return Status(Code::kPermissionDenied,
                    path + " is not a directory (a symbolic link?): not used", errno);
    return Status::FromErrno(errno, "mount record directory " + path);
  }
  struct stat st;
  if (::fstat(dir.fd.get(), &st) != 0)
    return Status::FromErrno(errno, "mount record directory " + path);
  if (st.st_uid != uid)
    return Status(Code::kPermissionDenied,
                  path + " is owned by uid " + std::to_string(st.st_uid) + ", not " +
                      std::to_string(uid) + ": not used",
                  EPERM);
  if ((st.st_mode & 022) != 0)
    return Status(Code::kPermissionDenied, path + " may be written by group or others: not used",
                  EPERM);
  return dir;
}

// The directory of `uid`'s mount records (made if `make`). For root a fixed place, which every
// root process finds; for another user in its runtime directory, which only it may write.
Result<Dir> OpenRecordDir(uid_t uid, bool make) {
  if (uid == 0) {
    // /run/sigilfs is also the PAM module's, with the same rule (root's, written by root only).
    SIGILFS_ASSIGN_OR_RETURN(Dir top,
                             OpenOwnedDir(AT_FDCWD, "/run/sigilfs", "/run/sigilfs", 0, make));
    return OpenOwnedDir(top.fd.get(), "mounts", "/run/sigilfs/mounts", 0, make);
  }
  // /run/user/UID first (root finds it too); $XDG_RUNTIME_DIR, this process's own, where the
  // system makes none.
  const std::string user_run = "/run/user/" + std::to_string(uid);
  auto runtime = OpenOwnedDir(AT_FDCWD, user_run, user_run, uid, false);
  if (!runtime.ok() && runtime.status().sys_errno() == ENOENT && ::geteuid() == uid) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread of the daemon runs
    if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && xdg[0] == '/')
      runtime = OpenOwnedDir(AT_FDCWD, xdg, xdg, uid, false);
  }
  if (!runtime.ok()) {
    if (runtime.status().sys_errno() != ENOENT) return runtime.status();
    return Status(Code::kNotFound,
                  "no runtime directory for uid " + std::to_string(uid) + " (" + user_run +
                      ", which a login session makes, or $XDG_RUNTIME_DIR)",
                  ENOENT);
  }
  return OpenOwnedDir(runtime->fd.get(), "sigilfs", runtime->path + "/sigilfs", uid, make);
}

// Holds an exclusive lock on a record directory: between daemons of one user (the only ones
// that can open it), so that one's removal of its record never takes another's new one.
class DirLock {
 public:
  explicit DirLock(int fd) : fd_(fd) {
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~DirLock() { ::flock(fd_, LOCK_UN); }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_;
};

// The address of `name` in directory `dir`, reached through the directory's descriptor (there
// is no bindat(2)): the directory checked is the one used, and the path fits sun_path however
// long the directory's own is.
socklen_t AddressIn(int dir, const std::string& name, sockaddr_un* addr) {
  *addr = {};
  addr->sun_family = AF_UNIX;
  const std::string path = "/proc/self/fd/" + std::to_string(dir) + "/" + name;
  std::memcpy(addr->sun_path, path.data(), std::min(path.size(), sizeof addr->sun_path - 1));
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
}

// The socket's name beside record `device`.
std::string SocketName(const std::string& device) { return device + ".sock"; }

// The largest answer believed: the stats are a few KiB.
constexpr size_t kMaxAnswer = size_t{1} << 20;

}  // namespace

Result<MountRecord> MountRecord::Publish(const std::string& device, bool required) {
  if (!IsDevice(device)) {
    if (!required) return MountRecord();
    return Status(Code::kNotFound, "this mount's device is not in /proc/self/mountinfo", ENOENT);
  }
  auto dir = OpenRecordDir(::geteuid(), /*make=*/true);
  if (!dir.ok()) {
    if (!required && dir.status().code() == Code::kNotFound) return MountRecord();
    return dir.status();
  }
  const std::string path = dir->path + "/" + device;
  MountRecord record;
  record.dir_ = std::move(dir->fd);
  const DirLock held(record.dir_.get());
  // Made whole and locked under another name first: no one sees the record unlocked or empty.
  const std::string temp = ".new-" + std::to_string(::getpid());
  (void)::unlinkat(record.dir_.get(), temp.c_str(), 0);  // left by a crash of a process of that id
  core::UniqueFd fd(::openat(record.dir_.get(), temp.c_str(),
                             O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) return Status::FromErrno(errno, "mount record " + path);
  record.fd_ = std::move(fd);
  Status written = ::flock(record.fd_.get(), LOCK_EX | LOCK_NB) == 0
                       ? record.NameThisProcess()
                       : Status::FromErrno(errno, "lock");
  // The socket goes in place before the record: whoever finds the new record finds its socket.
  const std::string temp_socket = SocketName(temp);
  if (written.ok()) written = record.Listen(temp_socket);
  if (written.ok() && ::renameat(record.dir_.get(), temp_socket.c_str(), record.dir_.get(),
                                 SocketName(device).c_str()) != 0)
    written = Status::FromErrno(errno, "rename");
  if (written.ok() &&
      ::renameat(record.dir_.get(), temp.c_str(), record.dir_.get(), device.c_str()) != 0)
    written = Status::FromErrno(errno, "rename");
  if (!written.ok()) {
    (void)::unlinkat(record.dir_.get(), temp_socket.c_str(), 0);
    (void)::unlinkat(record.dir_.get(), temp.c_str(), 0);
    return written.WithContext("mount record " + path);
  }
  record.name_ = device;
  return record;
}

Status MountRecord::Listen(const std::string& name) {
  (void)::unlinkat(dir_.get(), name.c_str(), 0);  // left by a crash of a process of this id
  // Non-blocking: the daemon takes what waits and goes back to its poll.
  socket_ = core::UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (socket_.get() < 0) return Status::FromErrno(errno, "socket");
  sockaddr_un addr;
  const socklen_t len = AddressIn(dir_.get(), name, &addr);
  struct stat st;
  if (::bind(socket_.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0 ||
      ::fchmodat(dir_.get(), name.c_str(), 0600, 0) != 0 ||
      ::fstatat(dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      ::listen(socket_.get(), 16) != 0)
    return Status::FromErrno(errno, "socket");
  socket_dev_ = st.st_dev;
  socket_ino_ = st.st_ino;
  return Status::Ok();
}

void MountRecord::AnswerWaiting(const std::function<std::string()>& answer) const {
  for (int i = 0; i < 16; ++i) {
    const core::UniqueFd peer(
        ::accept4(socket_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (peer.get() < 0) return;  // none waits (or an error: retried when it is readable again)
    // Only the directory's user and root can reach the socket; asked by anyone else all the
    // same (a descriptor passed on), it says nothing.
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(peer.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != ::geteuid() && cred.uid != 0))
      continue;
    const std::string text = answer();
    (void)::send(peer.get(), text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
}

Status MountRecord::NameThisProcess() const {
  if (!recorded()) return Status::Ok();
  const auto self = core::VaultLock::ProcessOf(::getpid());
  if (!self) return Status(Code::kIoError, "cannot read this process's start time", EIO);
  const std::string text = std::to_string(self->pid) + " " + std::to_string(self->start) + "\n";
  if (::ftruncate(fd_.get(), 0) != 0 ||
      ::pwrite(fd_.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    return Status::FromErrno(errno, "mount record");
  return Status::Ok();
}

MountRecord::~MountRecord() {
  if (name_.empty()) return;  // records nothing, or was moved from
  {
    const DirLock held(dir_.get());
    struct stat mine, named;
    if (::fstat(fd_.get(), &mine) == 0 &&
        ::fstatat(dir_.get(), name_.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
        mine.st_dev == named.st_dev && mine.st_ino == named.st_ino)
      (void)::unlinkat(dir_.get(), name_.c_str(), 0);
    const std::string socket_name = SocketName(name_);
    if (::fstatat(dir_.get(), socket_name.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
        named.st_dev == socket_dev_ && named.st_ino == socket_ino_)
      (void)::unlinkat(dir_.get(), socket_name.c_str(), 0);
  }
  // Kept open on purpose: the kernel drops the lock when the process ends, after all else.
  (void)fd_.release();
}

Result<RecordedDaemon> RecordedDaemon::Find(const std::string& device, uid_t uid) {
  if (!IsDevice(device))
    return Status(Code::kInvalidArgument, "no device number for the mount", EINVAL);
  SIGILFS_ASSIGN_OR_RETURN(Dir dir, OpenRecordDir(uid, /*make=*/false));
  const std::string path = dir.path + "/" + device;
  // O_NONBLOCK: should the entry be a FIFO, the open must not hang (it is refused below).
  RecordedDaemon daemon;
  daemon.device_ = device;
  daemon.uid_ = uid;
  daemon.fd_ = core::UniqueFd(::openat(dir.fd.get(), device.c_str(),
                                       O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (daemon.fd_.get() < 0) {
    if (errno == ENOENT) return Status(Code::kNotFound, "no record of it in " + dir.path, ENOENT);
    return Status::FromErrno(errno, "mount record " + path);
  }
  struct stat st;
  if (::fstat(daemon.fd_.get(), &st) != 0) return Status::FromErrno(errno, "mount record " + path);
  if (!S_ISREG(st.st_mode) || st.st_uid != uid)
    return Status(Code::kPermissionDenied,
                  path + " is not a file of uid " + std::to_string(uid) + "'s: not used", EPERM);
  if (daemon.Ended())
    return Status(Code::kNotFound, path + " is held by no running daemon", ENOENT);
  daemon.dir_ = std::move(dir.fd);
  daemon.dir_path_ = std::move(dir.path);
  return daemon;
}

bool RecordedDaemon::Ended() const {
  if (::flock(fd_.get(), LOCK_SH | LOCK_NB) != 0) return errno != EWOULDBLOCK && errno != EINTR;
  ::flock(fd_.get(), LOCK_UN);
  return true;
}

std::optional<core::VaultLock::Process> RecordedDaemon::Process() const {
  char text[64] = {};
  const ssize_t n = ::pread(fd_.get(), text, sizeof text - 1, 0);
  if (n <= 0) return std::nullopt;
  std::istringstream in(std::string(text, static_cast<size_t>(n)));
  long long pid = 0;
  core::VaultLock::Process p;
  if (!(in >> pid >> p.start) || pid <= 0 || pid > INT32_MAX) return std::nullopt;
  p.pid = static_cast<pid_t>(pid);
  if (p.Ended()) return std::nullopt;
  return p;
}

std::string RecordedDaemon::Who() const {
  const auto process = Process();
  return process ? "its daemon (process " + std::to_string(process->pid) + ")" : "its daemon";
}

Result<std::string> RecordedDaemon::Ask(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string name = SocketName(device_);
  const std::string path = dir_path_ + "/" + name;
  struct stat st;
  if (::fstatat(dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT)
      return Status(Code::kNotSupported,
                    Who() + " takes no questions (no " + path +
                        ": a daemon of a sigilfs before `sigilfs stats`)",
                    ENOENT);
    return Status::FromErrno(errno, path);
  }
  if (!S_ISSOCK(st.st_mode) || st.st_uid != uid_)
    return Status(Code::kPermissionDenied,
                  path + " is not a socket of uid " + std::to_string(uid_) + "'s: not used", EPERM);
  const core::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return Status::FromErrno(errno, "socket");
  sockaddr_un addr;
  const socklen_t len = AddressIn(dir_.get(), name, &addr);
  const auto no_answer = [&] {
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout).count();
    return Status(Code::kIoError,
                  Who() + " did not answer within " + std::to_string(seconds) + " s", ETIMEDOUT);
  };
  // A full backlog (EAGAIN: questions the daemon has not taken yet) is waited out until the
  // deadline; nothing listening is an answer.
  while (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    if (errno == ECONNREFUSED)
      return Status(Code::kIoError, Who() + " does not listen on " + path, ECONNREFUSED);
    if (errno != EAGAIN && errno != EINTR) return Status::FromErrno(errno, path);
    if (std::chrono::steady_clock::now() > deadline) return no_answer();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ucred cred{};
  socklen_t cred_len = sizeof cred;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0)
    return Status::FromErrno(errno, path);
  if (cred.uid != uid_)
    return Status(Code::kPermissionDenied,
                  path + " is served by uid " + std::to_string(cred.uid) + ", not " +
                      std::to_string(uid_) + ": not believed",
                  EPERM);
  std::string answer;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n == 0) return answer;
    if (n > 0) {
      answer.append(buf, static_cast<size_t>(n));
      if (answer.size() > kMaxAnswer)
        return Status(Code::kCorrupt, Who() + " answered with more than 1 MiB: not believed",
                      EMSGSIZE);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return Status::FromErrno(errno, path);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd.get(), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) return no_answer();
  }
}

}  // namespace sigilfs::fuse
