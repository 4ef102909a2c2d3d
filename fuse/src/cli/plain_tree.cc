// Plain-tree helpers of `sigilfs home`'s checks: listing, opening without an access time, and
// reading extended attributes of the user's own directories.
#include <dirent.h>
#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "transfer.h"

namespace sigilfs::cli {
namespace {

// "<path>: <what>: <strerror>" (or "<path>: <strerror>") for the call that just failed.
Status SysError(const std::string& path, const char* what = nullptr) {
  const int err = errno;
  return Status::FromErrno(err, what == nullptr ? path : path + ": " + what);
}

}  // namespace

int OpenNoAtime(int dirfd, const std::string& name, int flags) {
  const int fd = ::openat(dirfd, name.c_str(), flags | O_NOATIME | O_CLOEXEC);
  if (fd >= 0 || errno != EPERM) return fd;
  return ::openat(dirfd, name.c_str(), flags | O_CLOEXEC);
}

Result<std::vector<Xattr>> ReadXattrs(int fd, std::string_view prefix, const std::string& shown) {
  std::string names;
  for (;;) {  // the list may grow between the two calls
    const ssize_t size = ::flistxattr(fd, nullptr, 0);
    if (size < 0 && errno == ENOTSUP) return std::vector<Xattr>{};
    if (size < 0) return SysError(shown, "list extended attributes");
    names.resize(static_cast<size_t>(size));
    const ssize_t got = ::flistxattr(fd, names.data(), names.size());
    if (got >= 0) {
      names.resize(static_cast<size_t>(got));
      break;
    }
    if (errno != ERANGE) return SysError(shown, "list extended attributes");
  }
  std::vector<Xattr> out;
  for (size_t at = 0; at < names.size();) {
    Xattr x{names.c_str() + at, {}};
    at += x.name.size() + 1;
    if (x.name.compare(0, prefix.size(), prefix) != 0) continue;
    bool gone = false;
    for (;;) {
      const ssize_t size = ::fgetxattr(fd, x.name.c_str(), nullptr, 0);
      if (size >= 0) {
        x.value.resize(static_cast<size_t>(size));
        const ssize_t got = ::fgetxattr(fd, x.name.c_str(), x.value.data(), x.value.size());
        if (got >= 0) {
          x.value.resize(static_cast<size_t>(got));
          break;
        }
      }
      if (errno == ENODATA) {  // removed meanwhile
        gone = true;
        break;
      }
      if (errno != ERANGE) return SysError(shown, "read extended attribute");
    }
    if (!gone) out.push_back(std::move(x));
  }
  return out;
}

Result<std::vector<std::string>> ListNames(int dir, const std::string& shown) {
  const int fd = ::dup(dir);
  DIR* d = fd < 0 ? nullptr : ::fdopendir(fd);
  if (d == nullptr) {
    Status s = SysError(shown, "list");
    if (fd >= 0) ::close(fd);
    return s;
  }
  ::rewinddir(d);
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(d);  // NOLINT(concurrency-mt-unsafe): a private DIR stream
    if (e == nullptr) break;
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  Status s = errno != 0 ? SysError(shown, "list") : Status::Ok();
  ::closedir(d);
  if (!s.ok()) return s;
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace sigilfs::cli
