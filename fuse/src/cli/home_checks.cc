// The checks `sigilfs home` makes before it touches anything: the account, whether it is logged
// in, its login password, the size of the tree and the room for it; and the final removal.
#include <crypt.h>
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <shadow.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <utility>

#include "home.h"
#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/mountinfo.h"
#include "sigilfs/crypt/secure_bytes.h"

namespace sigilfs::cli::home {
namespace {

using core::BackingDir;

// What a directory, and a symlink, FIFO or empty file, take at least on most filesystems: a
// block each (a directory's copy also gets its IV file).
constexpr uint64_t kBlock = 4096;

std::string Child(const std::string& dir, const std::string& name) { return dir + "/" + name; }

uint64_t RoundUp(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

Status SysError(const std::string& path, const char* what) {
  const int err = errno;
  return Status::FromErrno(err, path + ": " + what);
}

// `s`, an error about `path`, told by it.
Status About(const std::string& path, const Status& s) {
  return Status::FromErrno(s.sys_errno() != 0 ? s.sys_errno() : EIO, path + ": " + s.ToString());
}

std::string MiB(uint64_t bytes) {
  std::ostringstream s;
  s << (bytes + (1 << 20) - 1) / (1 << 20) << " MiB";
  return s.str();
}

// The names in plain directory `dir`, sorted (its listing keeps the access time where allowed).
Result<std::vector<std::string>> ListNames(BackingDir& dir, const std::string& shown) {
  std::vector<std::string> names;
  if (Status s = dir.List(0,
                          [&](const core::BackingEntry& e) {
                            names.push_back(e.name);
                            return true;
                          });
      !s.ok())
    return About(shown, s);
  std::sort(names.begin(), names.end());
  return names;
}

class TreeWalk {
 public:
  TreeWalk(dev_t dev, const std::function<uint64_t(uint64_t)>& stored_size)
      : dev_(dev), stored_size_(stored_size) {}

  Status Directory(BackingDir& dir, const std::string& shown) {
    SIGILFS_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(dir, shown));
    for (const std::string& name : names) {
      const std::string path = Child(shown, name);
      auto found = dir.Stat(name);
      if (!found.ok()) return About(path, found.status());
      const struct stat& st = *found;
      ++size_.entries;
      if (S_ISDIR(st.st_mode)) {
        if (st.st_dev != dev_)
          return Status(Code::kInvalidArgument,
                        path +
                            " is a mount point: unmount it first (its contents would be "
                            "copied into the vault and then deleted)");
        size_.needed_bytes += 2 * kBlock;
        auto sub = dir.OpenDir(name);
        if (!sub.ok()) return About(path, sub.status());
        SIGILFS_RETURN_IF_ERROR(Directory(**sub, path));
      } else if (S_ISREG(st.st_mode)) {
        if (st.st_nlink > 1 && !seen_.emplace(st.st_dev, st.st_ino).second) continue;
        const auto bytes = static_cast<uint64_t>(st.st_size);
        size_.file_bytes += bytes;
        size_.needed_bytes += RoundUp(stored_size_(bytes)) + kBlock;
      } else {
        size_.needed_bytes += kBlock;
      }
    }
    return Status::Ok();
  }

  const TreeSize& size() const { return size_; }

 private:
  dev_t dev_;
  const std::function<uint64_t(uint64_t)>& stored_size_;
  TreeSize size_;
  std::set<std::pair<dev_t, ino_t>> seen_;
};

// Removes the verified entries of a tree that are still as they were verified (RemoveVerified).
class VerifiedRemoval {
 public:
  VerifiedRemoval(const VerifiedTree& verified, dev_t dev) : verified_(verified), dev_(dev) {}

  // The entries of open directory `dir`, `rel` under the root (empty for the root itself);
  // `emptied` tells whether all of them went.
  Status Directory(BackingDir& dir, const std::string& rel, const std::string& shown,
                   bool& emptied) {
    SIGILFS_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(dir, shown));
    emptied = true;
    for (const std::string& name : names) {
      std::string key = rel;
      if (!key.empty()) key += '/';
      key += name;
      const std::string path = Child(shown, name);
      auto found = dir.Stat(name);
      if (!found.ok()) {
        if (found.status().code() == Code::kNotFound) continue;  // gone since it was listed
        return About(path, found.status());
      }
      const struct stat& st = *found;
      const auto it = verified_.find(key);
      if (it == verified_.end()) {
        Leave(path, "new", emptied);
        continue;
      }
      const VerifiedEntry& v = it->second;
      if (st.st_dev != v.dev || st.st_ino != v.ino || (st.st_mode & S_IFMT) != v.type ||
          st.st_dev != dev_) {
        Leave(path, "replaced", emptied);
        continue;
      }
      if (S_ISDIR(st.st_mode)) {
        // A directory's size and time follow its entries, which are checked one by one.
        auto sub = dir.OpenDir(name);
        if (!sub.ok()) return About(path, sub.status());
        auto opened = (*sub)->Stat("");
        if (!opened.ok()) return About(path, opened.status());
        if (opened->st_dev != v.dev || opened->st_ino != v.ino) {
          Leave(path, "replaced", emptied);
          continue;
        }
        bool sub_emptied = false;
        SIGILFS_RETURN_IF_ERROR(Directory(**sub, key, path, sub_emptied));
        if (!sub_emptied) {
          emptied = false;  // what is left in it was reported
          continue;
        }
        if (Status s = dir.RemoveDir(name); !s.ok()) {
          if (s.sys_errno() == ENOTEMPTY || s.sys_errno() == EEXIST) {
            Leave(path, "new entries appeared in it", emptied);
            continue;
          }
          if (s.code() != Code::kNotFound) return About(path, s);
        }
        continue;
      }
      if (st.st_size != v.size || st.st_mtim.tv_sec != v.mtime.tv_sec ||
          st.st_mtim.tv_nsec != v.mtime.tv_nsec) {
        Leave(path, "changed", emptied);
        continue;
      }
      if (Status s = dir.Unlink(name); !s.ok() && s.code() != Code::kNotFound)
        return About(path, s);
    }
    return Status::Ok();
  }

  const std::vector<std::string>& left() const { return left_; }

 private:
  void Leave(const std::string& path, const char* why, bool& emptied) {
    left_.push_back(path + " (" + why + ")");
    emptied = false;
  }

  const VerifiedTree& verified_;
  const dev_t dev_;
  std::vector<std::string> left_;  // "path (why)"
};

}  // namespace

Result<Account> LookUpUser(const std::string& name) {
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 16384);
  struct passwd pw;
  struct passwd* found = nullptr;
  int rc;
  while ((rc = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found)) == ERANGE)
    buf.resize(buf.size() * 2);
  if (rc != 0) return Status::FromErrno(rc, "look up user " + name);
  if (found == nullptr) return Status(Code::kNotFound, "no such user: " + name);
  return Account{pw.pw_name, pw.pw_uid, pw.pw_gid, pw.pw_dir};
}

std::vector<pid_t> ProcessesOf(uid_t uid) {
  std::vector<pid_t> pids;
  std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
  if (!proc) return pids;
  while (const dirent* e = ::readdir(proc.get())) {  // NOLINT(concurrency-mt-unsafe): own stream
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::ifstream status(std::string("/proc/") + e->d_name + "/status");
    for (std::string line; std::getline(status, line);) {
      // A zombie has exited and touches nothing: it only waits for its parent (State precedes
      // Uid in the file).
      if (line.rfind("State:", 0) == 0 && line.find("Z (zombie)") != std::string::npos) break;
      if (line.rfind("Uid:", 0) != 0) continue;
      std::istringstream ids(line.substr(4));
      for (unsigned long id; ids >> id;) {  // real, effective, saved, filesystem
        if (id == uid) {
          pids.push_back(static_cast<pid_t>(pid));
          break;
        }
      }
      break;
    }
  }
  return pids;
}

LoginPassword CheckLoginPassword(const std::string& user, ByteSpan passphrase) {
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 16384);
  struct spwd sp;
  struct spwd* found = nullptr;
  while (::getspnam_r(user.c_str(), &sp, buf.data(), buf.size(), &found) == ERANGE)
    buf.resize(buf.size() * 2);
  // "!..." and "*" are locked or password-less accounts: there is nothing to compare with.
  if (found == nullptr || sp.sp_pwdp == nullptr || sp.sp_pwdp[0] == '!' || sp.sp_pwdp[0] == '*' ||
      sp.sp_pwdp[0] == '\0')
    return LoginPassword::kUnknown;
  const std::string hash = sp.sp_pwdp;
  crypt::SecureBytes phrase(passphrase.size() + 1);  // NUL-terminated for crypt_r
  std::memcpy(phrase.data(), passphrase.data(), passphrase.size());
  phrase.data()[passphrase.size()] = 0;
  auto data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  const char* out =
      ::crypt_r(reinterpret_cast<const char*>(phrase.data()), hash.c_str(), data.get());
  LoginPassword result = LoginPassword::kUnknown;
  if (out != nullptr && out[0] != '*')
    result =
        std::strcmp(out, hash.c_str()) == 0 ? LoginPassword::kMatches : LoginPassword::kDiffers;
  ::explicit_bzero(data.get(), sizeof(crypt_data));  // holds the passphrase's hash state
  return result;
}

Result<TreeSize> MeasureTree(const std::string& dir,
                             const std::function<uint64_t(uint64_t)>& stored_size) {
  auto root = core::OpenPosixBackingDir(dir);
  if (!root.ok()) return About(dir, root.status());
  auto st = (*root)->Stat("");
  if (!st.ok()) return About(dir, st.status());
  TreeWalk walk(st->st_dev, stored_size);
  SIGILFS_RETURN_IF_ERROR(walk.Directory(**root, dir));
  TreeSize size = walk.size();
  size.needed_bytes += 2 * kBlock;  // the root directory's IV and the config
  return size;
}

Status CheckRoom(const std::string& dir, const TreeSize& size, const std::string& what) {
  struct statvfs fs;
  if (::statvfs(dir.c_str(), &fs) != 0) return SysError(dir, "statvfs");
  const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (size.needed_bytes > free_bytes)
    return Status(Code::kNoSpace,
                  "not enough space in " + dir + " for " + what + ": it needs about " +
                      MiB(size.needed_bytes) + ", " + MiB(free_bytes) + " are free",
                  ENOSPC);
  // Every entry, and every directory's IV, takes an inode (filesystems that report no inode
  // count, as btrfs, have no fixed limit).
  if (fs.f_files != 0 && 2 * size.entries + 2 > fs.f_favail)
    return Status(Code::kNoSpace,
                  "not enough free inodes in " + dir + " for " + what + ": it needs about " +
                      std::to_string(2 * size.entries + 2) + ", " + std::to_string(fs.f_favail) +
                      " are free",
                  ENOSPC);
  return Status::Ok();
}

Status RemoveVerified(BackingDir& dir, const std::string& shown, const VerifiedTree& verified) {
  auto st = dir.Stat("");
  if (!st.ok()) return About(shown, st.status());
  VerifiedRemoval removal(verified, st->st_dev);
  bool emptied = false;
  SIGILFS_RETURN_IF_ERROR(removal.Directory(dir, "", shown, emptied));
  const std::vector<std::string>& left = removal.left();
  if (left.empty()) return Status::Ok();
  constexpr size_t kShown = 20;
  std::string list;
  for (size_t i = 0; i < left.size() && i < kShown; ++i) list += "\n  " + left[i];
  if (left.size() > kShown) list += "\n  ... and " + std::to_string(left.size() - kShown) + " more";
  return Status(Code::kNotEmpty,
                std::to_string(left.size()) + (left.size() == 1 ? " entry was" : " entries were") +
                    " made or changed after the verification and left in place in " + shown +
                    " (with the directories holding them):" + list,
                ENOTEMPTY);
}

std::optional<std::string> FindSigilfsMount(const std::vector<std::string>& vaults,
                                            const std::string& mount_point) {
  for (const sigilfs::core::MountInfoEntry& m : sigilfs::core::ReadMountInfo()) {
    const auto source = sigilfs::core::SigilfsVaultOf(m);
    if (!source) continue;
    if (m.mount_point == mount_point) return m.mount_point;
    for (const std::string& vault : vaults) {
      // A mount records the canonical path (older ones the path they were given).
      std::error_code ec;
      const std::string canonical = std::filesystem::weakly_canonical(vault, ec).string();
      if (*source == vault || (!ec && *source == canonical)) return m.mount_point;
    }
  }
  return std::nullopt;
}

}  // namespace sigilfs::cli::home
