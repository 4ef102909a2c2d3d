// Volume: directory IVs, name mapping with long-name side files, listings, symlink targets.
#include "sigilfs/core/volume.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <optional>
#include <thread>

#include "sigilfs/core/verity.h"
#include "sigilfs/crypt/encoding.h"
#include "sigilfs/crypt/random.h"
#include "sigilfs/crypt/sha256.h"

namespace sigilfs::core {
namespace {

// Reads a small file of a directory (at most `max` bytes, kCorrupt past that).
Result<std::string> ReadSmall(BackingDir& dir, const std::string& name, size_t max) {
  SIGILFS_ASSIGN_OR_RETURN(auto file, dir.OpenFile(name, {.write = false}));
  std::string out(max + 1, '\0');
  SIGILFS_ASSIGN_OR_RETURN(size_t done,
                           file->ReadAt({reinterpret_cast<uint8_t*>(out.data()), out.size()}, 0));
  if (done > max) return Status(Code::kCorrupt, name + " is too large");
  out.resize(done);
  return out;
}

// Creates `name` in `dir` holding `data`; with `durable`, flushed before it is visible.
Status WriteNew(BackingDir& dir, const std::string& name, ByteSpan data, bool durable) {
  SIGILFS_ASSIGN_OR_RETURN(auto file,
                           dir.OpenFile(name, {.create = true, .exclusive = true, .mode = 0400}));
  const ByteSpan parts[] = {data};
  Status s = file->WriteAt(parts, 0);
  if (s.ok() && durable) s = file->Sync(false);
  if (!s.ok()) {
    (void)dir.Unlink(name);
    return s.WithContext("write " + name);
  }
  return Status::Ok();
}

// Filesystems whose metadata changes reach the disk in the order they were made (a journal
// replayed in order), or that keep nothing across a crash.
bool OrdersMetadata(int dirfd) {
  struct statfs fs;
  if (::fstatfs(dirfd, &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case EXT4_SUPER_MAGIC:  // also ext2 and ext3
    case XFS_SUPER_MAGIC:
    case TMPFS_MAGIC:
      return true;
    default:
      return false;
  }
}

// The directory's attribute copy of its IV, if it has one.
std::optional<DirIv> ReadDirIvAttr(BackingDir& dir) {
  auto value = dir.GetXattr("", kDirIvAttrName);
  if (!value.ok() || value->size() != kDirIvSize) return std::nullopt;
  DirIv iv;
  std::memcpy(iv.data(), value->data(), iv.size());
  return iv;
}

}  // namespace

Volume::Volume(std::unique_ptr<Vault> vault, int root_fd, std::unique_ptr<NameCodec> names,
               std::unique_ptr<PageLayer> pages)
    : vault_(std::move(vault)),
      root_fd_(root_fd),
      names_(std::move(names)),
      pages_(std::move(pages)) {}

Volume::~Volume() { ::close(root_fd_); }

Result<std::unique_ptr<Volume>> Volume::Open(std::unique_ptr<Vault> vault, VolumeOptions options) {
  // A reverse view's volume reads through the view: the plain tree is the user's, and no lock
  // file goes there.
  if (!options.lock && vault->reverse()) options.lock = VaultLock();
  if (!options.lock) {
    SIGILFS_ASSIGN_OR_RETURN(
        options.lock,
        VaultLock::Acquire(vault->dir(),
                           options.pages.shared ? LockMode::kSharedMount : LockMode::kExclusive));
  }
  int fd = ::open(vault->dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "open " + vault->dir());
  auto names = NameCodec::Create(vault->keys().names.span());
  if (!names.ok()) {
    ::close(fd);
    return names.status();
  }
  std::unique_ptr<ReverseKeys> derived;
  if (options.pages.shared) {
    auto keys = ReverseKeys::FromSubkey(vault->keys().reverse.span());
    if (!keys.ok()) {
      ::close(fd);
      return keys.status();
    }
    derived = std::move(keys).value();
  }
  auto pages = std::make_unique<PageLayer>(vault->config().cipher, vault->keys().content.span(),
                                           options.pages);
  std::unique_ptr<Volume> volume(
      new Volume(std::move(vault), fd, std::move(names).value(), std::move(pages)));
  volume->lock_ = std::move(*options.lock);
  volume->root_ = BorrowPosixBackingDir(fd);
  volume->derived_ = std::move(derived);
  volume->ordered_metadata_ = OrdersMetadata(fd);
  return volume;
}

Result<DirIv> Volume::ReadDirIv(BackingDir& dir, bool* from_attribute, DirIvCopies copies) const {
  if (from_attribute != nullptr) *from_attribute = false;
  const std::optional<DirIv> attr = ReadDirIvAttr(dir);
  if (attr && copies == DirIvCopies::kAttributeFirst) {
    // The attribute lives in the directory's inode (ext4 and XFS keep small ones inline), which
    // opening the directory has read already; the file's data is one more disk read per
    // directory on a cold cache (a quarter of the lookups' disk reads in a tree walk). Its size,
    // from its inode, still tells a torn file, the one damage a crash leaves; a file whose bytes
    // differ is for fsck to find: the names never depend on it while the attribute is there.
    auto file = dir.Stat(kDirIvFileName);
    if (!file.ok()) {
      if (file.status().code() == Code::kNotFound)
        return Status(Code::kCorrupt,
                      "directory has no IV file (" + std::string(kDirIvFileName) + ")");
      return file.status();
    }
    const struct stat& st = *file;
    if (!S_ISREG(st.st_mode) || st.st_size > static_cast<off_t>(kDirIvSize))
      return Status(Code::kCorrupt, "directory IV has the wrong size");
    if (st.st_size < static_cast<off_t>(kDirIvSize) && from_attribute != nullptr)
      *from_attribute = true;
    return *attr;
  }
  auto text = ReadSmall(dir, kDirIvFileName, kDirIvSize);
  if (text.ok() && text->size() == kDirIvSize) {
    DirIv iv;
    std::memcpy(iv.data(), text->data(), kDirIvSize);
    // Both are written at mkdir and never change: two that differ are tampered with, and
    // either could be the changed one.
    if (attr && *attr != iv)
      return Status(Code::kCorrupt, "directory IV file and attribute differ");
    return iv;
  }
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound)
      return Status(Code::kCorrupt,
                    "directory has no IV file (" + std::string(kDirIvFileName) + ")");
    return text.status();
  }
  // Short: what a crash leaves of an IV file that was created but not flushed (its entry is
  // journaled, its data was not yet written). Only then does the attribute stand in; a missing
  // file is no crash's doing. A wrong attribute copy only makes the names fail to open, like a
  // wrong IV file: the IV is the names' associated data, so nothing decrypts to another name.
  if (!attr) return Status(Code::kCorrupt, "directory IV has the wrong size");
  if (from_attribute != nullptr) *from_attribute = true;
  return *attr;
}

Status Volume::RestoreDirIvFile(BackingDir& dir, const DirIv& iv) const {
  const std::string tmp = HiddenName(std::string(kDirIvFileName) + ".new.");
  SIGILFS_RETURN_IF_ERROR(WriteNew(dir, tmp, iv, /*durable=*/true));
  if (Status s = dir.Rename(tmp, dir, kDirIvFileName); !s.ok()) {
    (void)dir.Unlink(tmp);
    return s.WithContext("restore " + std::string(kDirIvFileName));
  }
  return Status::Ok();
}

Status Volume::MakeDirectory(BackingDir& dir, const DirIv& iv, std::string_view plain,
                             mode_t mode) {
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, StoredName(iv, plain));
  // A directory without its IV would be unusable: build it complete under a name no listing
  // shows, then rename it into place in one step. The IV goes into an attribute of the
  // directory and into its IV file (which backups that drop attributes still carry); the file
  // is flushed first only where the attribute is not sure to be stored before the rename (an
  // fsync per mkdir was a tenth of copying a source tree in).
  const std::string tmp = HiddenName(".sigilfs.mkdir.");
  SIGILFS_RETURN_IF_ERROR(dir.MakeDir(tmp, 0700).WithContext("mkdir"));
  Status s;
  {
    auto sub = dir.OpenDir(tmp);
    s = sub.status();
    if (s.ok()) {
      DirIv child;
      if (derived_)
        child = derived_->DirIvOfEntry(iv, stored);
      else
        crypt::RandomBytes(child);
      const bool in_attr = (*sub)->SetXattr("", kDirIvAttrName, child, XATTR_CREATE).ok();
      s = WriteNew(**sub, kDirIvFileName, child, /*durable=*/!(in_attr && ordered_metadata_));
      if (s.ok()) s = (*sub)->SetMode("", mode & 07777);
    }
  }
  bool prepared = false;
  if (s.ok()) {
    s = PrepareName(dir, iv, plain);
    prepared = s.ok();
  }
  if (s.ok()) s = dir.Rename(tmp, dir, stored, BackingDir::kNoReplace).WithContext("mkdir");
  if (s.ok() && prepared) {
    s = ConfirmName(dir, iv, plain, stored);
    if (!s.ok()) {
      // Not made after all: the directory (empty but for its IV) goes, and with it the name.
      (void)RemoveDirectory(dir, stored);
      ReleaseName(dir, stored);
      return s;
    }
  }
  if (!s.ok()) {
    if (auto sub = dir.OpenDir(tmp); sub.ok()) (void)(*sub)->Unlink(kDirIvFileName);
    (void)dir.RemoveDir(tmp);
    // A long name's side file is the name's: it goes unless an entry holds the name.
    if (prepared && s.code() != Code::kExists) ReleaseName(dir, stored);
  }
  return s;
}

std::string Volume::HiddenName(std::string_view prefix) {
  std::array<uint8_t, 12> rnd;
  crypt::RandomBytes(rnd);
  return std::string(prefix) + crypt::HexEncode(rnd);
}

Result<std::string> Volume::MoveEmptyDirectoryAside(BackingDir& dir,
                                                    const std::string& stored) const {
  SIGILFS_ASSIGN_OR_RETURN(auto sub, dir.OpenDir(stored));
  SIGILFS_RETURN_IF_ERROR(CheckEmptyDirectory(*sub));
  std::string aside = HiddenName(".sigilfs.rmdir.");
  SIGILFS_RETURN_IF_ERROR(dir.Rename(stored, dir, aside, BackingDir::kNoReplace));
  return aside;
}

Status Volume::CheckEmptyDirectory(BackingDir& sub) {
  for (int waited_ms = 0;;) {
    // The cipher directory still holds its IV file: empty is nothing else.
    bool empty = true;
    SIGILFS_RETURN_IF_ERROR(sub.List(0, [&](const BackingEntry& e) {
      empty = e.name == kDirIvFileName;
      return empty;
    }));
    if (empty) return Status::Ok();
    if (!AwaitKeptOpen(sub, waited_ms)) return Status::FromErrno(ENOTEMPTY, "rmdir");
  }
}

Status Volume::RemoveDirectory(BackingDir& dir, const std::string& stored) const {
  SIGILFS_ASSIGN_OR_RETURN(auto sub, dir.OpenDir(stored));
  SIGILFS_RETURN_IF_ERROR(CheckEmptyDirectory(*sub));
  // Read first, so that the IV file can be put back should the rmdir then fail. A directory
  // whose IV is lost is removed all the same: there is nothing of it to keep.
  auto iv = ReadDirIv(*sub);
  if (Status s = sub->Unlink(kDirIvFileName); !s.ok() && s.code() != Code::kNotFound) return s;
  Status s = dir.RemoveDir(stored);
  for (int waited_ms = 0; s.code() == Code::kNotEmpty && AwaitKeptOpen(*sub, waited_ms);)
    s = dir.RemoveDir(stored);
  // Entries made meanwhile, or a failing store: the IV goes back so the directory stays usable.
  if (!s.ok() && iv.ok()) (void)RestoreDirIvFile(*sub, *iv);
  return s;
}

namespace {
constexpr char kFuseHiddenPrefix[] = ".fuse_hidden";
}  // namespace

bool Volume::AwaitKeptOpen(BackingDir& dir, int& waited_ms) {
  // A network store keeps a file removed while still open under a hidden name until it is
  // closed (NFS's .nfsXXXX, a FUSE store's .fuse_hiddenXXXX): the mount's last close of a file
  // reaches it a moment after the caller's. A directory holding only those is tried again for
  // a while before it counts as not empty.
  constexpr int kStepMs = 20, kMaxMs = 2000, kOrphanCheckMs = 200;
  if (waited_ms >= kMaxMs || !OnlyKeptOpen(dir)) return false;
  std::this_thread::sleep_for(std::chrono::milliseconds(kStepMs));
  waited_ms += kStepMs;
  if (waited_ms % kOrphanCheckMs == 0) RemoveOrphanedFuseHidden(dir);
  return true;
}

bool Volume::OnlyKeptOpen(BackingDir& dir) {
  bool only = true, any = false;
  (void)dir.List(0, [&](const BackingEntry& e) {
    if (e.name == kDirIvFileName) return true;
    any = true;
    only = e.name.starts_with(".nfs") || e.name.starts_with(kFuseHiddenPrefix);
    return only;
  });
  return any && only;
}

void Volume::RemoveOrphanedFuseHidden(BackingDir& dir) {
  // libfuse's path library (sshfs) can leave a .fuse_hidden file that nothing holds: its unlink
  // sees the file open and renames it aside, and a release that ends meanwhile, not finding it
  // hidden yet, does not remove it; it stays until the store is unmounted. (Every unlink right
  // after a last close races that release: a FUSE close returns before its release is served.)
  // Unlinking the hidden name through the store does what that release would have done: the
  // store removes it if no open file of its own holds it, and hides it again otherwise.
  std::vector<std::string> hidden;
  (void)dir.List(0, [&](const BackingEntry& e) {
    if (e.name.starts_with(kFuseHiddenPrefix)) hidden.push_back(e.name);
    return true;
  });
  for (const std::string& name : hidden) (void)dir.Unlink(name);
}

Result<std::string> Volume::StoredName(const DirIv& iv, std::string_view plain) const {
  SIGILFS_ASSIGN_OR_RETURN(std::string cipher, names_->Encrypt(iv, plain));
  return NameCodec::StoredName(cipher);
}

Status Volume::PrepareName(BackingDir& dir, const DirIv& iv, std::string_view plain) const {
  SIGILFS_ASSIGN_OR_RETURN(std::string cipher, names_->Encrypt(iv, plain));
  const std::string stored = NameCodec::StoredName(cipher);
  if (!NameCodec::IsLongName(stored)) return Status::Ok();
  Status s = WriteNew(dir, NameCodec::SideFileName(stored), AsBytes(cipher), /*durable=*/true);
  // An existing side file for the same name holds the same text (it is derived from the name).
  if (s.code() == Code::kExists) return Status::Ok();
  return s;
}

void Volume::ReleaseName(BackingDir& dir, const std::string& stored) const {
  if (!NameCodec::IsLongName(stored)) return;
  const std::string side = NameCodec::SideFileName(stored);
  // One mount: the tree's long-name locks keep a create of this name away; nothing to look at.
  if (!derived_) {
    (void)dir.Unlink(side);
    return;
  }
  // Shared mode: another process (a mount on another host) may make an entry of this name at
  // any moment, and its side file is that entry's too: the file stays while an entry holds the
  // name, and comes back if one appeared while it went. What this look misses (an entry made
  // after it, its side file taken just before) the maker's look after its create puts back
  // (ConfirmName): one of the two looks comes after both the removal and the create.
  auto text = ReadSmall(dir, side, 4096);
  if (dir.Stat(stored).ok()) return;
  (void)dir.Unlink(side);
  if (text.ok() && dir.Stat(stored).ok()) (void)WriteNew(dir, side, AsBytes(*text), true);
}

Status Volume::ConfirmName(BackingDir& dir, const DirIv& iv, std::string_view plain,
                           const std::string& stored) const {
  // One mount: the tree's long-name locks keep removals away.
  if (!derived_ || !NameCodec::IsLongName(stored)) return Status::Ok();
  const std::string side = NameCodec::SideFileName(stored);
  if (dir.Stat(side).ok()) return Status::Ok();
  // Taken: its text again (the name encrypted, as PrepareName wrote it).
  SIGILFS_ASSIGN_OR_RETURN(std::string cipher, names_->Encrypt(iv, plain));
  Status s = WriteNew(dir, side, AsBytes(cipher), /*durable=*/true);
  return s.code() == Code::kExists ? Status::Ok() : s;
}

namespace {
// The entry a synchronizer's conflict copy `stored` was made from, if it is one of an entry a
// listing shows (not of the vault's own files, whose copies stay hidden).
std::optional<NameCodec::ConflictCopy> CopyOfEntry(std::string_view stored) {
  if (!NameCodec::IsReserved(stored)) return std::nullopt;  // no '.': no conflict copy either
  auto copy = NameCodec::ParseConflictCopy(stored);
  if (!copy || (NameCodec::IsReserved(copy->original) && !NameCodec::IsLongName(copy->original)))
    return std::nullopt;
  return copy;
}
}  // namespace

Result<std::string> Volume::StoredNameIn(BackingDir& dir, const DirIv& iv,
                                         std::string_view plain) const {
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, StoredName(iv, plain));
  auto copy = NameCodec::ParseConflictCopy(plain);
  if (!copy) return stored;
  auto original = StoredName(iv, copy->original);
  if (!original.ok()) return stored;
  std::string conflict = NameCodec::ConflictCopyName(*original, copy->tag);
  // An entry made under this very name (by a user) comes first; the copy only where it exists.
  if (dir.Stat(stored).ok() || !dir.Stat(conflict).ok()) return stored;
  return conflict;
}

Result<std::string> Volume::PlainName(BackingDir& dir, const DirIv& iv,
                                      const std::string& stored) const {
  if (auto copy = CopyOfEntry(stored)) {
    SIGILFS_ASSIGN_OR_RETURN(std::string original, PlainName(dir, iv, copy->original));
    std::string plain = NameCodec::ConflictCopyName(original, copy->tag);
    if (plain.size() > kMaxPlainNameLength)
      return Status(Code::kNameTooLong, "a conflict copy whose name would pass 255 bytes");
    return plain;
  }
  std::string cipher = stored;
  if (NameCodec::IsLongName(stored)) {
    SIGILFS_ASSIGN_OR_RETURN(cipher, ReadSmall(dir, NameCodec::SideFileName(stored), 4096));
    if (NameCodec::StoredName(cipher) != stored)
      return Status(Code::kCorrupt, "long-name side file does not match");
  } else if (stored.size() > kMaxStoredNameLength) {
    // Only where the backing filesystem allows longer names: a lookup would store this name
    // hashed, so listing it would show a name that cannot be opened.
    return Status(Code::kCorrupt, "encrypted name stored in full past 255 bytes");
  }
  return names_->Decrypt(iv, cipher);
}

std::optional<std::string> Volume::ListedName(
    BackingDir& dir, const DirIv& iv, const std::string& stored,
    const std::function<void(const std::string&, const Status&)>& damaged) const {
  if (NameCodec::IsReserved(stored) && !NameCodec::IsLongName(stored) && !CopyOfEntry(stored))
    return std::nullopt;
  auto plain = PlainName(dir, iv, stored);
  if (!plain.ok()) {
    damaged(stored, plain.status());
    return std::nullopt;
  }
  return std::move(plain).value();
}

Status Volume::List(
    BackingDir& dir, const DirIv& iv, uint64_t from,
    const std::function<bool(const DirEntry&)>& emit,
    const std::function<void(const std::string& stored, const Status&)>& damaged) const {
  return dir.List(from, [&](const BackingEntry& e) {
    const auto type = static_cast<unsigned char>(IFTODT(e.type));
    if (e.name == "." || e.name == "..")  // a listing handle's (BackingDir::OpenListing)
      return emit(DirEntry{e.name, e.name, e.ino, type, static_cast<off_t>(e.next)});
    std::optional<std::string> plain = ListedName(dir, iv, e.name, damaged);
    if (!plain) return true;
    return emit(DirEntry{std::move(*plain), e.name, e.ino, type, static_cast<off_t>(e.next)});
  });
}

Status Volume::ListSorted(
    BackingDir& dir, const DirIv& iv, std::vector<DirEntry>& out,
    const std::function<void(const std::string& stored, const Status&)>& damaged) const {
  out.clear();
  Status s = List(
      dir, iv, 0,
      [&](const DirEntry& e) {
        out.push_back(e);
        return true;
      },
      damaged);
  std::sort(out.begin(), out.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return s;
}

namespace {
constexpr std::string_view kTargetFilePrefix = "sigilfs.target.";
constexpr size_t kTargetHashChars = 43;  // base64url-unpadded SHA-256
// The side file a stored target names, or empty: an inline target is base64url, which has no
// `.`, and only the exact shape is taken (the name comes from the cipher tree and is opened in
// the vault root: no `/`, nothing else).
std::string_view TargetFile(std::string_view stored) {
  if (!stored.starts_with(kTargetFilePrefix) ||
      stored.size() != kTargetFilePrefix.size() + kTargetHashChars)
    return {};
  for (const char c : stored.substr(kTargetFilePrefix.size()))
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return {};
  return stored;
}
std::string TargetFileFor(std::string_view sealed) {
  return std::string(kTargetFilePrefix) +
         crypt::Base64Encode(crypt::Sha256(AsBytes(sealed)),
                             crypt::Base64Variant::kUrlSafeUnpadded);
}
}  // namespace

Result<std::string> Volume::EncryptSymlinkTarget(std::string_view target) const {
  return EncryptSymlinkTarget(*root_, target);
}

Result<std::string> Volume::EncryptSymlinkTarget(BackingDir& root, std::string_view target) const {
  if (target.size() > kMaxSymlinkTarget)
    return Status(Code::kNameTooLong, "symlink target longer than 4095 bytes");
  SIGILFS_ASSIGN_OR_RETURN(std::string sealed, names_->EncryptTarget(target));
  if (target.size() <= kMaxInlineTarget) return sealed;
  // Named by its hash, as a long name's side file is; the random nonce makes every sealed text,
  // and so every name, new. Flushed before the link that names it can exist.
  std::string file = TargetFileFor(sealed);
  SIGILFS_RETURN_IF_ERROR(WriteNew(root, file, AsBytes(sealed), /*durable=*/true));
  return file;
}

Result<std::string> Volume::DecryptSymlinkTarget(std::string_view stored) const {
  return DecryptSymlinkTarget(*root_, stored);
}

Result<std::string> Volume::DecryptSymlinkTarget(BackingDir& root, std::string_view stored) const {
  if (stored.starts_with(kTargetFilePrefix)) {
    const std::string file(TargetFile(stored));
    if (file.empty()) return Status(Code::kCorrupt, "symlink target names no target file");
    auto sealed = ReadSmall(root, file, 2 * kMaxSymlinkTarget);
    if (!sealed.ok()) {
      if (sealed.status().code() == Code::kNotFound)
        return Status(Code::kCorrupt, "symlink target file missing");
      return sealed.status();
    }
    if (TargetFileFor(*sealed) != file)
      return Status(Code::kCorrupt, "symlink target file does not match its name");
    return names_->DecryptTarget(*sealed);
  }
  return names_->DecryptTarget(stored);
}

std::string Volume::TargetToRelease(BackingDir& dir, const std::string& stored,
                                    const struct stat& st) const {
  if (!S_ISLNK(st.st_mode) || st.st_nlink != 1) return {};
  auto target = dir.ReadSymlink(stored);
  if (!target.ok()) return {};
  return std::string(TargetFile(*target));
}

void Volume::ReleaseSymlinkTarget(std::string_view stored) const {
  ReleaseSymlinkTarget(*root_, stored);
}

void Volume::ReleaseSymlinkTarget(BackingDir& root, std::string_view stored) const {
  const std::string file(TargetFile(stored));
  if (!file.empty()) (void)root.Unlink(file);
}

Result<uint64_t> Volume::PlainSize(BackingDir& dir, const std::string& stored,
                                   const struct stat& st) const {
  if (!S_ISREG(st.st_mode)) return static_cast<uint64_t>(st.st_size);
  const PageGeometry& g = pages_->geometry();
  const auto cipher_size = static_cast<uint64_t>(st.st_size);
  if (!verity::LooksSealed(g, cipher_size)) return g.PlainSize(cipher_size);
  // As the descriptor form: the trailer is not authenticated, so the file is opened.
  SIGILFS_ASSIGN_OR_RETURN(auto file, dir.OpenFile(stored, {.write = false, .keep_atime = true}));
  SIGILFS_ASSIGN_OR_RETURN(auto contents, pages_->Open(std::move(file), stored));
  return contents->size();
}

}  // namespace sigilfs::core
