// The reverse view's directories: a read-only BackingDir over a plain directory, presenting the
// entries a vault of that directory would hold (see sigilfs/core/reverse.h).
#include <algorithm>
#include <cerrno>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "endian.h"
#include "plain_tree.h"
#include "reverse_file.h"
#include "sigilfs/core/config.h"
#include "sigilfs/core/names.h"
#include "sigilfs/core/reverse.h"
#include "sigilfs/core/reverse_keys.h"
#include "sigilfs/core/volume.h"
#include "sigilfs/crypt/secure_bytes.h"
#include "sigilfs/crypt/sha256.h"

namespace sigilfs::core {
namespace {

constexpr std::string_view kLongPrefix = kLongNamePrefix;
constexpr std::string_view kSideSuffix = kLongNameSideSuffix;
// Listing cursors: "." and ".." have these; every other entry its name's hash, above them.
constexpr uint64_t kDotCursor = 1, kDotDotCursor = 2, kFirstCursor = 3;

Status ReadOnly() { return Status::FromErrno(EROFS, "the encrypted view is read only"); }
Status Missing(std::string_view name) {
  return Status::FromErrno(ENOENT, "no entry " + std::string(name) + " in the encrypted view");
}

// What the view shares: the plain tree and the keys.
struct Context {
  std::shared_ptr<BackingDir> root;  // the plain tree's root
  dev_t dev = 0;                     // its file system: entries on others are left out
  std::unique_ptr<NameCodec> names;
  std::shared_ptr<const ReverseKeys> keys;  // shared with the files opened
  // Units that reads took a part of, per file version, shared by the opens of each.
  std::shared_ptr<ReverseKeptUnits> kept = NewReverseKeptUnits();
  crypt::SecureBytes content_key;
  crypt::AeadAlgorithm cipher = crypt::AeadAlgorithm::kAes256Gcm;
  PageGeometry geometry{12};
  struct timespec made {};  // the reverse config's modification time: the view's own files'
  ExcludeRules exclude;
};

// What a stored name of a view directory is.
struct Resolved {
  enum Kind { kPlain, kDirIv, kConfig, kLongSide } kind = kPlain;
  std::string plain;   // kPlain, kLongSide: the plain entry's name
  std::string cipher;  // kLongSide: the full encrypted name, the side file's contents
};

std::string ChildPath(const std::string& dir, std::string_view name) {
  return dir.empty() ? std::string(name) : dir + "/" + std::string(name);
}

// The place an entry's derivations are bound to: its path, or, for a file with several names,
// its inode (each name then shows the same bytes, as hard links must).
bool ByInode(const struct stat& st) { return !S_ISDIR(st.st_mode) && st.st_nlink > 1; }
std::string Identity(const std::string& path, const struct stat& st) {
  if (!ByInode(st)) return path;
  return "/inode/" + std::to_string(st.st_ino);  // no plain path starts with '/'
}

// An inode number for one of the view's own files, away from the plain tree's (below 2^32 on
// the usual file systems).
uint64_t SyntheticIno(const std::string& dir_path, std::string_view stored) {
  crypt::Sha256Hasher h;
  h.Update(AsBytes(dir_path));
  const uint8_t nul = 0;
  h.Update(ByteSpan(&nul, 1));
  h.Update(AsBytes(stored));
  const crypt::Sha256Digest d = h.Final();
  return (LoadLe64(d.data()) >> 2) | (uint64_t{1} << 62);
}

uint64_t CursorOf(std::string_view stored) {
  const crypt::Sha256Digest d = crypt::Sha256(AsBytes(stored));
  return (LoadLe64(d.data()) >> 2) + kFirstCursor;
}

// What both of the view's handles answer to a call that would change it: EROFS.
class ReadOnlyDir : public BackingDir {
 public:
  Status MakeDir(std::string_view, mode_t) override { return ReadOnly(); }
  Status MakeNode(std::string_view, mode_t, dev_t) override { return ReadOnly(); }
  Status MakeSymlink(std::string_view, std::string_view) override { return ReadOnly(); }
  Status Link(std::string_view, BackingDir&, std::string_view) override { return ReadOnly(); }
  Status Unlink(std::string_view) override { return ReadOnly(); }
  Status RemoveDir(std::string_view) override { return ReadOnly(); }
  Status Rename(std::string_view, BackingDir&, std::string_view, unsigned) override {
    return ReadOnly();
  }
  Status SetMode(std::string_view, mode_t) override { return ReadOnly(); }
  Status SetOwner(std::string_view, uid_t, gid_t) override { return ReadOnly(); }
  Status SetTimes(std::string_view, const struct timespec[2]) override { return ReadOnly(); }
  Status SetXattr(std::string_view, std::string_view, ByteSpan, int) override { return ReadOnly(); }
  Status RemoveXattr(std::string_view, std::string_view) override { return ReadOnly(); }
  Status Sync() override { return Status::Ok(); }
};

class ReverseDir : public ReadOnlyDir {
 public:
  ReverseDir(std::shared_ptr<const Context> ctx, std::shared_ptr<BackingDir> plain,
             std::string path, bool listing = false)
      : ctx_(std::move(ctx)),
        plain_(std::move(plain)),
        path_(std::move(path)),
        iv_(ctx_->keys->DirIvOf(path_)),
        listing_(listing) {}

  Result<struct stat> Stat(std::string_view name) override {
    if (name.empty()) return plain_->Stat("");
    SIGILFS_ASSIGN_OR_RETURN(Resolved r, Resolve(name));
    switch (r.kind) {
      case Resolved::kPlain:
        return PlainStat(r.plain);
      case Resolved::kDirIv:
        return OwnFile(name, kDirIvSize);
      case Resolved::kConfig:
        return ConfigStat();
      case Resolved::kLongSide:
        return OwnFile(name, r.cipher.size());
    }
    return Missing(name);
  }

  Result<std::unique_ptr<BackingDir>> OpenDir(std::string_view name) override {
    if (name.empty()) return std::unique_ptr<BackingDir>(new ReverseDir(ctx_, plain_, path_));
    SIGILFS_ASSIGN_OR_RETURN(Resolved r, Resolve(name));
    if (r.kind != Resolved::kPlain) return Status::FromErrno(ENOTDIR, "not a directory");
    SIGILFS_RETURN_IF_ERROR(VisibleStat(r.plain).status());
    SIGILFS_ASSIGN_OR_RETURN(std::unique_ptr<BackingDir> sub, plain_->OpenDir(r.plain));
    SIGILFS_ASSIGN_OR_RETURN(struct stat st, sub->Stat(""));
    if (st.st_dev != ctx_->dev) return Missing(name);
    return std::unique_ptr<BackingDir>(
        new ReverseDir(ctx_, std::move(sub), ChildPath(path_, r.plain)));
  }

  Result<std::unique_ptr<BackingDir>> OpenObject(std::string_view path) override;

  Result<std::unique_ptr<BackingDir>> OpenListing(bool) override {
    SIGILFS_ASSIGN_OR_RETURN(std::unique_ptr<BackingDir> again, plain_->OpenDir(""));
    return std::unique_ptr<BackingDir>(new ReverseDir(ctx_, std::move(again), path_, true));
  }

  Result<std::unique_ptr<BackingFile>> OpenFile(std::string_view name,
                                                const FileOpenMode& how) override {
    if (how.write || how.create) return ReadOnly();
    if (name.empty()) return Status::FromErrno(EISDIR, "a directory");
    SIGILFS_ASSIGN_OR_RETURN(Resolved r, Resolve(name));
    switch (r.kind) {
      case Resolved::kPlain:
        return OpenPlainFile(r.plain, how);
      case Resolved::kDirIv:
        return BytesFile(iv_);
      case Resolved::kConfig:
        return plain_->OpenFile(kReverseConfigFileName, {.write = false, .keep_atime = true});
      case Resolved::kLongSide:
        return BytesFile(AsBytes(r.cipher));
    }
    return Missing(name);
  }

  Result<std::string> ReadSymlink(std::string_view name) override {
    if (name.empty()) return Status::FromErrno(EINVAL, "a directory is no symlink");
    SIGILFS_ASSIGN_OR_RETURN(Resolved r, Resolve(name));
    if (r.kind != Resolved::kPlain) return Status::FromErrno(EINVAL, "not a symlink");
    SIGILFS_ASSIGN_OR_RETURN(struct stat st, VisibleStat(r.plain));
    return SealedTarget(r.plain, st);
  }

  Status List(uint64_t from, const std::function<bool(const BackingEntry&)>& emit) override {
    std::shared_ptr<const std::vector<BackingEntry>> entries;
    if (listing_) {
      // A listing handle reads one snapshot, taken when it starts (again on a rewind), so that a
      // front end's readdir, called once per buffer, does not list the directory each time.
      MutexLock lock(snapshot_mu_);
      if (from == 0 || snapshot_ == nullptr) {
        SIGILFS_ASSIGN_OR_RETURN(auto fresh, Entries());
        snapshot_ = std::make_shared<const std::vector<BackingEntry>>(std::move(fresh));
      }
      entries = snapshot_;
    } else {
      SIGILFS_ASSIGN_OR_RETURN(auto fresh, Entries());
      entries = std::make_shared<const std::vector<BackingEntry>>(std::move(fresh));
    }
    if (listing_) {
      // readdir(3) skips an entry with inode number 0: the dots carry this directory's.
      SIGILFS_ASSIGN_OR_RETURN(struct stat self, plain_->Stat(""));
      const uint64_t ino = self.st_ino;
      if (from < kDotCursor && !emit({".", ino, S_IFDIR, kDotCursor})) return Status::Ok();
      if (from < kDotDotCursor && !emit({"..", ino, S_IFDIR, kDotDotCursor})) return Status::Ok();
    }
    auto it = std::upper_bound(entries->begin(), entries->end(), from,
                               [](uint64_t c, const BackingEntry& e) { return c < e.next; });
    for (; it != entries->end(); ++it)
      if (!emit(*it)) break;
    return Status::Ok();
  }

  Result<std::vector<uint8_t>> GetXattr(std::string_view name, std::string_view attr) override {
    SIGILFS_ASSIGN_OR_RETURN(Attributed a, AttributedEntry(name));
    if (a.none) return Status::FromErrno(ENODATA, "no such attribute");
    if (attr == kDirIvAttrName) {
      // As a vault's: every directory but the root has its IV as an attribute too.
      if (!S_ISDIR(a.st.st_mode) || a.path.empty())
        return Status::FromErrno(ENODATA, "no such attribute");
      const DirIv iv = ctx_->keys->DirIvOf(a.path);
      return std::vector<uint8_t>(iv.begin(), iv.end());
    }
    if (!attr.starts_with(NameCodec::kXattrPrefix))
      return Status::FromErrno(ENODATA, "no such attribute");
    SIGILFS_ASSIGN_OR_RETURN(std::vector<PlainXattr> plain, PlainXattrs(*plain_, a.plain, true));
    Result<std::vector<uint8_t>> found = Status::FromErrno(ENODATA, "no such attribute");
    for (PlainXattr& x : plain) {
      if (found.ok() || found.status().sys_errno() == ENODATA) {
        auto key = ctx_->names->XattrStoredName(x.name);
        if (key.ok() && *key == attr) {
          const SealNonce nonce = ctx_->keys->ValueNonce(*key, Identity(a.path, a.st), x.value);
          found = ctx_->names->SealXattr(*key, x.name, x.value, &nonce);
        }
      }
      crypt::SecureWipe(x.value);
    }
    return found;
  }

  Result<std::vector<std::string>> ListXattrs(std::string_view name) override {
    SIGILFS_ASSIGN_OR_RETURN(Attributed a, AttributedEntry(name));
    std::vector<std::string> out;
    if (a.none) return out;
    if (S_ISDIR(a.st.st_mode) && !a.path.empty()) out.emplace_back(kDirIvAttrName);
    auto names = plain_->ListXattrs(a.plain);  // names only: no value is read to list them
    if (!names.ok()) {
      const int e = names.status().sys_errno();
      if (e == ENOTSUP || e == EOPNOTSUPP) return out;
      return names.status();
    }
    for (const std::string& attr : *names) {
      if (!attr.starts_with(kUserNamespace) && !acl::IsAclName(attr)) continue;
      SIGILFS_ASSIGN_OR_RETURN(std::string key, ctx_->names->XattrStoredName(attr));
      out.push_back(std::move(key));
    }
    return out;
  }

  Result<struct statvfs> StatFs() override { return ctx_->root->StatFs(); }

  // The view's objects have no handles of their own (a front end names them by path).
  Result<ObjectHandle> Handle(std::string_view) override {
    return Status(Code::kNotSupported, "the encrypted view has no file handles");
  }
  Result<std::unique_ptr<BackingDir>> OpenByHandle(const ObjectHandle&) override {
    return Status(Code::kNotSupported, "the encrypted view has no file handles");
  }
  std::vector<std::string> PathTo(BackingDir&) override { return {}; }

 private:
  // What stored name `name` of this directory is. Plain entries the view leaves out are missing.
  Result<Resolved> Resolve(std::string_view name) {
    if (name == kDirIvFileName) return Resolved{Resolved::kDirIv, {}, {}};
    if (path_.empty() && name == kConfigFileName) return Resolved{Resolved::kConfig, {}, {}};
    if (name.starts_with(kLongPrefix)) {
      const bool side = name.ends_with(kSideSuffix);
      const std::string_view entry = side ? name.substr(0, name.size() - kSideSuffix.size()) : name;
      SIGILFS_ASSIGN_OR_RETURN(auto found, FindLong(entry));
      if (side) SIGILFS_RETURN_IF_ERROR(PlainStat(found.first).status());
      if (side)
        return Resolved{Resolved::kLongSide, std::move(found.first), std::move(found.second)};
      return Resolved{Resolved::kPlain, std::move(found.first), {}};
    }
    if (name.find('.') != std::string_view::npos) return Missing(name);
    auto plain = ctx_->names->Decrypt(iv_, name);
    if (!plain.ok() || (path_.empty() && *plain == kReverseConfigFileName)) return Missing(name);
    return Resolved{Resolved::kPlain, std::move(plain).value(), {}};
  }

  // The plain entry whose encrypted name is stored as long name `stored`, and that name. The
  // directory's long names are listed once and kept while its modification time stays.
  Result<std::pair<std::string, std::string>> FindLong(std::string_view stored) {
    SIGILFS_ASSIGN_OR_RETURN(struct stat self, plain_->Stat(""));
    std::shared_ptr<const LongNames> names;
    {
      MutexLock lock(long_mu_);
      if (long_names_ != nullptr && long_names_->mtime.tv_sec == self.st_mtim.tv_sec &&
          long_names_->mtime.tv_nsec == self.st_mtim.tv_nsec)
        names = long_names_;
    }
    if (names == nullptr) {
      auto fresh = std::make_shared<LongNames>();
      fresh->mtime = self.st_mtim;
      SIGILFS_RETURN_IF_ERROR(plain_->List(0, [&](const BackingEntry& e) {
        if (!MayBeLong(e.name) || (path_.empty() && e.name == kReverseConfigFileName)) return true;
        auto cipher = ctx_->names->Encrypt(iv_, e.name);
        if (!cipher.ok()) return true;
        std::string key = NameCodec::StoredName(*cipher);
        if (NameCodec::IsLongName(key))
          fresh->by_stored.emplace(std::move(key),
                                   std::make_pair(e.name, std::move(cipher).value()));
        return true;
      }));
      names = fresh;
      MutexLock lock(long_mu_);
      long_names_ = std::move(fresh);
    }
    auto it = names->by_stored.find(std::string(stored));
    if (it == names->by_stored.end()) return Missing(stored);
    return it->second;
  }

  // Whether a plain name's encrypted form can exceed a stored name's length: a name of L bytes
  // becomes base64 of L + 16 bytes, 4(L + 16)/3 characters.
  static bool MayBeLong(std::string_view plain) {
    return (plain.size() + 16) * 4 / 3 + 1 >= kMaxStoredNameLength;
  }

  // The stat of plain entry `plain` as the view shows it (missing where the view leaves it out).
  Result<struct stat> PlainStat(const std::string& plain) {
    SIGILFS_ASSIGN_OR_RETURN(struct stat st, VisibleStat(plain));
    if (S_ISREG(st.st_mode)) {
      st.st_size = static_cast<off_t>(ctx_->geometry.CipherSize(static_cast<uint64_t>(st.st_size)));
      st.st_blocks = (st.st_size + 511) / 512;
    } else if (S_ISLNK(st.st_mode)) {
      SIGILFS_ASSIGN_OR_RETURN(std::string sealed, SealedTarget(plain, st));
      st.st_size = static_cast<off_t>(sealed.size());
    }
    return st;
  }

  // The plain stat of entry `plain`, missing where the view leaves it out: on another file
  // system (a mount point), or excluded.
  Result<struct stat> VisibleStat(const std::string& plain) {
    SIGILFS_ASSIGN_OR_RETURN(struct stat st, plain_->Stat(plain));
    if (st.st_dev != ctx_->dev ||
        ctx_->exclude.Excluded(ChildPath(path_, plain), S_ISDIR(st.st_mode)))
      return Missing(plain);
    return st;
  }

  // Whoever may read a directory may read the view's own files in it (its IV, long names, the
  // config), or a backup made by another user than the owner could not be opened; the owner
  // always may.
  static mode_t ReadBitsOf(const struct stat& dir) { return (dir.st_mode & 0444) | 0400; }

  // The reverse config as the view's sigilfs.conf: its own, readable as the root is.
  Result<struct stat> ConfigStat() {
    SIGILFS_ASSIGN_OR_RETURN(struct stat root, plain_->Stat(""));
    SIGILFS_ASSIGN_OR_RETURN(struct stat st, plain_->Stat(kReverseConfigFileName));
    st.st_mode = S_IFREG | ReadBitsOf(root);
    return st;
  }

  // One of the view's own files in this directory: read only, the directory's owner's, dated
  // when the reverse config was written (so that it never looks changed to a backup).
  Result<struct stat> OwnFile(std::string_view stored, size_t size) {
    SIGILFS_ASSIGN_OR_RETURN(struct stat st, plain_->Stat(""));
    st.st_mode = S_IFREG | ReadBitsOf(st);
    st.st_nlink = 1;
    st.st_ino = SyntheticIno(path_, stored);
    st.st_size = static_cast<off_t>(size);
    st.st_blocks = (st.st_size + 511) / 512;
    st.st_rdev = 0;
    st.st_atim = st.st_mtim = st.st_ctim = ctx_->made;
    return st;
  }

  static Result<std::unique_ptr<BackingFile>> BytesFile(ByteSpan bytes) {
    auto data = std::make_shared<MemoryFileData>();
    {
      MutexLock lock(data->mu);
      data->bytes.assign(bytes.begin(), bytes.end());
    }
    return NewMemoryBackingFile(std::move(data));
  }

  Result<std::unique_ptr<BackingFile>> OpenPlainFile(const std::string& plain,
                                                     const FileOpenMode& how) {
    SIGILFS_ASSIGN_OR_RETURN(struct stat st, VisibleStat(plain));
    if (!S_ISREG(st.st_mode))
      return Status::FromErrno(S_ISDIR(st.st_mode) ? EISDIR : EINVAL, "not a regular file");
    if (how.same_as != nullptr && !SameObject(st, *how.same_as))
      return Status::FromErrno(ESTALE, "the entry changed");
    SIGILFS_ASSIGN_OR_RETURN(
        std::unique_ptr<BackingFile> file,
        plain_->OpenFile(plain, {.write = false, .keep_atime = how.keep_atime, .same_as = &st}));
    // The size once, for as long as this is open: the last unit and the length agree.
    SIGILFS_ASSIGN_OR_RETURN(uint64_t size, file->Size());
    const std::string path = ChildPath(path_, plain);
    const FileNonce nonce =
        ByInode(st) ? ctx_->keys->FileNonceOfInode(st.st_ino) : ctx_->keys->FileNonceOf(path);
    return NewReverseFile(std::move(file), size, nonce, ctx_->cipher, ctx_->content_key.span(),
                          ctx_->keys, ctx_->kept);
  }

  // The stored target of plain symlink `plain` (`st`): sealed under a nonce of its own text.
  Result<std::string> SealedTarget(const std::string& plain, const struct stat& st) {
    SIGILFS_ASSIGN_OR_RETURN(std::string target, plain_->ReadSymlink(plain));
    if (target.size() > Volume::kMaxInlineTarget) {
      crypt::SecureWipe({reinterpret_cast<uint8_t*>(target.data()), target.size()});
      return Missing(plain);
    }
    const SealNonce nonce =
        ctx_->keys->ValueNonce("target", Identity(ChildPath(path_, plain), st), AsBytes(target));
    auto sealed = ctx_->names->EncryptTarget(target, &nonce);
    crypt::SecureWipe({reinterpret_cast<uint8_t*>(target.data()), target.size()});
    return sealed;
  }

  // The view's entries of this directory, sorted by cursor.
  Result<std::vector<BackingEntry>> Entries() {
    std::vector<BackingEntry> plain;
    SIGILFS_RETURN_IF_ERROR(plain_->List(0, [&](const BackingEntry& e) {
      if (e.name != "." && e.name != ".." && !(path_.empty() && e.name == kReverseConfigFileName))
        plain.push_back(e);
      return true;
    }));
    std::vector<BackingEntry> out;
    auto add = [&](std::string stored, uint64_t ino, mode_t type) {
      const uint64_t cursor = CursorOf(stored);
      out.push_back({std::move(stored), ino, type, cursor});
    };
    add(kDirIvFileName, SyntheticIno(path_, kDirIvFileName), S_IFREG);
    if (path_.empty()) {
      auto config = plain_->Stat(kReverseConfigFileName);
      if (config.ok()) add(kConfigFileName, config->st_ino, S_IFREG);
    }
    for (const BackingEntry& e : plain) {
      // What the view leaves out: excluded entries, other file systems, and symlinks too long
      // to keep inline.
      if (e.type != 0 && ctx_->exclude.Excluded(ChildPath(path_, e.name), e.type == S_IFDIR))
        continue;
      // Every entry's device is looked at: a file can be a mount point too (a bind mount).
      auto st = PlainStat(e.name);
      if (!st.ok()) {
        if (st.status().sys_errno() == ENOENT) continue;  // gone, or left out
        return st.status();
      }
      SIGILFS_ASSIGN_OR_RETURN(std::string cipher, ctx_->names->Encrypt(iv_, e.name));
      std::string stored = NameCodec::StoredName(cipher);
      if (NameCodec::IsLongName(stored)) {
        const std::string side = NameCodec::SideFileName(stored);
        add(side, SyntheticIno(path_, side), S_IFREG);
      }
      add(std::move(stored), e.ino, e.type);
    }
    std::sort(out.begin(), out.end(),
              [](const BackingEntry& a, const BackingEntry& b) { return a.next < b.next; });
    return out;
  }

  // The entry whose attributes a call on `name` reaches: this directory for an empty name.
  struct Attributed {
    bool none = false;  // one of the view's own files, or a symlink: no attributes
    std::string plain;  // its plain name in this directory ("" for the directory)
    std::string path;   // its plain path
    struct stat st {};
  };
  Result<Attributed> AttributedEntry(std::string_view name) {
    Attributed a;
    if (name.empty()) {
      a.path = path_;
      SIGILFS_ASSIGN_OR_RETURN(a.st, plain_->Stat(""));
      return a;
    }
    SIGILFS_ASSIGN_OR_RETURN(Resolved r, Resolve(name));
    if (r.kind != Resolved::kPlain) {
      a.none = true;
      return a;
    }
    SIGILFS_ASSIGN_OR_RETURN(a.st, VisibleStat(r.plain));
    a.none = S_ISLNK(a.st.st_mode);
    a.path = ChildPath(path_, r.plain);
    a.plain = std::move(r.plain);
    return a;
  }

  const std::shared_ptr<const Context> ctx_;
  const std::shared_ptr<BackingDir> plain_;
  const std::string path_;  // plain path below the root ("" for the root)
  const DirIv iv_;
  const bool listing_;
  Mutex snapshot_mu_;
  std::shared_ptr<const std::vector<BackingEntry>> snapshot_ SIGILFS_GUARDED_BY(snapshot_mu_);
  // The directory's long names by stored name: (plain name, full encrypted name), as of `mtime`.
  struct LongNames {
    struct timespec mtime {};
    std::map<std::string, std::pair<std::string, std::string>> by_stored;
  };
  Mutex long_mu_;
  std::shared_ptr<const LongNames> long_names_ SIGILFS_GUARDED_BY(long_mu_);
};

// A handle on one non-directory entry of the view: its calls take the empty name.
class ReverseObject : public ReadOnlyDir {
 public:
  ReverseObject(std::unique_ptr<BackingDir> dir, std::string stored)
      : dir_(std::move(dir)), stored_(std::move(stored)) {}

  Result<struct stat> Stat(std::string_view name) override {
    SIGILFS_RETURN_IF_ERROR(Self(name));
    return dir_->Stat(stored_);
  }
  Result<std::unique_ptr<BackingDir>> OpenDir(std::string_view) override {
    return Status::FromErrno(ENOTDIR, "not a directory");
  }
  Result<std::unique_ptr<BackingDir>> OpenObject(std::string_view path) override {
    SIGILFS_RETURN_IF_ERROR(Self(path));
    SIGILFS_ASSIGN_OR_RETURN(auto again, dir_->OpenDir(""));
    return std::unique_ptr<BackingDir>(new ReverseObject(std::move(again), stored_));
  }
  Result<std::unique_ptr<BackingDir>> OpenListing(bool) override {
    return Status::FromErrno(ENOTDIR, "not a directory");
  }
  Result<std::unique_ptr<BackingFile>> OpenFile(std::string_view name,
                                                const FileOpenMode& how) override {
    SIGILFS_RETURN_IF_ERROR(Self(name));
    return dir_->OpenFile(stored_, how);
  }
  Result<std::string> ReadSymlink(std::string_view name) override {
    SIGILFS_RETURN_IF_ERROR(Self(name));
    return dir_->ReadSymlink(stored_);
  }
  Status List(uint64_t, const std::function<bool(const BackingEntry&)>&) override {
    return Status::FromErrno(ENOTDIR, "not a directory");
  }
  Result<std::vector<uint8_t>> GetXattr(std::string_view name, std::string_view attr) override {
    SIGILFS_RETURN_IF_ERROR(Self(name));
    return dir_->GetXattr(stored_, attr);
  }
  Result<std::vector<std::string>> ListXattrs(std::string_view name) override {
    SIGILFS_RETURN_IF_ERROR(Self(name));
    return dir_->ListXattrs(stored_);
  }
  Result<struct statvfs> StatFs() override { return dir_->StatFs(); }

  Result<ObjectHandle> Handle(std::string_view name) override { return dir_->Handle(name); }
  Result<std::unique_ptr<BackingDir>> OpenByHandle(const ObjectHandle& h) override {
    return dir_->OpenByHandle(h);
  }
  std::vector<std::string> PathTo(BackingDir&) override { return {}; }

 private:
  static Status Self(std::string_view name) {
    if (name.empty()) return Status::Ok();
    return Status::FromErrno(ENOTDIR, "not a directory");
  }
  std::unique_ptr<BackingDir> dir_;
  std::string stored_;
};

Result<std::unique_ptr<BackingDir>> ReverseDir::OpenObject(std::string_view path) {
  std::unique_ptr<BackingDir> dir;
  BackingDir* at = this;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view name = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    if (name.empty()) return Status::FromErrno(EINVAL, "an empty name in a path");
    SIGILFS_ASSIGN_OR_RETURN(struct stat st, at->Stat(name));
    if (!S_ISDIR(st.st_mode)) {
      if (!path.empty()) return Status::FromErrno(ENOTDIR, "not a directory");
      SIGILFS_ASSIGN_OR_RETURN(auto here, at->OpenDir(""));
      return std::unique_ptr<BackingDir>(new ReverseObject(std::move(here), std::string(name)));
    }
    SIGILFS_ASSIGN_OR_RETURN(dir, at->OpenDir(name));
    at = dir.get();
  }
  if (dir == nullptr) return OpenDir("");
  return dir;
}

}  // namespace

Result<std::unique_ptr<BackingDir>> OpenReverseView(const Vault& vault,
                                                    std::unique_ptr<BackingDir> plain,
                                                    const ReverseOptions& options) {
  auto ctx = std::make_shared<Context>();
  ctx->exclude = options.exclude;
  SIGILFS_ASSIGN_OR_RETURN(struct stat root, plain->Stat(""));
  SIGILFS_ASSIGN_OR_RETURN(struct stat config, plain->Stat(kReverseConfigFileName));
  ctx->dev = root.st_dev;
  ctx->made = config.st_mtim;
  ctx->root = std::move(plain);
  const VolumeKeys& keys = vault.keys();
  SIGILFS_ASSIGN_OR_RETURN(ctx->names, NameCodec::Create(keys.names.span()));
  SIGILFS_ASSIGN_OR_RETURN(ctx->keys, ReverseKeys::FromSubkey(keys.reverse.span()));
  ctx->content_key = crypt::SecureBytes::CopyOf(keys.content.span());
  ctx->cipher = vault.config().cipher;
  ctx->geometry = PageGeometry(crypt::AeadNonceSize(ctx->cipher));
  std::shared_ptr<BackingDir> root_dir = ctx->root;
  return std::unique_ptr<BackingDir>(new ReverseDir(std::move(ctx), std::move(root_dir), ""));
}

}  // namespace sigilfs::core
