// Internal: whole-file reads and crash-safe small-file replacement.
#include "file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "sigilfs/core/unique_fd.h"

namespace sigilfs::core {
namespace {

using Fd = UniqueFd;

Status WriteAll(int fd, const std::string& data, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "write " + what);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> ReadSmallFile(const std::string& path, size_t max_size) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return Status::FromErrno(errno, "open " + path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return Status(Code::kCorrupt, path + " is not a regular file");
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_size) return Status(Code::kCorrupt, path + " is too large");
  }
  return out;
}

Status WriteFileAtomic(const std::string& dir, const std::string& name, const std::string& data,
                       bool exclusive) {
  const std::string path = dir + "/" + name;
  const std::string tmp = dir + "/." + name + ".tmp";
  if (exclusive && ::access(path.c_str(), F_OK) == 0)
    return Status(Code::kExists, path + " already exists");
  ::unlink(tmp.c_str());  // a leftover from an interrupted earlier write
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.get() < 0) return Status::FromErrno(errno, "create " + tmp);
    Status s = WriteAll(fd.get(), data, tmp);
    if (s.ok() && ::fsync(fd.get()) != 0) s = Status::FromErrno(errno, "fsync " + tmp);
    if (!s.ok()) {
      ::unlink(tmp.c_str());
      return s;
    }
  }
  // link() refuses an existing target, which makes the exclusive create atomic too.
  const int rc =
      exclusive ? ::link(tmp.c_str(), path.c_str()) : ::rename(tmp.c_str(), path.c_str());
  const int err = errno;
  if (exclusive || rc != 0) ::unlink(tmp.c_str());
  if (rc != 0) return Status::FromErrno(err, (exclusive ? "create " : "replace ") + path);
  Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() < 0 || ::fsync(dfd.get()) != 0) return Status::FromErrno(errno, "fsync " + dir);
  return Status::Ok();
}

}  // namespace sigilfs::core
