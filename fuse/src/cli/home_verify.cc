// Proof that a plain tree and a vault hold the same thing, read back through the vault's own
// code (names, pages, targets, attributes): nothing plain is removed without it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <map>
#include <memory>
#include <utility>

#include "home.h"
#include "sigilfs/core/backing_file.h"
#include "sigilfs/core/names.h"
#include "sigilfs/core/unique_fd.h"
#include "sigilfs/crypt/encoding.h"
#include "sigilfs/crypt/secure_bytes.h"
#include "transfer.h"

namespace sigilfs::cli::home {
namespace {

using Fd = core::UniqueFd;
using InodeKey = std::pair<dev_t, ino_t>;

constexpr int kOpenDir = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
// Regular files open without blocking, should one have become a FIFO since it was looked at.
constexpr int kOpenFile = O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK;
constexpr size_t kStep = 1 << 20;
constexpr std::string_view kUserNamespace = "user.";

Status Differ(const std::string& path, const std::string& what) {
  return Status(Code::kCorrupt,
                path + ": " + what + " differ between the plain tree and the vault");
}

Status SysError(const std::string& path, const char* what) {
  const int err = errno;
  return Status::FromErrno(err, path + ": " + what);
}

// A path inside the vault ("." is its root) and one on disk.
std::string Join(const std::string& dir, const std::string& name) {
  return dir == "." ? name : dir + "/" + name;
}
std::string Child(const std::string& dir, const std::string& name) { return dir + "/" + name; }

class Comparer {
 public:
  Comparer(core::Volume& volume, VerifiedTree* verified)
      : volume_(volume), verified_(verified), plain_buf_(kStep), vault_buf_(kStep) {}
  ~Comparer() {
    crypt::SecureWipe(plain_buf_);
    crypt::SecureWipe(vault_buf_);
  }
  Comparer(const Comparer&) = delete;
  Comparer& operator=(const Comparer&) = delete;

  uint64_t entries() const { return entries_; }

  // Plain directory `plain` against cipher directory `cipher` (both open), whose attributes
  // were compared by the caller (or are the roots').
  Status Directory(const std::string& path, const std::string& shown, int plain, int cipher) {
    SIGILFS_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(plain, shown));
    auto iv = volume_.ReadDirIv(cipher);
    if (!iv.ok()) return iv.status().WithContext(path);
    std::vector<core::DirEntry> listed;
    Status damaged;
    SIGILFS_RETURN_IF_ERROR(
        volume_.ListSorted(cipher, *iv, listed, [&](const std::string& stored, const Status& s) {
          if (damaged.ok()) damaged = s.WithContext(Join(path, stored) + " (stored name)");
        }));
    if (!damaged.ok()) return damaged;
    std::map<std::string, std::string> stored;  // plaintext name -> stored name
    for (const core::DirEntry& e : listed) stored.emplace(e.name, e.stored);
    for (const std::string& name : names) {
      if (stored.count(name) == 0)
        return Status(Code::kCorrupt, Join(path, name) + ": missing from the vault");
    }
    if (stored.size() != names.size()) {
      for (const auto& [name, unused] : stored) {
        if (!std::binary_search(names.begin(), names.end(), name))
          return Status(Code::kCorrupt,
                        Join(path, name) + ": in the vault but not in the plain tree");
      }
    }
    for (const std::string& name : names)
      SIGILFS_RETURN_IF_ERROR(
          Entry(Join(path, name), Child(shown, name), plain, name, cipher, stored[name]));
    return Status::Ok();
  }

  // Type, mode, owner and modification time of a plain and a cipher entry. Access times are
  // copied too but not compared: reading a symlink's target updates its access time.
  static Status Attributes(const std::string& path, const struct stat& p, const struct stat& c) {
    if ((p.st_mode & S_IFMT) != (c.st_mode & S_IFMT)) return Differ(path, "types");
    if (!S_ISLNK(p.st_mode) && (p.st_mode & 07777) != (c.st_mode & 07777))
      return Differ(path, "permissions");
    if (p.st_uid != c.st_uid || p.st_gid != c.st_gid) return Differ(path, "owners");
    if (p.st_mtim.tv_sec != c.st_mtim.tv_sec || p.st_mtim.tv_nsec != c.st_mtim.tv_nsec)
      return Differ(path, "modification times");
    if ((S_ISCHR(p.st_mode) || S_ISBLK(p.st_mode)) && p.st_rdev != c.st_rdev)
      return Differ(path, "device numbers");
    return Status::Ok();
  }

  // The user.* attributes of plain `plain` and cipher `cipher` (open files or directories).
  Status Xattrs(const std::string& path, const std::string& shown, int plain, int cipher) {
    SIGILFS_ASSIGN_OR_RETURN(std::vector<Xattr> want, ReadXattrs(plain, kUserNamespace, shown));
    SIGILFS_ASSIGN_OR_RETURN(std::vector<Xattr> sealed,
                             ReadXattrs(cipher, core::NameCodec::kXattrPrefix, path));
    std::map<std::string, std::vector<uint8_t>> have;
    Status s;
    for (const Xattr& x : sealed) {
      auto opened = volume_.names().OpenXattr(x.name, x.value);
      if (!opened.ok()) {
        s = opened.status().WithContext(path + ": extended attribute");
        break;
      }
      have.emplace(opened->name, std::move(opened->value));
    }
    if (s.ok() && have.size() != want.size()) s = Differ(path, "extended attributes");
    for (const Xattr& x : want) {
      auto it = have.find(x.name);
      if (s.ok() && (it == have.end() || it->second != x.value))
        s = Differ(path, "extended attributes");
    }
    for (Xattr& x : want) crypt::SecureWipe(x.value);
    for (auto& [name, value] : have) crypt::SecureWipe(value);
    return s;
  }

 private:
  Status Entry(const std::string& path, const std::string& shown, int plain_dir,
               const std::string& name, int cipher_dir, const std::string& stored) {
    ++entries_;
    struct stat p, c;
    if (::fstatat(plain_dir, name.c_str(), &p, AT_SYMLINK_NOFOLLOW) != 0)
      return SysError(shown, "stat");
    if (::fstatat(cipher_dir, stored.c_str(), &c, AT_SYMLINK_NOFOLLOW) != 0)
      return SysError(path, "stat in the vault");
    SIGILFS_RETURN_IF_ERROR(Attributes(path, p, c));
    // Recorded as first looked at: a change made while (or after) it is compared shows at
    // removal time, and the entry then stays.
    if (verified_ != nullptr)
      verified_->insert_or_assign(
          path, VerifiedEntry{p.st_dev, p.st_ino, p.st_mode & S_IFMT, p.st_size, p.st_mtim});
    if (S_ISDIR(p.st_mode)) {
      Fd plain(OpenNoAtime(plain_dir, name, kOpenDir));
      if (plain.get() < 0) return SysError(shown, "open directory");
      Fd cipher(OpenNoAtime(cipher_dir, stored, kOpenDir));
      if (cipher.get() < 0) return SysError(path, "open directory in the vault");
      SIGILFS_RETURN_IF_ERROR(Xattrs(path, shown, plain.get(), cipher.get()));
      return Directory(path, shown, plain.get(), cipher.get());
    }
    // Hard links: the same plain inode is always the same cipher inode, and vice versa.
    const InodeKey plain_key{p.st_dev, p.st_ino}, cipher_key{c.st_dev, c.st_ino};
    const auto [to, fresh_plain] = plain_to_cipher_.emplace(plain_key, cipher_key);
    const auto [from, fresh_cipher] = cipher_to_plain_.emplace(cipher_key, plain_key);
    if (to->second != cipher_key || from->second != plain_key) return Differ(path, "hard links");
    if (!fresh_plain) return Status::Ok();  // another name of an inode already compared
    if (S_ISLNK(p.st_mode)) return Targets(path, shown, plain_dir, name, cipher_dir, stored);
    if (S_ISREG(p.st_mode)) return Contents(path, shown, plain_dir, name, cipher_dir, stored, p);
    return Status::Ok();  // FIFOs, sockets, devices: nothing but their attributes
  }

  Status Targets(const std::string& path, const std::string& shown, int plain_dir,
                 const std::string& name, int cipher_dir, const std::string& stored) {
    std::string plain(PATH_MAX, '\0'), sealed(PATH_MAX, '\0');
    const ssize_t n = ::readlinkat(plain_dir, name.c_str(), plain.data(), plain.size());
    if (n < 0) return SysError(shown, "readlink");
    plain.resize(static_cast<size_t>(n));
    const ssize_t m = ::readlinkat(cipher_dir, stored.c_str(), sealed.data(), sealed.size());
    if (m < 0) return SysError(path, "readlink in the vault");
    sealed.resize(static_cast<size_t>(m));
    auto target = volume_.DecryptSymlinkTarget(sealed);
    if (!target.ok()) return target.status().WithContext(path + ": symlink target");
    return *target == plain ? Status::Ok() : Differ(path, "symlink targets");
  }

  Status Contents(const std::string& path, const std::string& shown, int plain_dir,
                  const std::string& name, int cipher_dir, const std::string& stored,
                  const struct stat& p) {
    Fd plain(OpenNoAtime(plain_dir, name, kOpenFile));
    if (plain.get() < 0) return SysError(shown, "open");
    const int fd = OpenNoAtime(cipher_dir, stored, kOpenFile);
    if (fd < 0) return SysError(path, "open in the vault");
    Fd meta(::dup(fd));
    auto file = volume_.pages().Open(core::NewPosixBackingFile(fd), path);
    if (!file.ok()) return file.status();
    if (meta.get() < 0) return SysError(path, "dup");
    if ((*file)->size() != static_cast<uint64_t>(p.st_size)) return Differ(path, "sizes");
    for (uint64_t offset = 0; offset < (*file)->size();) {
      SIGILFS_ASSIGN_OR_RETURN(size_t n, (*file)->Read(offset, vault_buf_));
      if (n == 0) return Differ(path, "sizes");
      size_t got = 0;
      while (got < n) {
        const ssize_t r = ::pread(plain.get(), plain_buf_.data() + got, n - got,
                                  static_cast<off_t>(offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return SysError(shown, "read");
        if (r == 0) return Differ(path, "sizes");
        got += static_cast<size_t>(r);
      }
      if (!std::equal(vault_buf_.begin(), vault_buf_.begin() + static_cast<ptrdiff_t>(n),
                      plain_buf_.begin()))
        return Differ(path, "contents");
      offset += n;
    }
    uint8_t extra;
    if (::pread(plain.get(), &extra, 1, p.st_size) != 0) return Differ(path, "sizes");
    return Xattrs(path, shown, plain.get(), meta.get());
  }

  core::Volume& volume_;
  VerifiedTree* const verified_;                // may be null
  std::vector<uint8_t> plain_buf_, vault_buf_;  // plaintext: wiped when done
  std::map<InodeKey, InodeKey> plain_to_cipher_, cipher_to_plain_;
  uint64_t entries_ = 0;
};

}  // namespace

Result<uint64_t> CompareWithVault(core::Volume& volume, const std::string& plain,
                                  VerifiedTree* verified) {
  Fd root(::open(plain.c_str(), kOpenDir | O_CLOEXEC));
  if (root.get() < 0) return SysError(plain, "open directory");
  Fd cipher(::dup(volume.root_fd()));
  struct stat p, c;
  if (::fstat(root.get(), &p) != 0) return SysError(plain, "stat");
  if (cipher.get() < 0 || ::fstat(cipher.get(), &c) != 0)
    return SysError(volume.vault().dir(), "stat");
  if (verified != nullptr) verified->clear();
  Comparer comparer(volume, verified);
  SIGILFS_RETURN_IF_ERROR(Comparer::Attributes(".", p, c));
  SIGILFS_RETURN_IF_ERROR(comparer.Xattrs(".", plain, root.get(), cipher.get()));
  SIGILFS_RETURN_IF_ERROR(comparer.Directory(".", plain, root.get(), cipher.get()));
  return comparer.entries();
}

}  // namespace sigilfs::cli::home
