// BackingDir on a real filesystem: one descriptor per directory and the *at system calls.
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/unique_fd.h"
#include "sigilfs/mutex.h"

namespace sigilfs::core {
namespace {

Status Errno(std::string_view what, std::string_view name) {
  return Status::FromErrno(errno, std::string(what) + " " + std::string(name));
}

// One step of a path: openat with no symlink followed anywhere on it (openat2's
// RESOLVE_NO_SYMLINKS; a kernel without openat2 follows none but the last, as O_NOFOLLOW).
int OpenNoSymlinks(int dirfd, const std::string& path, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_NOFOLLOW | O_CLOEXEC);
  how.resolve = RESOLVE_NO_SYMLINKS;
  const long fd = ::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how);
  if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
  return ::openat(dirfd, path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
}

// OpenNoSymlinks for a relative path of any length. The kernel refuses a path of PATH_MAX bytes
// or more (ENAMETOOLONG), and cipher paths grow faster than plain ones (a third for base64, and
// 16 bytes of SIV per name), so a plain path of about 2,900 bytes exceeds it. Such a path is
// opened in steps: the longest prefix that fits, ending at a `/`, as an O_PATH directory, then
// the rest from there, each step's descriptor closed by the next.
int OpenAtAnyLength(int dirfd, std::string_view path, int flags) {
  UniqueFd step;
  int at = dirfd;
  while (path.size() >= PATH_MAX) {
    const size_t slash = path.rfind('/', PATH_MAX - 1);
    if (slash == std::string_view::npos || slash == 0) {  // one component past PATH_MAX
      errno = ENAMETOOLONG;
      return -1;
    }
    const int next = OpenNoSymlinks(at, std::string(path.substr(0, slash)), O_PATH | O_DIRECTORY);
    if (next < 0) return -1;
    step = UniqueFd(next);
    at = next;
    path.remove_prefix(slash + 1);
  }
  return OpenNoSymlinks(at, std::string(path), flags);
}

std::string ProcPath(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

// The names below `root`'s path down to `fd`'s, from their /proc links; empty if not below.
std::vector<std::string> PathBelow(int root, int fd) {
  char buf[PATH_MAX], rbuf[PATH_MAX];
  const ssize_t n = ::readlink(ProcPath(fd).c_str(), buf, sizeof buf);
  const ssize_t rn = ::readlink(ProcPath(root).c_str(), rbuf, sizeof rbuf);
  if (n <= 0 || rn <= 0 || n >= static_cast<ssize_t>(sizeof buf) ||
      rn >= static_cast<ssize_t>(sizeof rbuf))
    return {};
  const std::string_view path(buf, static_cast<size_t>(n)), top(rbuf, static_cast<size_t>(rn));
  const std::string_view prefix = top == "/" ? std::string_view() : top;
  if (path.size() <= prefix.size() + 1 || !path.starts_with(prefix) || path[prefix.size()] != '/')
    return {};
  std::vector<std::string> parts;
  for (size_t at = prefix.size() + 1; at <= path.size();) {
    const size_t slash = std::min(path.find('/', at), path.size());
    parts.emplace_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  return parts;
}

class PosixBackingDir final : public BackingDir {
 public:
  // `owned`: closed on destruction; otherwise the caller keeps it open for this object's life.
  // `listing`: a readable descriptor whose stream List reads (OpenListing).
  PosixBackingDir(int fd, bool owned, bool listing = false)
      : fd_(fd), owned_(owned), listing_(listing) {}
  ~PosixBackingDir() override {
    if (stream_ != nullptr) ::closedir(stream_);
    if (owned_) ::close(fd_);
  }
  PosixBackingDir(const PosixBackingDir&) = delete;
  PosixBackingDir& operator=(const PosixBackingDir&) = delete;

  Result<struct stat> Stat(std::string_view name) override {
    struct stat st;
    const std::string n(name);
    if (::fstatat(fd_, n.c_str(), &st, AT_SYMLINK_NOFOLLOW | (n.empty() ? AT_EMPTY_PATH : 0)) != 0)
      return Errno("stat", name);
    // A removed object still stats, with no link, as fstat tells: a mount's node of a removed
    // file or directory the kernel still holds answers with its attributes.
    return st;
  }

  Result<std::unique_ptr<BackingDir>> OpenDir(std::string_view name) override {
    const std::string n = name.empty() ? std::string(".") : std::string(name);
    const int fd = ::openat(fd_, n.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return Errno("open directory", name);
    return std::unique_ptr<BackingDir>(new PosixBackingDir(fd, true));
  }

  Result<std::unique_ptr<BackingDir>> OpenObject(std::string_view path) override {
    const int fd =
        path.empty() ? ::fcntl(fd_, F_DUPFD_CLOEXEC, 0) : OpenAtAnyLength(fd_, path, O_PATH);
    if (fd < 0) return Errno("open", path);
    return std::unique_ptr<BackingDir>(new PosixBackingDir(fd, true));
  }

  Result<std::unique_ptr<BackingDir>> OpenListing(bool keep_atime) override {
    constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    int fd = ::openat(fd_, ".", kFlags | (keep_atime ? O_NOATIME : 0));
    if (fd < 0 && errno == EPERM && keep_atime) fd = ::openat(fd_, ".", kFlags);
    if (fd < 0) return Errno("open directory", ".");
    return std::unique_ptr<BackingDir>(new PosixBackingDir(fd, true, true));
  }

  Result<std::unique_ptr<BackingFile>> OpenFile(std::string_view name,
                                                const FileOpenMode& how) override {
    const std::string n(name);
    const int rw = how.write ? O_RDWR : O_RDONLY;
    if (how.create && !n.empty()) {
      const int fd =
          ::openat(fd_, n.c_str(), rw | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, how.mode);
      if (fd >= 0) return NewPosixBackingFile(fd);
      if (errno != EEXIST || how.exclusive) return Errno("create", name);
    }
    // An existing entry is looked at before it is opened for reading or writing: opening a
    // device node or a FIFO of the store could block or act on a device.
    // The empty name: this handle's own object, looked at through its own descriptor.
    UniqueFd path(n.empty() ? -1 : ::openat(fd_, n.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    const int at = n.empty() ? fd_ : path.get();
    if (at < 0) return Errno("open", name);
    struct stat st;
    if (::fstat(at, &st) != 0) return Errno("stat", name);
    if (S_ISDIR(st.st_mode)) return Status::FromErrno(EISDIR, "open " + n);
    if (S_ISLNK(st.st_mode)) return Status::FromErrno(ELOOP, "open " + n);
    if (!S_ISREG(st.st_mode)) return Status::FromErrno(EINVAL, "open of a special file " + n);
    if (how.same_as != nullptr && !SameObject(st, *how.same_as))
      return Status::FromErrno(ESTALE, "open of an entry that changed: " + n);
    const std::string self = ProcPath(at);
    int fd = ::open(self.c_str(), rw | O_CLOEXEC | (how.keep_atime ? O_NOATIME : 0));
    if (fd < 0 && errno == EPERM && how.keep_atime) fd = ::open(self.c_str(), rw | O_CLOEXEC);
    if (fd < 0) return Errno("open", name);
    return NewPosixBackingFile(fd);
  }

  Status MakeDir(std::string_view name, mode_t mode) override {
    if (::mkdirat(fd_, std::string(name).c_str(), mode) != 0) return Errno("mkdir", name);
    return Status::Ok();
  }

  Status MakeNode(std::string_view name, mode_t mode, dev_t rdev) override {
    if (::mknodat(fd_, std::string(name).c_str(), mode, rdev) != 0) return Errno("mknod", name);
    return Status::Ok();
  }

  Status MakeSymlink(std::string_view name, std::string_view target) override {
    if (::symlinkat(std::string(target).c_str(), fd_, std::string(name).c_str()) != 0)
      return Errno("symlink", name);
    return Status::Ok();
  }

  Result<std::string> ReadSymlink(std::string_view name) override {
    std::string buf(PATH_MAX, '\0');
    // An empty name reads the link this handle is (an O_PATH descriptor of it).
    const ssize_t n = ::readlinkat(fd_, std::string(name).c_str(), buf.data(), buf.size());
    if (n < 0) return Errno("readlink", name);
    buf.resize(static_cast<size_t>(n));
    return buf;
  }

  Status Link(std::string_view name, BackingDir& to, std::string_view to_name) override {
    auto* other = dynamic_cast<PosixBackingDir*>(&to);
    if (other == nullptr) return Status::FromErrno(EXDEV, "link across stores");
    if (::linkat(fd_, std::string(name).c_str(), other->fd_, std::string(to_name).c_str(), 0) != 0)
      return Errno("link", name);
    return Status::Ok();
  }

  Status Unlink(std::string_view name) override {
    if (::unlinkat(fd_, std::string(name).c_str(), 0) != 0) return Errno("unlink", name);
    return Status::Ok();
  }

  Status RemoveDir(std::string_view name) override {
    if (::unlinkat(fd_, std::string(name).c_str(), AT_REMOVEDIR) != 0) return Errno("rmdir", name);
    return Status::Ok();
  }

  Status Rename(std::string_view name, BackingDir& to, std::string_view to_name,
                unsigned flags) override {
    auto* other = dynamic_cast<PosixBackingDir*>(&to);
    if (other == nullptr) return Status::FromErrno(EXDEV, "rename across stores");
    unsigned sys_flags = 0;
    if ((flags & kNoReplace) != 0) sys_flags |= RENAME_NOREPLACE;
    if ((flags & kExchange) != 0) sys_flags |= RENAME_EXCHANGE;
    const std::string from(name), to_entry(to_name);
    if (::renameat2(fd_, from.c_str(), other->fd_, to_entry.c_str(), sys_flags) == 0)
      return Status::Ok();
    if (errno != EINVAL || flags != kNoReplace) return Errno("rename", name);
    return RenameNoReplaceWithoutFlags(from, *other, to_entry);
  }

  // A store without renameat2's flags (sshfs, and other FUSE stores and network filesystems
  // refuse them with EINVAL): renamed plainly once the name was seen free. That replaces at most
  // an empty directory, and a directory of the vault is never empty (it holds its IV) but while
  // it is being removed; a file another host puts there between the look and the rename is
  // replaced (docs/design/shared.md, "Names"). Not link(2) and unlink: a store that keeps
  // objects by path (sshfs) would lose track of the handles the mount holds on the file.
  Status RenameNoReplaceWithoutFlags(const std::string& from, PosixBackingDir& to,
                                     const std::string& to_name) {
    struct stat there;
    if (::fstatat(to.fd_, to_name.c_str(), &there, AT_SYMLINK_NOFOLLOW) == 0)
      return Status::FromErrno(EEXIST, "rename " + from);
    if (errno != ENOENT) return Errno("rename", from);
    if (::renameat(fd_, from.c_str(), to.fd_, to_name.c_str()) == 0) return Status::Ok();
    // A directory made there meanwhile holds its IV: not empty, so not replaced.
    if (errno == ENOTEMPTY) return Status::FromErrno(EEXIST, "rename " + from);
    return Errno("rename", from);
  }

  // A stream of its own per call (the descriptor may be O_PATH, and calls may overlap); the
  // cursor is the directory's telldir cookie. A listing handle reads its own descriptor's
  // stream (one reader at a time), "." and ".." included.
  Status List(uint64_t from, const std::function<bool(const BackingEntry&)>& emit) override {
    if (listing_) {
      // The stream is opened once and kept: each READDIR of a listing would otherwise pay for a
      // duplicate descriptor, its checks and its close.
      MutexLock lock(list_mu_);
      if (stream_ == nullptr) {
        const int fd = ::dup(fd_);
        if (fd < 0) return Status::FromErrno(errno, "dup");
        stream_ = ::fdopendir(fd);
        if (stream_ == nullptr) {
          const int e = errno;
          ::close(fd);
          return Status::FromErrno(e, "opendir");
        }
      }
      return ReadStream(stream_, from, true, emit);
    }
    // A listing by the vault's own tools is not the user's read: the access time stays where
    // the store allows it (O_NOATIME needs the owner or CAP_FOWNER).
    int fd = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOATIME);
    if (fd < 0 && errno == EPERM) fd = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Errno("open directory", ".");
    struct stat st;
    if (::fstat(fd, &st) != 0 || st.st_nlink == 0) {  // removed: it lists nothing, and is gone
      ::close(fd);
      return Status::FromErrno(ENOENT, "readdir of a removed directory");
    }
    DIR* dir = ::fdopendir(fd);
    if (dir == nullptr) {
      const int e = errno;
      ::close(fd);
      return Status::FromErrno(e, "opendir");
    }
    Status result = ReadStream(dir, from, false, emit);
    ::closedir(dir);
    return result;
  }

  Result<ObjectHandle> Handle(std::string_view name) override {
    struct {
      file_handle h;
      unsigned char bytes[MAX_HANDLE_SZ];
    } fh{};
    fh.h.handle_bytes = MAX_HANDLE_SZ;
    int mount_id = 0;
    const std::string n(name);
    if (::name_to_handle_at(fd_, n.c_str(), &fh.h, &mount_id, n.empty() ? AT_EMPTY_PATH : 0) != 0)
      return Errno("file handle", name);
    ObjectHandle out;
    out.type = fh.h.handle_type;
    out.bytes.assign(fh.h.f_handle, fh.h.f_handle + fh.h.handle_bytes);
    return out;
  }

  Result<std::unique_ptr<BackingDir>> OpenByHandle(const ObjectHandle& handle) override {
    if (handle.bytes.size() > MAX_HANDLE_SZ) return Status::FromErrno(ESTALE, "file handle");
    struct {
      file_handle h;
      unsigned char bytes[MAX_HANDLE_SZ];
    } fh{};
    fh.h.handle_type = handle.type;
    fh.h.handle_bytes = static_cast<unsigned>(handle.bytes.size());
    std::memcpy(fh.h.f_handle, handle.bytes.data(), handle.bytes.size());
    constexpr int kFlags = O_PATH | O_NOFOLLOW | O_CLOEXEC;
    int fd = ::open_by_handle_at(fd_, &fh.h, kFlags);
    if (fd < 0 && errno == EBADF) {  // the kernel takes no O_PATH descriptor for the mount
      UniqueFd readable(::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (readable.get() >= 0) fd = ::open_by_handle_at(readable.get(), &fh.h, kFlags);
    }
    if (fd < 0) return Errno("open by handle", "");
    return std::unique_ptr<BackingDir>(new PosixBackingDir(fd, true));
  }

  std::vector<std::string> PathTo(BackingDir& object) override {
    auto* other = dynamic_cast<PosixBackingDir*>(&object);
    if (other == nullptr) return {};
    return PathBelow(fd_, other->fd_);
  }

 private:
  // Lists `dir` from cursor `from` (a d_off it gave, or 0 for the start).
  static Status ReadStream(DIR* dir, uint64_t from, bool dots,
                           const std::function<bool(const BackingEntry&)>& emit) {
    if (from != 0)
      ::seekdir(dir, static_cast<long>(from));
    else
      ::rewinddir(dir);
    Status result;
    for (;;) {
      errno = 0;
      const dirent* e = ::readdir(dir);  // NOLINT(concurrency-mt-unsafe): a private stream
      if (e == nullptr) {
        if (errno != 0) result = Status::FromErrno(errno, "readdir");
        break;
      }
      const std::string_view n = e->d_name;
      if (!dots && (n == "." || n == "..")) continue;
      const mode_t type = e->d_type == DT_UNKNOWN ? 0 : DTTOIF(e->d_type);
      if (!emit(BackingEntry{std::string(n), e->d_ino, type, static_cast<uint64_t>(e->d_off)}))
        break;
    }
    return result;
  }

 public:
  Status SetMode(std::string_view name, mode_t mode) override {
    // Never through a symlink: glibc's fchmodat refuses one (EOPNOTSUPP) without following it.
    const int rc = name.empty()
                       ? ::chmod(PathOf("").c_str(), mode)
                       : ::fchmodat(fd_, std::string(name).c_str(), mode, AT_SYMLINK_NOFOLLOW);
    if (rc != 0) return Errno("chmod", name);
    return Status::Ok();
  }

  Status SetOwner(std::string_view name, uid_t uid, gid_t gid) override {
    const std::string n(name);
    if (::fchownat(fd_, n.c_str(), uid, gid,
                   AT_SYMLINK_NOFOLLOW | (n.empty() ? AT_EMPTY_PATH : 0)) != 0)
      return Errno("chown", name);
    return Status::Ok();
  }

  Status SetTimes(std::string_view name, const struct timespec times[2]) override {
    const std::string n(name);
    const int rc = n.empty() ? ::utimensat(AT_FDCWD, PathOf("").c_str(), times, 0)
                             : ::utimensat(fd_, n.c_str(), times, AT_SYMLINK_NOFOLLOW);
    if (rc != 0) return Errno("utimens", name);
    return Status::Ok();
  }

  Result<std::vector<uint8_t>> GetXattr(std::string_view name, std::string_view attr) override {
    const std::string path = PathOf(name), a(attr);
    const auto get = name.empty() ? ::getxattr : ::lgetxattr;
    // Most values (a directory's IV, sealed names' attributes) fit a small buffer: one call.
    std::vector<uint8_t> value(256);
    if (const ssize_t got = get(path.c_str(), a.c_str(), value.data(), value.size()); got >= 0) {
      value.resize(static_cast<size_t>(got));
      return value;
    }
    if (errno != ERANGE) return Errno("getxattr", attr);
    for (;;) {
      const ssize_t size =
          (name.empty() ? ::getxattr : ::lgetxattr)(path.c_str(), a.c_str(), nullptr, 0);
      if (size < 0) return Errno("getxattr", attr);
      value.resize(static_cast<size_t>(size));
      const ssize_t got = get(path.c_str(), a.c_str(), value.data(), value.size());
      if (got >= 0) {
        value.resize(static_cast<size_t>(got));
        return value;
      }
      if (errno != ERANGE) return Errno("getxattr", attr);  // ERANGE: it grew meanwhile
    }
  }

  Status SetXattr(std::string_view name, std::string_view attr, ByteSpan value,
                  int flags) override {
    if ((name.empty() ? ::setxattr : ::lsetxattr)(PathOf(name).c_str(), std::string(attr).c_str(),
                                                  value.data(), value.size(), flags) != 0)
      return Errno("setxattr", attr);
    return Status::Ok();
  }

  Status RemoveXattr(std::string_view name, std::string_view attr) override {
    if ((name.empty() ? ::removexattr : ::lremovexattr)(PathOf(name).c_str(),
                                                        std::string(attr).c_str()) != 0)
      return Errno("removexattr", attr);
    return Status::Ok();
  }

  Result<std::vector<std::string>> ListXattrs(std::string_view name) override {
    const std::string path = PathOf(name);
    std::string list;
    for (;;) {
      const ssize_t size = (name.empty() ? ::listxattr : ::llistxattr)(path.c_str(), nullptr, 0);
      if (size < 0) return Errno("listxattr", name);
      list.resize(static_cast<size_t>(size));
      const ssize_t got =
          (name.empty() ? ::listxattr : ::llistxattr)(path.c_str(), list.data(), list.size());
      if (got >= 0) {
        list.resize(static_cast<size_t>(got));
        break;
      }
      if (errno != ERANGE) return Errno("listxattr", name);
    }
    std::vector<std::string> names;
    for (size_t at = 0; at < list.size();) {
      const size_t end = list.find('\0', at);
      names.push_back(list.substr(at, end - at));
      at = end == std::string::npos ? list.size() : end + 1;
    }
    return names;
  }

  Result<struct statvfs> StatFs() override {
    struct statvfs fs;
    if (::fstatvfs(fd_, &fs) != 0) return Errno("statfs", ".");
    return fs;
  }

  // A FUSE store's inode numbers are whatever its daemon gives; high-level libfuse daemons
  // (sshfs among them) give a new one each time the kernel looks an object up again after it
  // was forgotten. SMB gives its own when the server has none.
  bool KeepsInodeNumbers() override {
    struct statfs fs;
    if (::fstatfs(fd_, &fs) != 0) return true;
    return fs.f_type != FUSE_SUPER_MAGIC && fs.f_type != CIFS_SUPER_MAGIC &&
           fs.f_type != SMB2_SUPER_MAGIC;
  }

  Status Sync() override {
    if (listing_) {
      if (::fsync(fd_) != 0) return Errno("fsync", ".");
      return Status::Ok();
    }
    UniqueFd fd(::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.get() < 0 || ::fsync(fd.get()) != 0) return Errno("fsync", ".");
    return Status::Ok();
  }

 private:
  // The entry through the descriptor's /proc link, for the calls that take no directory
  // descriptor: the l*xattr family, which follows no final symlink, for an entry; for this
  // directory itself (the link is the final component) the calls that follow it.
  std::string PathOf(std::string_view name) const {
    std::string path = ProcPath(fd_);
    if (!name.empty()) path.append("/").append(name);
    return path;
  }

  const int fd_;
  const bool owned_;
  const bool listing_;
  Mutex list_mu_;  // a listing handle's stream: one reader at a time
  DIR* stream_ SIGILFS_GUARDED_BY(list_mu_) = nullptr;  // a listing's, once it was read
};

}  // namespace

Result<std::unique_ptr<BackingDir>> OpenPosixBackingDir(const std::string& path) {
  const int fd = ::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open directory " + path);
  return NewPosixBackingDir(fd);
}

std::unique_ptr<BackingDir> NewPosixBackingDir(int fd) {
  return std::make_unique<PosixBackingDir>(fd, true);
}

std::unique_ptr<BackingDir> BorrowPosixBackingDir(int fd) {
  return std::make_unique<PosixBackingDir>(fd, false);
}

}  // namespace sigilfs::core
