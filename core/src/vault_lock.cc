// The vault lock: flock(2) on `sigilfs.lock` in the cipher root.
#include "sigilfs/core/vault_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

#include "sigilfs/core/mountinfo.h"

namespace sigilfs::core {
namespace {

// The path a mount records as its source: absolute, symlinks resolved where possible.
std::string Canonical(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::canonical(dir, ec);
  if (ec) p = std::filesystem::absolute(dir, ec).lexically_normal();
  return p.string();
}

std::string ErrnoText(int err) { return std::generic_category().message(err); }

// Calls `fn(mount point, cipher directory)` for each sigilfs mount in /proc/self/mountinfo, in
// mount order.
template <typename Fn>
void ForEachSigilfsMount(Fn fn) {
  for (const MountInfoEntry& m : ReadMountInfo())
    if (auto vault = SigilfsVaultOf(m)) fn(m.mount_point, *vault);
}

// Who may open the lock file: who may change the vault, its owner and, where the cipher
// directory is group-writable, its group; never anyone else. flock needs only a descriptor open
// for reading, so a user who could open the file could hold it and keep the owner's mounts (a
// login's among them) out, or make `sigilfs unmount` wait for it.
mode_t LockFileMode(const struct stat& dir) { return (dir.st_mode & S_IWGRP) != 0 ? 0660 : 0600; }

// VaultInUseMessage, with how the mounts hold the vault: "is mounted<how> on POINT<after>".
std::string InUseMessage(const std::string& dir, std::string_view how, std::string_view after) {
  const std::vector<std::string> points = MountPointsOfVault(dir);
  if (points.empty()) return "the vault " + dir + " is in use by another sigilfs process";
  std::string where;
  for (const std::string& p : points) where += (where.empty() ? "" : ", ") + p;
  return "the vault " + dir + " is mounted" + std::string(how) + " on " + where +
         std::string(after);
}

}  // namespace

Result<VaultLock> VaultLock::Acquire(const std::string& dir, LockMode mode) {
  const std::string path = dir + "/" + kLockFileName;
  // O_NONBLOCK: should the entry be a FIFO, the open must not hang (it is refused below).
  constexpr int kFlags = O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK;
  VaultLock lock;
  int fd = -1;
  std::optional<mode_t> close_to;  // the mode the lock file is to be given, once locked
  if (mode == LockMode::kShared) {
    // A reader makes nothing: without the file there is no holder (every mount and writer makes
    // it first), and fsck and export keep changing nothing.
    fd = ::open(path.c_str(), O_RDONLY | kFlags);
  } else {
    struct stat root;
    const bool have_root = ::stat(dir.c_str(), &root) == 0;
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | kFlags,
                have_root ? LockFileMode(root) : 0600);
    if (fd >= 0 && have_root) {
      // The cipher root's modification time is the plaintext root's (a home directory's, say):
      // making the file must not change it.
      const struct timespec times[2] = {{0, UTIME_OMIT}, root.st_mtim};
      (void)::utimensat(AT_FDCWD, dir.c_str(), times, 0);
      // Made by root in a vault of another user (an offline command run by root): the file is
      // the vault owner's, so that the owner's own mounts can still open it for writing.
      if (::geteuid() == 0 && root.st_uid != 0) (void)!::fchown(fd, root.st_uid, root.st_gid);
    } else if (fd < 0 && errno == EEXIST) {
      fd = ::open(path.c_str(), O_RDWR | kFlags);
      // A file made open to everyone (by an older sigilfs, or by hand) is closed to those who
      // may not change the vault, once the lock is taken (a refused command changes nothing).
      struct stat st;
      if (fd >= 0 && have_root && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
          (st.st_mode & ~LockFileMode(root) & 0777) != 0 &&
          (st.st_uid == ::geteuid() || ::geteuid() == 0))
        close_to = LockFileMode(root);
    }
    // A file this process may only read still takes a lock (flock ignores the open mode on
    // local filesystems); a cipher directory it may not write leaves no way to make one.
    if (fd < 0 && (errno == EACCES || errno == EPERM || errno == EROFS))
      fd = ::open(path.c_str(), O_RDONLY | kFlags);
  }
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == EACCES || err == EPERM || err == EROFS) {
      lock.why_not_ = path + ": " + ErrnoText(err);
      return lock;
    }
    return Status::FromErrno(err, "open " + path);
  }
  lock.fd_ = UniqueFd(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return Status(Code::kCorrupt, path + " is not a regular file", EINVAL);
  int rc;
  do {
    rc = ::flock(fd, (mode == LockMode::kExclusive ? LOCK_EX : LOCK_SH) | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) {
    if (close_to) (void)::fchmod(fd, *close_to);
    return lock;
  }
  const int err = errno;
  if (err == EWOULDBLOCK) {
    // How the mounts in the way hold the vault, for the message: holders that let a shared lock
    // be taken (shared mounts, and readers, which no mount table shows) refuse only an exclusive
    // one; a shared mount is refused by an exclusive holder.
    std::string_view how, after;
    if (mode == LockMode::kExclusive && ::flock(fd, LOCK_SH | LOCK_NB) == 0) how = " --shared";
    if (mode == LockMode::kSharedMount) after = " without --shared";
    return Status(Code::kPermissionDenied, InUseMessage(dir, how, after), EBUSY);
  }
  // ENOLCK (NFS without its lock service), EBADF (NFS: an exclusive lock on a file opened for
  // reading), EINVAL: no lock to be had here.
  lock.fd_ = UniqueFd();
  lock.why_not_ = path + ": " + ErrnoText(err);
  return lock;
}

namespace {

// The state letter and start time of process `pid`, from /proc/PID/stat: "pid (comm) S ppid ...",
// where comm may hold spaces and parentheses, and the start time is field 22.
std::optional<std::pair<char, uint64_t>> StatOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return std::nullopt;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  char state = 0;
  std::string skip;
  uint64_t start = 0;
  fields >> state;
  for (int field = 4; field < 22; ++field) fields >> skip;  // ppid ... priority, nice, ...
  if (!(fields >> start)) return std::nullopt;
  return std::pair{state, start};
}

}  // namespace

bool VaultLock::Process::Ended() const {
  const auto stat = StatOf(pid);
  return !stat || stat->second != start || stat->first == 'Z' || stat->first == 'X';
}

std::optional<VaultLock::Process> VaultLock::ProcessOf(pid_t pid) {
  const auto stat = StatOf(pid);
  if (!stat || stat->first == 'Z' || stat->first == 'X') return std::nullopt;
  return Process{pid, stat->second};
}

Status VaultLock::RecordHolder() const {
  if (!held()) return Status::Ok();
  const auto self = StatOf(::getpid());
  if (!self) return Status(Code::kIoError, "cannot read this process's start time", EIO);
  const std::string text = std::to_string(::getpid()) + " " + std::to_string(self->second) + "\n";
  if (::ftruncate(fd_.get(), 0) != 0 ||
      ::pwrite(fd_.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    return Status::FromErrno(errno, "record the daemon in the vault lock");
  return Status::Ok();
}

std::optional<VaultLock::Process> VaultLock::HolderOf(const std::string& dir) {
  const std::string path = dir + "/" + kLockFileName;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) return std::nullopt;
  char text[64] = {};
  const ssize_t n = ::pread(fd.get(), text, sizeof(text) - 1, 0);
  if (n <= 0) return std::nullopt;
  std::istringstream in(std::string(text, static_cast<size_t>(n)));
  long long pid = 0;
  Process p;
  if (!(in >> pid >> p.start) || pid <= 0 || pid > INT32_MAX) return std::nullopt;
  p.pid = static_cast<pid_t>(pid);
  if (p.Ended()) return std::nullopt;
  return p;
}

std::vector<std::string> MountPointsOfVault(const std::string& dir) {
  const std::string vault = Canonical(dir);
  std::vector<std::string> points;
  ForEachSigilfsMount([&](const std::string& point, const std::string& source) {
    // Mounts record the canonical path; older ones the path they were given.
    if (source == vault || (!source.empty() && source[0] == '/' && Canonical(source) == vault))
      points.push_back(point);
  });
  return points;
}

std::optional<std::string> VaultMountedOn(const std::string& mountpoint) {
  const std::pair<std::string, std::string> forms = MountTableForms(mountpoint);
  std::optional<std::string> found;
  ForEachSigilfsMount([&](const std::string& p, const std::string& source) {
    if (p == forms.first || p == forms.second) found = source;  // the last one is on top
  });
  return found;
}

std::string VaultInUseMessage(const std::string& dir) { return InUseMessage(dir, "", ""); }

}  // namespace sigilfs::core
