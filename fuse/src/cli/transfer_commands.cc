// `sigilfs export` and `sigilfs import`: plaintext files and trees out of and into an unmounted
// vault, without FUSE (backups, restores, moving data between vaults).
#include <dirent.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "sigilfs/core/names.h"
#include "sigilfs/core/unique_fd.h"
#include "sigilfs/crypt/encoding.h"
#include "sigilfs/crypt/random.h"
#include "sigilfs/crypt/secure_bytes.h"
#include "transfer.h"

namespace sigilfs::cli {
namespace {

namespace fs = std::filesystem;
using Fd = core::UniqueFd;

// Plaintext is moved in steps of this size: never a whole file in memory.
constexpr size_t kStep = 1 << 20;
constexpr std::string_view kUserNamespace = "user.";
// Entries being written before they are renamed into place. In the vault the name has a '.',
// so no listing shows it (the vault's own names, as `.sigilfs.mkdir.`).
constexpr std::string_view kExportTemp = ".sigilfs-export.";
constexpr std::string_view kImportTemp = ".sigilfs.import.";

struct TransferOptions {
  std::string dir;
  std::string from;  // export: the vault PATH; import: the plain SOURCE
  std::string to;    // export: the plain DEST; import: the vault PATH
  bool force = false;
  bool no_owner = false;
  fuse::PassphraseSource pass;
};

// Ownership is kept when run as root, unless --no-owner.
bool Owner(const TransferOptions& o) { return ::geteuid() == 0 && !o.no_owner; }

// "<path>: <what>: <strerror>" (or "<path>: <strerror>") for the call that just failed.
Status SysError(const std::string& path, const char* what = nullptr) {
  const int err = errno;
  return Status::FromErrno(err, what == nullptr ? path : path + ": " + what);
}

Status Exists(const std::string& path) {
  return Status(Code::kExists, path + " (--force replaces it)", EEXIST);
}

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() || dir == "." ? name : dir + "/" + name;
}

std::string TempName(std::string_view prefix) {
  std::array<uint8_t, 8> rnd;
  crypt::RandomBytes(rnd);
  return std::string(prefix) + crypt::HexEncode(rnd);
}

// A vault path as its components ("a//b/./c" is a/b/c; "", "." and "/" are the root).
Result<std::vector<std::string>> SplitVaultPath(const std::string& path) {
  std::vector<std::string> parts;
  for (size_t pos = 0; pos <= path.size();) {
    const size_t slash = std::min(path.find('/', pos), path.size());
    std::string part = path.substr(pos, slash - pos);
    if (part == "..") return Status(Code::kInvalidArgument, "'..' in a vault path: " + path);
    if (!part.empty() && part != ".") parts.push_back(std::move(part));
    pos = slash + 1;
  }
  return parts;
}

std::string JoinParts(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out = Join(out, p);
  return out.empty() ? "." : out;
}

}  // namespace

int OpenNoAtime(int dirfd, const std::string& name, int flags) {
  const int fd = ::openat(dirfd, name.c_str(), flags | O_NOATIME | O_CLOEXEC);
  if (fd >= 0 || errno != EPERM) return fd;
  return ::openat(dirfd, name.c_str(), flags | O_CLOEXEC);
}

namespace {

// The absolute path of an open directory.
Result<std::string> FdPath(int fd) {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/fd/" + std::to_string(fd), ec);
  if (ec) return Status::FromErrno(ec.value(), "resolve a directory's path");
  return p.string();
}

Status WriteAll(int fd, ByteSpan data, const std::string& shown) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SysError(shown, "write");
    data = data.subspan(static_cast<size_t>(n));
  }
  return Status::Ok();
}

}  // namespace

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

namespace {

// Ownership (when `owner`), permissions, then times: last, as the others change the ctime only
// and everything before them (contents, entries of a directory) changes the mtime.
Status SetMetadata(int fd, const struct stat& st, bool owner, const std::string& shown) {
  if (owner && ::fchown(fd, st.st_uid, st.st_gid) != 0) return SysError(shown, "chown");
  if (::fchmod(fd, st.st_mode & 07777) != 0) return SysError(shown, "chmod");
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (::futimens(fd, times) != 0) return SysError(shown, "set times");
  return Status::Ok();
}

// The same for entry `name` of `dirfd` that cannot be opened (symlinks, FIFOs, devices).
Status SetMetadataAt(int dirfd, const std::string& name, const struct stat& st, bool owner,
                     const std::string& shown) {
  if (owner && ::fchownat(dirfd, name.c_str(), st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) != 0)
    return SysError(shown, "chown");
  // A symlink's permissions mean nothing (and Linux cannot change them).
  if (!S_ISLNK(st.st_mode) && ::fchmodat(dirfd, name.c_str(), st.st_mode & 07777, 0) != 0)
    return SysError(shown, "chmod");
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (::utimensat(dirfd, name.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
    return SysError(shown, "set times");
  return Status::Ok();
}

// A new entry under a temporary name in `dirfd`, removed again unless it was placed.
class TempEntry {
 public:
  TempEntry(int dirfd, std::string_view prefix) : dirfd_(dirfd), name_(TempName(prefix)) {}
  ~TempEntry() {
    if (!name_.empty()) ::unlinkat(dirfd_, name_.c_str(), 0);
  }
  TempEntry(const TempEntry&) = delete;
  TempEntry& operator=(const TempEntry&) = delete;

  const std::string& name() const { return name_; }

  // Renames it to `target`: over an existing non-directory with `replace`, else only if the name
  // is free (kExists otherwise).
  Status Place(const std::string& target, bool replace, const std::string& shown) {
    int rc =
        ::renameat2(dirfd_, name_.c_str(), dirfd_, target.c_str(), replace ? 0 : RENAME_NOREPLACE);
    if (rc != 0 && errno == EINVAL && !replace)  // no RENAME_NOREPLACE here: a link refuses too
      rc = ::linkat(dirfd_, name_.c_str(), dirfd_, target.c_str(), 0);
    Status s = Status::Ok();
    if (rc != 0) s = errno == EEXIST ? Exists(shown) : SysError(shown);
    // Gone after a rename, but left by a link, or by a rename onto another name of its inode.
    ::unlinkat(dirfd_, name_.c_str(), 0);
    name_.clear();
    return s;
  }

 private:
  int dirfd_;
  std::string name_;
};

// Regular files are opened without blocking (should the entry have become a FIFO since it was
// looked at) and checked to be the inode that was looked at.
constexpr int kOpenFile = O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK;
constexpr int kOpenDir = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;

bool SameInode(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
         (a.st_mode & S_IFMT) == (b.st_mode & S_IFMT);
}

using InodeKey = std::pair<dev_t, ino_t>;

// ---------------------------------------------------------------------------------------------
// export

// One export. Problems with what the vault holds (a page, name, IV, target or attribute that
// does not decrypt) are reported and skipped; a failure to write the destination ends it.
class Exporter {
 public:
  Exporter(core::Volume& volume, bool force, bool owner)
      : volume_(volume), force_(force), owner_(owner), buffer_(kStep) {}
  ~Exporter() { crypt::SecureWipe(buffer_); }
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  uint64_t problems() const { return problems_; }

  // Vault entry `path`, entry `stored` of the cipher directory `src`, to `name` in `dst`, whose
  // absolute path is `dest`.
  Status Entry(const std::string& path, int src, const std::string& stored, int dst,
               const std::string& name, const std::string& dest) {
    struct stat st;
    if (::fstatat(src, stored.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      Problem(path, SysError(path, "stat"));
      return Status::Ok();
    }
    if (S_ISDIR(st.st_mode)) {
      Fd dir(OpenNoAtime(src, stored, kOpenDir));
      if (dir.get() < 0) {
        Problem(path, SysError(path, "open directory"));
        return Status::Ok();
      }
      return Directory(path, dir.get(), st, dst, name, dest);
    }
    const InodeKey key{st.st_dev, st.st_ino};
    if (st.st_nlink > 1) {
      if (auto it = links_.find(key); it != links_.end())
        return Link(path, it->second, dst, name, dest);
    }
    bool exported = false;
    if (S_ISREG(st.st_mode)) {
      SIGILFS_ASSIGN_OR_RETURN(exported, File(path, src, stored, st, dst, name, dest));
    } else if (S_ISLNK(st.st_mode)) {
      SIGILFS_ASSIGN_OR_RETURN(exported, Symlink(path, src, stored, st, dst, name, dest));
    } else {
      SIGILFS_RETURN_IF_ERROR(Node(st, dst, name, dest));
      exported = true;
    }
    if (st.st_nlink > 1) links_[key] = Linked{path, dest, exported};
    return Status::Ok();
  }

  // A directory (already open as `src`, with stat `st`): made or, with --force, reused.
  Status Directory(const std::string& path, int src, const struct stat& st, int dst,
                   const std::string& name, const std::string& dest) {
    if (::mkdirat(dst, name.c_str(), 0700) != 0) {
      if (errno != EEXIST) return SysError(dest, "mkdir");
      if (!force_) return Exists(dest);
      struct stat existing;
      if (::fstatat(dst, name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) != 0)
        return SysError(dest, "stat");
      if (!S_ISDIR(existing.st_mode))
        return Status(Code::kExists, dest + " exists and is not a directory", EEXIST);
    }
    Fd out(::openat(dst, name.c_str(), kOpenDir | O_CLOEXEC));
    if (out.get() < 0) return SysError(dest, "open");
    auto iv = volume_.ReadDirIv(src);
    if (!iv.ok()) {
      Problem(path, iv.status());  // without its IV no name in it can be read
    } else {
      std::vector<core::DirEntry> entries;
      Status listed =
          volume_.ListSorted(src, *iv, entries, [&](const std::string& stored, const Status& s) {
            Problem(Join(path, stored) + " (stored name)", s);
          });
      if (!listed.ok()) Problem(path, listed);
      for (const core::DirEntry& e : entries) {
        SIGILFS_RETURN_IF_ERROR(
            Entry(Join(path, e.name), src, e.stored, out.get(), e.name, dest + "/" + e.name));
      }
    }
    SIGILFS_RETURN_IF_ERROR(Xattrs(path, src, out.get(), dest));
    return SetMetadata(out.get(), st, owner_, dest);
  }

  // Streams regular file `path` (entry `stored` of `src`) to `out`; false if it was damaged.
  Result<bool> Stream(const std::string& path, int src, const std::string& stored, int out,
                      const std::string& shown) {
    auto file = OpenFile(path, src, stored);
    if (!file) return false;
    Status damage;
    SIGILFS_RETURN_IF_ERROR(Copy(*file->contents, out, shown, damage));
    if (!damage.ok()) Problem(path, damage);
    return damage.ok();
  }

 private:
  struct Linked {
    std::string path;  // in the vault
    std::string dest;  // where it was exported
    bool exported;
  };
  struct OpenedFile {
    Fd fd;  // for its extended attributes
    std::unique_ptr<core::FileContents> contents;
  };

  // "sigilfs: <path>: <code>: <message>", without the path twice when the message starts with it
  // (the page layer names the file it reads).
  void Problem(const std::string& path, const Status& s) {
    ++problems_;
    std::string message = s.message();
    if (message.rfind(path + ": ", 0) == 0) message.erase(0, path.size() + 2);
    fmt::print(stderr, "sigilfs: {}: {}: {}\n", path, CodeName(s.code()), message);
  }

  // Opens regular file `path` of the vault; reports a problem and returns nothing if it cannot.
  std::optional<OpenedFile> OpenFile(const std::string& path, int src, const std::string& stored) {
    struct stat before;
    const bool looked = ::fstatat(src, stored.c_str(), &before, AT_SYMLINK_NOFOLLOW) == 0;
    const int fd = OpenNoAtime(src, stored, kOpenFile);
    if (fd < 0) {
      Problem(path, SysError(path, "open"));
      return std::nullopt;
    }
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !looked || !SameInode(before, st)) {
      ::close(fd);
      Problem(path, Status(Code::kCorrupt, "changed while being exported"));
      return std::nullopt;
    }
    OpenedFile f{Fd(::dup(fd)), nullptr};
    if (f.fd.get() < 0) {
      Problem(path, SysError(path, "dup"));
      ::close(fd);
      return std::nullopt;
    }
    auto contents = volume_.pages().Open(core::NewPosixBackingFile(fd), path);
    if (!contents.ok()) {
      Problem(path, contents.status());
      return std::nullopt;
    }
    f.contents = std::move(contents).value();
    return f;
  }

  // The plaintext of `file` to `out`: a failure to read the vault is returned in `damage`, a
  // failure to write `out` as the result.
  Status Copy(core::FileContents& file, int out, const std::string& shown, Status& damage) {
    const uint64_t size = file.size();
    for (uint64_t offset = 0; offset < size;) {
      auto n = file.Read(offset, buffer_);
      if (!n.ok()) {
        damage = n.status();  // the first bad page; the rest of the file is not read
        return Status::Ok();
      }
      if (*n == 0) {
        damage = Status(Code::kCorrupt, fmt::format("ends at {} of {} bytes", offset, size));
        return Status::Ok();
      }
      SIGILFS_RETURN_IF_ERROR(WriteAll(out, ByteSpan(buffer_).first(*n), shown));
      offset += *n;
    }
    return Status::Ok();
  }

  // A damaged file is not created: no file that looks complete and is not.
  Result<bool> File(const std::string& path, int src, const std::string& stored,
                    const struct stat& st, int dst, const std::string& name,
                    const std::string& dest) {
    auto file = OpenFile(path, src, stored);
    if (!file) return false;
    TempEntry tmp(dst, kExportTemp);
    Fd out(::openat(dst, tmp.name().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    0600));
    if (out.get() < 0) return SysError(dest, "create");
    Status damage;
    SIGILFS_RETURN_IF_ERROR(Copy(*file->contents, out.get(), dest, damage));
    if (!damage.ok()) {
      Problem(path, damage);
      return false;
    }
    SIGILFS_RETURN_IF_ERROR(Xattrs(path, file->fd.get(), out.get(), dest));
    SIGILFS_RETURN_IF_ERROR(SetMetadata(out.get(), st, owner_, dest));
    SIGILFS_RETURN_IF_ERROR(tmp.Place(name, force_, dest));
    return true;
  }

  Result<bool> Symlink(const std::string& path, int src, const std::string& stored,
                       const struct stat& st, int dst, const std::string& name,
                       const std::string& dest) {
    std::string sealed(PATH_MAX, '\0');
    const ssize_t n = ::readlinkat(src, stored.c_str(), sealed.data(), sealed.size());
    if (n < 0) {
      Problem(path, SysError(path, "readlink"));
      return false;
    }
    sealed.resize(static_cast<size_t>(n));
    auto target = volume_.DecryptSymlinkTarget(sealed);
    if (!target.ok()) {
      Problem(path, target.status().WithContext("symlink target"));
      return false;
    }
    TempEntry tmp(dst, kExportTemp);
    if (::symlinkat(target->c_str(), dst, tmp.name().c_str()) != 0)
      return SysError(dest, "symlink");
    SIGILFS_RETURN_IF_ERROR(SetMetadataAt(dst, tmp.name(), st, owner_, dest));
    SIGILFS_RETURN_IF_ERROR(tmp.Place(name, force_, dest));
    return true;
  }

  // FIFOs, sockets and device nodes: nothing in them is encrypted but their names.
  Status Node(const struct stat& st, int dst, const std::string& name, const std::string& dest) {
    TempEntry tmp(dst, kExportTemp);
    if (::mknodat(dst, tmp.name().c_str(), (st.st_mode & S_IFMT) | 0600, st.st_rdev) != 0)
      return SysError(dest, "mknod");
    SIGILFS_RETURN_IF_ERROR(SetMetadataAt(dst, tmp.name(), st, owner_, dest));
    return tmp.Place(name, force_, dest);
  }

  // Another name of an inode exported before: a hard link to it.
  Status Link(const std::string& path, const Linked& first, int dst, const std::string& name,
              const std::string& dest) {
    if (!first.exported) {
      Problem(path, Status(Code::kCorrupt,
                           "not exported: the same file as " + first.path + ", which is damaged"));
      return Status::Ok();
    }
    TempEntry tmp(dst, kExportTemp);
    if (::linkat(AT_FDCWD, first.dest.c_str(), dst, tmp.name().c_str(), 0) != 0)
      return SysError(dest, "link");
    return tmp.Place(name, force_, dest);
  }

  // The `user.*` attributes of cipher entry `src` (an open file or directory), decrypted, onto
  // `out`. One that does not decrypt is a problem; the others are still copied.
  Status Xattrs(const std::string& path, int src, int out, const std::string& dest) {
    auto list = ReadXattrs(src, core::NameCodec::kXattrPrefix, path);
    if (!list.ok()) {
      Problem(path, list.status());
      return Status::Ok();
    }
    for (const Xattr& sealed : *list) {
      auto x = volume_.names().OpenXattr(sealed.name, sealed.value);
      if (!x.ok()) {
        Problem(path, x.status().WithContext("extended attribute " + sealed.name));
        continue;
      }
      if (x->name.compare(0, kUserNamespace.size(), kUserNamespace) != 0) {
        Problem(path, Status(Code::kCorrupt, "extended attribute outside user.*: " + x->name));
        continue;
      }
      const std::string what = "set extended attribute " + x->name;
      const int rc = ::fsetxattr(out, x->name.c_str(), x->value.data(), x->value.size(), 0);
      const int err = errno;
      crypt::SecureWipe(x->value);
      if (rc != 0) return Status::FromErrno(err, what).WithContext(dest);
    }
    return Status::Ok();
  }

  core::Volume& volume_;
  const bool force_;
  const bool owner_;
  std::vector<uint8_t> buffer_;  // plaintext: wiped when the export is done
  std::map<InodeKey, Linked> links_;
  uint64_t problems_ = 0;
};

// True if directory `dir` is `inner` or one of its ancestors.
bool Contains(const struct stat& dir, int inner) {
  Fd cur(::dup(inner));
  for (int depth = 0; cur.get() >= 0 && depth < 4096; ++depth) {
    struct stat st;
    if (::fstat(cur.get(), &st) != 0) return false;
    if (SameInode(st, dir)) return true;
    Fd up(::openat(cur.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    struct stat parent;
    if (up.get() < 0 || ::fstat(up.get(), &parent) != 0 || SameInode(parent, st)) return false;
    cur = std::move(up);
  }
  return false;
}

int RunExport(const TransferOptions& o) {
  auto parts = SplitVaultPath(o.from);
  if (!parts.ok()) return Fail(parts.status());
  const std::string path = JoinParts(*parts);
  const bool to_stdout = o.to == "-";
  if (to_stdout && parts->empty())
    return Fail(Status(Code::kInvalidArgument, "'-' takes a single file, not the whole vault"));
  // Where it goes, checked before the passphrase is asked for.
  std::string dest = o.to;
  if (dest.empty()) {
    if (parts->empty()) {
      std::fprintf(stderr, "sigilfs: exporting the whole vault needs a DEST directory\n");
      return 2;
    }
    dest = parts->back();
  }
  Fd dst_parent;
  std::string dst_name;
  if (!to_stdout) {
    const fs::path abs = fs::absolute(dest).lexically_normal();
    dst_name = abs.filename().string();
    fs::path parent = abs.parent_path();
    if (dst_name.empty()) {  // "dir/" normalizes to "dir/" with an empty file name
      dst_name = parent.filename().string();
      parent = parent.parent_path();
    }
    if (dst_name.empty() || dst_name == "." || dst_name == "..")
      return Fail(Status(Code::kInvalidArgument, "cannot export to " + dest));
    dest = (parent / dst_name).string();
    const std::string parent_text = parent.string();
    dst_parent = Fd(::open(parent_text.c_str(), kOpenDir | O_CLOEXEC));
    if (dst_parent.get() < 0) return Fail(SysError(parent_text));
    struct stat existing;
    if (!o.force &&
        ::fstatat(dst_parent.get(), dst_name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0)
      return Fail(Exists(dest));
    struct stat vault;
    if (::stat(o.dir.c_str(), &vault) == 0 && Contains(vault, dst_parent.get()))
      return Fail(Status(Code::kInvalidArgument, dest + " is inside the vault's cipher directory"));
  }

  fuse::VaultLock lock;
  auto volume = OpenVolume(o.dir, o.pass, VaultAccess::kRead, lock);
  if (!volume.ok()) return Fail(volume.status());
  Exporter exporter(**volume, o.force, Owner(o));
  Status s;
  if (parts->empty()) {  // the whole vault
    Fd root(::dup((*volume)->root_fd()));
    struct stat st;
    if (root.get() < 0 || ::fstat(root.get(), &st) != 0) return Fail(SysError(o.dir));
    s = exporter.Directory(".", root.get(), st, dst_parent.get(), dst_name, dest);
  } else {
    auto at = (*volume)->Locate(path);
    if (!at.ok()) return Fail(at.status());
    Fd dir(at->dirfd);
    struct stat st;
    if (::fstatat(dir.get(), at->stored.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return Fail(SysError(path));
    if (to_stdout) {
      if (!S_ISREG(st.st_mode))
        return Fail(Status(Code::kInvalidArgument,
                           path + " is not a regular file ('-' takes a single file)"));
      auto streamed =
          exporter.Stream(path, dir.get(), at->stored, STDOUT_FILENO, "standard output");
      if (!streamed.ok()) return Fail(streamed.status());
    } else {
      s = exporter.Entry(path, dir.get(), at->stored, dst_parent.get(), dst_name, dest);
    }
  }
  if (!s.ok()) return Fail(s);
  return exporter.problems() == 0 ? 0 : 1;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// import

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

namespace {

// Where an entry goes in the vault: cipher directory, its IV, its plaintext path and the
// absolute path of the cipher directory (for hard links).
struct VaultDir {
  int fd;
  const core::DirIv& iv;
  const std::string& path;
  const std::string& cipher;
};

// One import; stops at the first failure.
class Importer {
 public:
  Importer(core::Volume& volume, bool force, bool owner, TransferProgress progress = {})
      : volume_(volume), force_(force), owner_(owner), progress_(std::move(progress)) {
    ::fstat(volume.root_fd(), &root_);
  }

  // Plain entry `name` of directory `src` (shown as `shown`) to entry `name_in_vault` of `to`.
  Status Entry(const std::string& shown, int src, const std::string& name, const VaultDir& to,
               const std::string& name_in_vault) {
    const std::string path = Join(to.path, name_in_vault);
    struct stat st;
    if (::fstatat(src, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return SysError(shown);
    auto stored = volume_.StoredName(to.iv, name_in_vault);
    if (!stored.ok()) return stored.status().WithContext(path);
    struct stat existing;
    const bool exists = ::fstatat(to.fd, stored->c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0;
    if (!exists && errno != ENOENT) return SysError(path, "stat");
    if (exists) {
      if (!force_) return Exists(path);
      if (S_ISDIR(existing.st_mode) && !S_ISDIR(st.st_mode))
        return Status(Code::kExists, path + " exists and is a directory", EEXIST);
      if (!S_ISDIR(existing.st_mode) && S_ISDIR(st.st_mode))
        return Status(Code::kExists, path + " exists and is not a directory", EEXIST);
    }
    if (S_ISDIR(st.st_mode)) {
      Fd dir(OpenNoAtime(src, name, kOpenDir));
      if (dir.get() < 0) return SysError(shown, "open directory");
      if (!exists) {
        SIGILFS_RETURN_IF_ERROR(
            volume_.MakeDirectory(to.fd, to.iv, name_in_vault, 0700).WithContext(path));
      }
      Fd out(::openat(to.fd, stored->c_str(), kOpenDir | O_CLOEXEC));
      if (out.get() < 0) return SysError(path, "open");
      if (!exists) {
        OwnVaultFile(out.get(), core::kDirIvFileName);
        if (core::NameCodec::IsLongName(*stored))
          OwnVaultFile(to.fd, core::NameCodec::SideFileName(*stored));
      }
      return Directory(shown, dir.get(), st, out.get(), path, to.cipher + "/" + *stored);
    }
    const InodeKey key{st.st_dev, st.st_ino};
    if (st.st_nlink > 1) {
      if (auto it = links_.find(key); it != links_.end())
        return Link(it->second, to, name_in_vault, *stored, path);
    }
    if (S_ISREG(st.st_mode)) {
      SIGILFS_RETURN_IF_ERROR(File(shown, src, name, st, to, name_in_vault, *stored, path));
    } else if (S_ISLNK(st.st_mode)) {
      SIGILFS_RETURN_IF_ERROR(Symlink(shown, src, name, st, to, name_in_vault, *stored, path));
    } else {
      SIGILFS_RETURN_IF_ERROR(Node(st, to, name_in_vault, *stored, path));
    }
    if (st.st_nlink > 1) links_[key] = to.cipher + "/" + *stored;
    if (progress_) progress_(path, S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0);
    return Status::Ok();
  }

  // The entries of plain directory `src` (stat `st`) into cipher directory `out`, then its
  // attributes onto it.
  Status Directory(const std::string& shown, int src, const struct stat& st, int out,
                   const std::string& path, const std::string& cipher) {
    if (SameInode(st, root_))
      return Status(Code::kInvalidArgument, shown + " is the vault's own cipher directory");
    auto iv = volume_.ReadDirIv(out);
    if (!iv.ok()) return iv.status().WithContext(path);
    SIGILFS_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(src, shown));
    const VaultDir to{out, *iv, path, cipher};
    for (const std::string& name : names)
      SIGILFS_RETURN_IF_ERROR(Entry(Join(shown, name), src, name, to, name));
    SIGILFS_RETURN_IF_ERROR(Xattrs(shown, src, out, path));
    SIGILFS_RETURN_IF_ERROR(SetMetadata(out, st, owner_, path));
    if (::fsync(out) != 0) return SysError(path, "fsync");
    return Status::Ok();
  }

 private:
  // When run as root, the vault's own files made for an entry (a directory's IV, a long name's
  // side file) belong to whoever owns the vault, who can then mount it.
  void OwnVaultFile(int dirfd, const std::string& name) const {
    if (::geteuid() == 0)
      (void)::fchownat(dirfd, name.c_str(), root_.st_uid, root_.st_gid, AT_SYMLINK_NOFOLLOW);
  }

  // The side file of a long stored name, before the entry appears under that name.
  Status PrepareName(const VaultDir& to, const std::string& name, const std::string& stored,
                     const std::string& path) {
    SIGILFS_RETURN_IF_ERROR(volume_.PrepareName(to.fd, to.iv, name).WithContext(path));
    if (core::NameCodec::IsLongName(stored))
      OwnVaultFile(to.fd, core::NameCodec::SideFileName(stored));
    return Status::Ok();
  }

  // Contents through the page layer under a temporary name, synced, attributes set, then
  // renamed into place (over the old file with --force: a reader sees one or the other).
  Status File(const std::string& shown, int src, const std::string& name, const struct stat& st,
              const VaultDir& to, const std::string& name_in_vault, const std::string& stored,
              const std::string& path) {
    Fd in(OpenNoAtime(src, name, kOpenFile));
    if (in.get() < 0) return SysError(shown, "open");
    struct stat now;
    if (::fstat(in.get(), &now) != 0) return SysError(shown, "stat");
    if (!SameInode(now, st))
      return Status(Code::kIoError, shown + ": changed while being imported");
    TempEntry tmp(to.fd, kImportTemp);
    // Cipher files are always opened for reading too: partial writes read the old page.
    const int fd = ::openat(to.fd, tmp.name().c_str(),
                            O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return SysError(path, "create");
    Fd meta(::dup(fd));
    auto file = volume_.pages().Open(core::NewPosixBackingFile(fd), path);
    if (!file.ok()) return file.status();
    if (meta.get() < 0) return SysError(path, "dup");
    core::FdSource source(in.get(), kStep);
    for (uint64_t offset = 0;;) {
      auto n = source.Fill();
      if (!n.ok()) return n.status().WithContext(shown);
      if (*n == 0) break;
      SIGILFS_ASSIGN_OR_RETURN(size_t written, (*file)->Write(offset, source, *n));
      if (written != *n) return Status(Code::kIoError, path + ": short write");
      offset += *n;
    }
    SIGILFS_RETURN_IF_ERROR((*file)->Sync(false));
    file->reset();  // nothing dirty is left to be written after the times are set
    SIGILFS_RETURN_IF_ERROR(Xattrs(shown, in.get(), meta.get(), path));
    SIGILFS_RETURN_IF_ERROR(SetMetadata(meta.get(), st, owner_, path));
    SIGILFS_RETURN_IF_ERROR(PrepareName(to, name_in_vault, stored, path));
    return tmp.Place(stored, force_, path);
  }

  Status Symlink(const std::string& shown, int src, const std::string& name, const struct stat& st,
                 const VaultDir& to, const std::string& name_in_vault, const std::string& stored,
                 const std::string& path) {
    std::string target(PATH_MAX, '\0');
    const ssize_t n = ::readlinkat(src, name.c_str(), target.data(), target.size());
    if (n < 0) return SysError(shown, "readlink");
    target.resize(static_cast<size_t>(n));
    auto sealed = volume_.EncryptSymlinkTarget(target);
    if (!sealed.ok()) return sealed.status().WithContext(path);
    // A link replaced by --force takes a long target's side file with it (docs/format.md,
    // "Symlinks"); a link not made leaves none of its own.
    struct stat old;
    const std::string replaced = ::fstatat(to.fd, stored.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0
                                     ? volume_.TargetToRelease(to.fd, stored, old)
                                     : std::string();
    TempEntry tmp(to.fd, kImportTemp);
    Status s = ::symlinkat(sealed->c_str(), to.fd, tmp.name().c_str()) != 0
                   ? SysError(path, "symlink")
                   : SetMetadataAt(to.fd, tmp.name(), st, owner_, path);
    if (s.ok()) s = PrepareName(to, name_in_vault, stored, path);
    if (s.ok()) s = tmp.Place(stored, force_, path);
    volume_.ReleaseSymlinkTarget(s.ok() ? replaced : *sealed);
    return s;
  }

  // FIFOs, sockets and device nodes: nothing in them to encrypt but their names.
  Status Node(const struct stat& st, const VaultDir& to, const std::string& name_in_vault,
              const std::string& stored, const std::string& path) {
    TempEntry tmp(to.fd, kImportTemp);
    if (::mknodat(to.fd, tmp.name().c_str(), (st.st_mode & S_IFMT) | 0600, st.st_rdev) != 0)
      return SysError(path, "mknod");
    SIGILFS_RETURN_IF_ERROR(SetMetadataAt(to.fd, tmp.name(), st, owner_, path));
    SIGILFS_RETURN_IF_ERROR(PrepareName(to, name_in_vault, stored, path));
    return tmp.Place(stored, force_, path);
  }

  // Another name of a plain inode imported before: a hard link to its cipher inode.
  Status Link(const std::string& first, const VaultDir& to, const std::string& name_in_vault,
              const std::string& stored, const std::string& path) {
    TempEntry tmp(to.fd, kImportTemp);
    if (::linkat(AT_FDCWD, first.c_str(), to.fd, tmp.name().c_str(), 0) != 0)
      return SysError(path, "link");
    SIGILFS_RETURN_IF_ERROR(PrepareName(to, name_in_vault, stored, path));
    return tmp.Place(stored, force_, path);
  }

  // The `user.*` attributes of plain file or directory `src`, encrypted, onto cipher entry
  // `out` (the vault keeps no others).
  Status Xattrs(const std::string& shown, int src, int out, const std::string& path) {
    SIGILFS_ASSIGN_OR_RETURN(std::vector<Xattr> list, ReadXattrs(src, kUserNamespace, shown));
    for (Xattr& x : list) {
      auto stored = volume_.names().XattrStoredName(x.name);
      auto sealed = stored.ok() ? volume_.names().SealXattr(*stored, x.name, x.value)
                                : Result<std::vector<uint8_t>>(stored.status());
      crypt::SecureWipe(x.value);
      if (!sealed.ok())
        return sealed.status().WithContext(shown + ": extended attribute " + x.name);
      const std::string what = "set extended attribute " + x.name;
      if (::fsetxattr(out, stored->c_str(), sealed->data(), sealed->size(), 0) != 0)
        return SysError(path, what.c_str());
    }
    return Status::Ok();
  }

  core::Volume& volume_;
  const bool force_;
  const bool owner_;
  const TransferProgress progress_;
  struct stat root_ {};                    // the cipher root directory
  std::map<InodeKey, std::string> links_;  // absolute cipher path of each linked inode's first name
};

int RunImport(const TransferOptions& o) {
  // The source, checked before the passphrase is asked for.
  std::string source = o.from;
  while (source.size() > 1 && source.back() == '/') source.pop_back();
  struct stat st;
  if (::lstat(source.c_str(), &st) != 0) return Fail(SysError(source));
  const fs::path source_path(source);
  const std::string name = source == "/" ? "" : source_path.filename().string();
  // "dir/." (or ".", or "/"): the directory's contents, merged into the target directory.
  const bool contents = name.empty() || name == "." || name == "..";
  std::string parent = source_path.has_parent_path() ? source_path.parent_path().string() : ".";
  if (contents) parent = source;
  Fd src(::open(parent.c_str(), kOpenDir | O_CLOEXEC));
  if (src.get() < 0) return Fail(SysError(parent));
  auto parts = SplitVaultPath(o.to);
  if (!parts.ok()) return Fail(parts.status());
  if (S_ISDIR(st.st_mode)) {
    const Fd vault(::open(o.dir.c_str(), kOpenDir | O_CLOEXEC));
    if (vault.get() >= 0 && Contains(st, vault.get()))
      return Fail(
          Status(Code::kInvalidArgument, source + " contains the vault's cipher directory"));
  }

  fuse::VaultLock lock;
  auto opened = OpenVolume(o.dir, o.pass, VaultAccess::kWrite, lock);
  if (!opened.ok()) return Fail(opened.status());
  core::Volume& volume = **opened;
  Importer importer(volume, o.force, Owner(o));

  // The target: PATH itself, or SOURCE's name inside PATH when PATH is a directory.
  std::string path = JoinParts(*parts);
  Fd into;  // the directory imported into, if any
  Fd parent_dir;
  std::string target_name;
  if (parts->empty()) {
    into = Fd(::dup(volume.root_fd()));
    if (into.get() < 0) return Fail(SysError(o.dir));
  } else {
    auto at = volume.Locate(path);
    if (!at.ok()) return Fail(at.status());
    parent_dir = Fd(at->dirfd);
    struct stat existing;
    if (::fstatat(parent_dir.get(), at->stored.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(existing.st_mode)) {
      into = Fd(::openat(parent_dir.get(), at->stored.c_str(), kOpenDir | O_CLOEXEC));
      if (into.get() < 0) return Fail(SysError(path));
    } else {
      target_name = parts->back();
      parts->pop_back();
      path = JoinParts(*parts);
    }
  }
  Status s;
  if (into.get() >= 0 && contents) {
    auto cipher = FdPath(into.get());
    if (!cipher.ok()) return Fail(cipher.status());
    s = importer.Directory(source, src.get(), st, into.get(), path, *cipher);
  } else {
    if (into.get() >= 0) {
      parent_dir = std::move(into);
      target_name = name;
    }
    auto iv = volume.ReadDirIv(parent_dir.get());
    if (!iv.ok()) return Fail(iv.status().WithContext(path));
    auto cipher = FdPath(parent_dir.get());
    if (!cipher.ok()) return Fail(cipher.status());
    const VaultDir to{parent_dir.get(), *iv, path, *cipher};
    // The entry by its name in the source's parent directory (for "dir/.", the directory).
    const std::string entry = contents ? "." : name;
    s = importer.Entry(source, src.get(), entry, to, target_name);
    if (s.ok() && ::fsync(parent_dir.get()) != 0) s = SysError(path, "fsync");
  }
  return s.ok() ? 0 : Fail(s);
}

}  // namespace

Status ImportContents(core::Volume& volume, const std::string& source, bool owner,
                      const TransferProgress& progress) {
  Fd src(::open(source.c_str(), kOpenDir | O_CLOEXEC));
  struct stat st;
  if (src.get() < 0 || ::fstat(src.get(), &st) != 0) return SysError(source);
  if (Contains(st, volume.root_fd()))
    return Status(Code::kInvalidArgument, source + " contains the vault's cipher directory");
  Fd into(::dup(volume.root_fd()));
  if (into.get() < 0) return SysError(volume.vault().dir());
  SIGILFS_ASSIGN_OR_RETURN(std::string cipher, FdPath(into.get()));
  Importer importer(volume, /*force=*/false, owner, progress);
  return importer.Directory(source, src.get(), st, into.get(), ".", cipher);
}

Status ExportAll(core::Volume& volume, const std::string& dest, bool owner, uint64_t& problems) {
  const fs::path abs = fs::absolute(dest).lexically_normal();
  const std::string name = abs.filename().string(), parent = abs.parent_path().string();
  if (name.empty() || name == "." || name == "..")
    return Status(Code::kInvalidArgument, "cannot export to " + dest);
  Fd dst_parent(::open(parent.c_str(), kOpenDir | O_CLOEXEC));
  if (dst_parent.get() < 0) return SysError(parent);
  struct stat vault;
  if (::fstat(volume.root_fd(), &vault) != 0) return SysError(volume.vault().dir());
  if (Contains(vault, dst_parent.get()))
    return Status(Code::kInvalidArgument, dest + " is inside the vault's cipher directory");
  Fd root(::dup(volume.root_fd()));
  struct stat st;
  if (root.get() < 0 || ::fstat(root.get(), &st) != 0) return SysError(volume.vault().dir());
  Exporter exporter(volume, /*force=*/true, owner);
  Status s = exporter.Directory(".", root.get(), st, dst_parent.get(), name, abs.string());
  problems = exporter.problems();
  return s;
}

void RegisterTransferCommands(CLI::App& app, Action& action) {
  {
    auto o = std::make_shared<TransferOptions>();
    auto* cmd = app.add_subcommand("export",
                                   "Decrypt a file or tree of an unmounted vault into plain files");
    cmd->add_option("CIPHERDIR", o->dir, "The vault's cipher directory")->required();
    cmd->add_option("PATH", o->from, "What to export: a path inside the vault, '.' for all of it")
        ->required();
    cmd->add_option("DEST", o->to,
                    "Where to (default: PATH's last component in the current directory); "
                    "'-' writes a single file to standard output");
    cmd->add_flag("--force", o->force,
                  "Replace an existing DEST (a directory is merged into, files in it replaced)");
    cmd->add_flag("--no-owner", o->no_owner, "Do not restore ownership (only root restores it)");
    AddPassphraseOptions(*cmd, o->pass, "", "passphrase");
    cmd->footer(
        "Recreates directories, files, symlinks, FIFOs and device nodes, hard links, permissions,\n"
        "times, user.* extended attributes, and ownership when run as root. A damaged file, name\n"
        "or attribute is reported (one line each) and left out; the rest is exported.\n"
        "Exit status: 0 all exported, 1 something was damaged or failed, 2 usage error.\n"
        "A vault that is mounted gets a warning: the mount may not have written back yet.");
    cmd->callback([&action, o] { action = [o] { return RunExport(*o); }; });
  }
  {
    auto o = std::make_shared<TransferOptions>();
    auto* cmd =
        app.add_subcommand("import", "Encrypt a plain file or tree into an unmounted vault");
    cmd->add_option("CIPHERDIR", o->dir, "The vault's cipher directory")->required();
    cmd->add_option("SOURCE", o->from, "The plain file or directory ('dir/.': its contents)")
        ->required();
    cmd->add_option("PATH", o->to,
                    "Where in the vault (default: SOURCE's name at the root); an existing "
                    "directory is imported into");
    cmd->add_flag("--force", o->force,
                  "Replace existing entries (a file atomically; directories are merged into)");
    cmd->add_flag("--no-owner", o->no_owner, "Do not copy ownership (only root copies it)");
    AddPassphraseOptions(*cmd, o->pass, "", "passphrase");
    cmd->footer(
        "Keeps directories, files, symlinks, FIFOs and device nodes, hard links, permissions,\n"
        "times, user.* extended attributes (the vault keeps no others), and ownership when run\n"
        "as root. Each entry appears complete under its name or not at all. Stops at the first\n"
        "failure. Refused while the vault is mounted (the mount caches names and attributes).");
    cmd->callback([&action, o] { action = [o] { return RunImport(*o); }; });
  }
}

}  // namespace sigilfs::cli
