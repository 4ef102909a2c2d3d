// Tree: names, directories, links, renames, attributes and files of a vault over a BackingDir.
#include "sigilfs/core/tree.h"

#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "sigilfs/crypt/encoding.h"
#include "sigilfs/crypt/random.h"
#include "sigilfs/crypt/secure_bytes.h"

namespace sigilfs::core {
namespace {

// Entries being made: the name has a '.', which no stored name has, so no listing shows it.
constexpr std::string_view kStagePrefix = ".sigilfs.new.";
constexpr std::string_view kUserNamespace = "user.";
constexpr std::string_view kAccessAcl = "system.posix_acl_access";
constexpr std::string_view kDefaultAcl = "system.posix_acl_default";

Status Errno(int err, std::string_view what) { return Status::FromErrno(err, std::string(what)); }

bool IsDir(const struct stat& st) { return S_ISDIR(st.st_mode); }

// The attribute names a vault keeps (sealed): the others are not its to keep.
Status CheckXattrName(std::string_view attr) {
  if (attr.starts_with(kUserNamespace) || attr == kAccessAcl || attr == kDefaultAcl)
    return Status::Ok();
  return Errno(EOPNOTSUPP, "extended attribute outside user.*");
}

}  // namespace

Result<std::unique_ptr<Tree>> Tree::Open(Volume& volume, TreeOptions options) {
  SIGILFS_ASSIGN_OR_RETURN(auto root, OpenPosixBackingDir(volume.vault().dir()));
  return Open(volume, std::move(root), std::move(options));
}

Result<std::unique_ptr<Tree>> Tree::Open(Volume& volume, std::unique_ptr<BackingDir> root,
                                         TreeOptions options) {
  // The root's IV is read now: a store that holds no vault tree is refused at once.
  if (options.check_root_iv)
    SIGILFS_RETURN_IF_ERROR(volume.ReadDirIv(*root).status().WithContext("vault root"));
  std::unique_ptr<Tree> tree(new Tree(volume, std::move(root), std::move(options)));
  if (auto key = volume.names().XattrStoredName(kAccessAcl); key.ok()) tree->access_acl_key_ = *key;
  if (auto key = volume.names().XattrStoredName(kDefaultAcl); key.ok())
    tree->default_acl_key_ = *key;
  return tree;
}

Status Tree::Format(BackingDir& root) {
  DirIv iv;
  crypt::RandomBytes(iv);
  // As MakeDirectory does: the attribute copy where the store keeps attributes, and the file.
  (void)root.SetXattr("", kDirIvAttrName, iv, XATTR_CREATE);
  SIGILFS_ASSIGN_OR_RETURN(
      auto file, root.OpenFile(kDirIvFileName, {.create = true, .exclusive = true, .mode = 0400}));
  const ByteSpan parts[] = {iv};
  SIGILFS_RETURN_IF_ERROR(file->WriteAt(parts, 0));
  return file->Sync(false);
}

Result<std::unique_ptr<Tree::Dir>> Tree::Root(Volume::DirIvCopies copies, bool* from_attribute) {
  SIGILFS_ASSIGN_OR_RETURN(auto backing, root_->OpenDir(""));
  SIGILFS_ASSIGN_OR_RETURN(DirIv iv, volume_.ReadDirIv(*backing, from_attribute, copies));
  return std::unique_ptr<Dir>(new Dir(std::move(backing), iv, "."));
}

Result<std::unique_ptr<Tree::Dir>> Tree::OpenDir(const Dir& parent, const EntryName& name,
                                                 Volume::DirIvCopies copies, bool* from_attribute) {
  if (name.empty()) {
    SIGILFS_ASSIGN_OR_RETURN(auto again, parent.backing().OpenDir(""));
    return std::unique_ptr<Dir>(new Dir(std::move(again), parent.iv(), parent.path()));
  }
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, Stored(parent, name));
  const std::string path = Shown(parent, name);
  auto backing = parent.backing().OpenDir(stored);
  if (!backing.ok()) return Named(backing.status(), parent, name);
  auto iv = volume_.ReadDirIv(**backing, from_attribute, copies);
  if (!iv.ok()) return iv.status().WithContext(path);
  return std::unique_ptr<Dir>(new Dir(std::move(backing).value(), *iv, path));
}

Result<std::unique_ptr<Tree::Dir>> Tree::Walk(std::string_view path) {
  SIGILFS_ASSIGN_OR_RETURN(auto dir, Root());
  for (size_t pos = 0; pos <= path.size();) {
    const size_t slash = std::min(path.find('/', pos), path.size());
    const std::string_view part = path.substr(pos, slash - pos);
    pos = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..")
      return Status(Code::kInvalidArgument, "'..' in a vault path: " + std::string(path), EINVAL);
    SIGILFS_ASSIGN_OR_RETURN(dir, OpenDir(*dir, part));
  }
  return dir;
}

Result<struct stat> Tree::Lstat(const Dir& dir, const EntryName& name, const std::string& stored) {
  auto st = dir.backing().Stat(stored);
  if (!st.ok()) return Named(st.status(), dir, name);
  return st;
}

Result<Tree::Located> Tree::Locate(std::string_view path) {
  // Trailing "/" and "/." name the same entry ("a/b/", "a/.").
  while (path.ends_with('/') || path == "." || path.ends_with("/.")) path.remove_suffix(1);
  const size_t slash = path.find_last_of('/');
  const std::string_view last = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const std::string_view up = slash == std::string_view::npos ? "" : path.substr(0, slash);
  if (last == "..")
    return Status(Code::kInvalidArgument, "'..' in a vault path: " + std::string(path), EINVAL);
  SIGILFS_ASSIGN_OR_RETURN(auto dir, Walk(up));
  return Located{std::move(dir), std::string(last)};
}

Result<std::string> Tree::Stored(const Dir& dir, const EntryName& name) const {
  if (!name.stored_.empty() && name.iv_ == dir.iv()) return name.stored_;
  return volume_.StoredNameIn(dir.backing(), dir.iv(), name.plain());
}

// A backing store's error about an entry, told by the entry's vault path (or, where plaintext
// names are kept out of errors, its stored name).
Status Tree::Named(const Status& s, const Dir& dir, const EntryName& name) const {
  const std::string what = Shown(dir, name);
  if (s.sys_errno() != 0) return Status::FromErrno(s.sys_errno(), what);
  return s.WithContext(what);
}

std::string Tree::Shown(const Dir& dir, const EntryName& name) const {
  if (options_.plain_names_in_errors) return dir.PathOf(name.plain());
  auto stored = Stored(dir, name);
  return dir.PathOf(stored.ok() ? *stored : std::string());
}

std::unique_ptr<Tree::Dir> Tree::DirOf(std::shared_ptr<BackingDir> backing, const DirIv& iv,
                                       std::string path) const {
  return std::unique_ptr<Dir>(new Dir(std::move(backing), iv, std::move(path)));
}

Result<EntryName> Tree::Resolve(const Dir& dir, std::string_view plain) const {
  EntryName name(plain);
  SIGILFS_ASSIGN_OR_RETURN(name.stored_, volume_.StoredNameIn(dir.backing(), dir.iv(), plain));
  name.iv_ = dir.iv();
  return name;
}

Result<EntryName> Tree::Listed(const Dir& dir, const std::string& stored) const {
  SIGILFS_ASSIGN_OR_RETURN(std::string plain, volume_.PlainName(dir.backing(), dir.iv(), stored));
  EntryName name(plain);
  name.stored_ = stored;
  name.iv_ = dir.iv();
  return name;
}

EntryName Tree::NameOf(const Dir& dir, const DirEntry& e) const {
  EntryName name(e.name);
  name.stored_ = e.stored;
  name.iv_ = dir.iv();
  return name;
}

Status Tree::RunFinish(const Dir& dir, const std::string& stored, const Finish& finish) {
  if (!finish) return Status::Ok();
  SIGILFS_ASSIGN_OR_RETURN(auto object, dir.backing().OpenObject(stored));
  return finish(*object);
}

Result<struct stat> Tree::StatBeforeRemoval(const Dir& dir, const EntryName& name,
                                            const std::string& stored, const Removed* removed,
                                            std::unique_ptr<BackingDir>* opened) {
  if (removed != nullptr && removed->keep) {
    if (auto object = dir.backing().OpenObject(stored); object.ok()) {
      if (auto st = (*object)->Stat(""); st.ok()) {
        *opened = std::move(object).value();
        return st;
      }
    }
  }
  return Lstat(dir, name, stored);  // and the error named, if there is none
}

void Tree::KeepBeforeRemoval(const Dir& dir, const std::string& stored, const struct stat& st,
                             Removed* removed, std::unique_ptr<BackingDir> opened) {
  if (removed == nullptr) return;
  removed->st = st;
  if (!removed->keep || !removed->keep(st)) return;
  if (opened) {  // the object `st` was read from
    removed->object = std::move(opened);
    return;
  }
  // Out of descriptors, or replaced meanwhile: nothing kept, as if not asked.
  auto object = dir.backing().OpenObject(stored);
  if (!object.ok()) return;
  auto now = (*object)->Stat("");
  if (!now.ok() || !SameObject(*now, st)) return;
  removed->object = std::move(object).value();
}

Status Tree::PrepareLocked(const Dir& dir, const EntryName& name, const std::string& stored) {
  // A short name has no side file: no second encryption of the name to find that out.
  if (!NameCodec::IsLongName(stored)) return Status::Ok();
  SIGILFS_RETURN_IF_ERROR(volume_.PrepareName(dir.backing(), dir.iv(), name.plain()));
  OwnVaultFile(dir.backing(), NameCodec::SideFileName(stored));
  return Status::Ok();
}

Status Tree::ConfirmLocked(const Dir& dir, const EntryName& name, const std::string& stored) {
  return volume_.ConfirmName(dir.backing(), dir.iv(), name.plain(), stored);
}

void Tree::UnprepareLocked(const Dir& dir, const std::string& stored) {
  // The side file is the name's, not the failed call's: another entry may hold the name.
  auto st = dir.backing().Stat(stored);
  if (!st.ok() && st.status().code() == Code::kNotFound) volume_.ReleaseName(dir.backing(), stored);
}

Tree::LongNameLock::LongNameLock(Tree& tree, const std::string& a, const std::string& b) {
  auto stripe = [&](const std::string& stored) -> Mutex* {
    if (!NameCodec::IsLongName(stored)) return nullptr;
    return &tree.long_name_mu_[std::hash<std::string>{}(stored) % tree.long_name_mu_.size()];
  };
  first_ = stripe(a);
  second_ = stripe(b);
  if (first_ == second_) second_ = nullptr;
  if (first_ == nullptr) std::swap(first_, second_);
  if (second_ != nullptr && second_ < first_) std::swap(first_, second_);  // one order for all
  if (first_ != nullptr) first_->Lock();
  if (second_ != nullptr) second_->Lock();
}

Tree::LongNameLock::~LongNameLock() {
  if (second_ != nullptr) second_->Unlock();
  if (first_ != nullptr) first_->Unlock();
}

void Tree::OwnVaultFile(BackingDir& dir, const std::string& file) {
  if (options_.vault_files_owner)
    (void)dir.SetOwner(file, options_.vault_files_owner->first, options_.vault_files_owner->second);
}

Result<struct stat> Tree::StatStored(const Dir& dir, const EntryName& name) {
  std::string stored;
  if (!name.empty()) {
    SIGILFS_ASSIGN_OR_RETURN(stored, Stored(dir, name));
  }
  return Lstat(dir, name, stored);
}

Result<struct stat> Tree::Stat(const Dir& dir, const EntryName& name) {
  std::string stored;
  if (!name.empty()) {
    SIGILFS_ASSIGN_OR_RETURN(stored, Stored(dir, name));
  }
  SIGILFS_ASSIGN_OR_RETURN(struct stat st, Lstat(dir, name, stored));
  auto shown = StatOf(dir.backing(), stored, st);
  if (!shown.ok()) return Named(shown.status(), dir, name);
  return shown;
}

Result<struct stat> Tree::StatOf(BackingDir& dir, const std::string& stored, struct stat st,
                                 const FileContents* open) const {
  if (S_ISREG(st.st_mode)) {
    if (open != nullptr) {
      st.st_size = static_cast<off_t>(open->size());  // includes what is not written back yet
    } else {
      SIGILFS_ASSIGN_OR_RETURN(uint64_t size, volume_.PlainSize(dir, stored, st));
      st.st_size = static_cast<off_t>(size);
    }
  } else if (S_ISLNK(st.st_mode)) {
    SIGILFS_ASSIGN_OR_RETURN(std::string sealed, dir.ReadSymlink(stored));
    SIGILFS_ASSIGN_OR_RETURN(std::string target, volume_.DecryptSymlinkTarget(*root_, sealed));
    st.st_size = static_cast<off_t>(target.size());
  }
  return st;
}

Result<DirIv> Tree::DirIvOf(Node& node, BackingDir& backing,
                            const std::function<std::string()>& shown) {
  MutexLock lock(node.mu);
  // On a shared store another front end may have replaced the directory since its IV was read
  // (`rm -rf D; mkdir D`, where the store reuses the inode number, or any replacement on a
  // store that renumbers): the node would still match it, and a name made under the old IV
  // would be lost to every other front end. So the IV is read each time, from the handle the
  // caller's operation opened, and names are made and read under what the store holds now.
  if (node.iv && !options_.shared) return *node.iv;
  bool from_attribute = false;
  auto iv = volume_.ReadDirIv(backing, &from_attribute);
  if (!iv.ok()) {
    if (options_.log) options_.log("directory " + shown() + ": " + iv.status().ToString());
    return iv.status();
  }
  if (from_attribute && options_.repair) {
    // A crash kept the directory but not its IV file's data: put the file back for backups
    // that do not carry attributes.
    const Status restored = volume_.RestoreDirIvFile(backing, *iv);
    if (options_.log)
      options_.log("directory " + shown() +
                   ": IV file torn, IV taken from the directory's attribute; " +
                   (restored.ok() ? std::string("file restored") : restored.ToString()));
  }
  if (!options_.shared) node.iv = *iv;
  return *iv;
}

Status Tree::List(const Dir& dir, uint64_t from, const std::function<bool(const DirEntry&)>& emit,
                  const std::function<void(const std::string&, const Status&)>& damaged) {
  return volume_.List(
      dir.backing(), dir.iv(), from, emit,
      damaged ? damaged : [](const std::string&, const Status&) {});
}

Status Tree::ListSorted(const Dir& dir, std::vector<DirEntry>& out,
                        const std::function<void(const std::string&, const Status&)>& damaged) {
  return volume_.ListSorted(
      dir.backing(), dir.iv(), out, damaged ? damaged : [](const std::string&, const Status&) {});
}

Status Tree::MakeDir(const Dir& dir, const EntryName& name, mode_t mode, const Finish& finish) {
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, Stored(dir, name));
  LongNameLock lock(*this, stored);
  if (Status s = volume_.MakeDirectory(dir.backing(), dir.iv(), name.plain(), mode); !s.ok())
    return Named(s, dir, name);
  if (options_.vault_files_owner) {
    if (NameCodec::IsLongName(stored)) OwnVaultFile(dir.backing(), NameCodec::SideFileName(stored));
    if (auto sub = dir.backing().OpenDir(stored); sub.ok()) OwnVaultFile(**sub, kDirIvFileName);
  }
  if (Status s = RunFinish(dir, stored, finish); !s.ok()) {
    // Not half made: without its default ACL, entries made in it would get the umask instead.
    (void)volume_.RemoveDirectory(dir.backing(), stored);
    volume_.ReleaseName(dir.backing(), stored);
    return s;
  }
  return Status::Ok();
}

Status Tree::MakeNode(const Dir& dir, const EntryName& name, mode_t mode, dev_t rdev,
                      const Finish& finish) {
  const mode_t type = mode & S_IFMT;
  if (type != S_IFIFO && type != S_IFSOCK && type != S_IFCHR && type != S_IFBLK && type != S_IFREG)
    return Errno(EINVAL, "mknod of a directory or symlink");
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, Stored(dir, name));
  LongNameLock lock(*this, stored);
  SIGILFS_RETURN_IF_ERROR(PrepareLocked(dir, name, stored));
  Status s = dir.backing().MakeNode(stored, mode, rdev);
  if (s.ok() && !(s = ConfirmLocked(dir, name, stored)).ok()) (void)dir.backing().Unlink(stored);
  if (!s.ok()) {
    UnprepareLocked(dir, stored);
    return Named(s, dir, name);
  }
  return FinishOrRemove(dir, stored, finish);
}

Status Tree::FinishOrRemove(const Dir& dir, const std::string& stored, const Finish& finish) {
  Status s = RunFinish(dir, stored, finish);
  if (!s.ok()) {
    // Not half made: a file without its ACL could give a named user what the ACL denies.
    const auto st = dir.backing().Stat(stored);
    const std::string target =
        st.ok() ? volume_.TargetToRelease(dir.backing(), stored, *st) : std::string();
    (void)dir.backing().Unlink(stored);
    volume_.ReleaseName(dir.backing(), stored);
    volume_.ReleaseSymlinkTarget(*root_, target);
  }
  return s;
}

Status Tree::MakeSymlink(const Dir& dir, const EntryName& name, std::string_view target,
                         const Finish& finish) {
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, Stored(dir, name));
  SIGILFS_ASSIGN_OR_RETURN(std::string sealed, SealTarget(target));
  LongNameLock lock(*this, stored);
  Status s = PrepareLocked(dir, name, stored);
  if (s.ok()) {
    s = dir.backing().MakeSymlink(stored, sealed);
    if (s.ok() && !(s = ConfirmLocked(dir, name, stored)).ok()) (void)dir.backing().Unlink(stored);
    if (!s.ok()) UnprepareLocked(dir, stored);
  }
  if (!s.ok()) {
    volume_.ReleaseSymlinkTarget(*root_, sealed);
    return Named(s, dir, name);
  }
  return FinishOrRemove(dir, stored, finish);
}

Result<std::string> Tree::ReadLink(const Dir& dir, const EntryName& name) {
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, Stored(dir, name));
  auto sealed = dir.backing().ReadSymlink(stored);
  if (!sealed.ok()) return Named(sealed.status(), dir, name);
  return volume_.DecryptSymlinkTarget(*root_, *sealed);
}

Result<std::string> Tree::ReadLink(BackingDir& object) const {
  SIGILFS_ASSIGN_OR_RETURN(std::string sealed, object.ReadSymlink(""));
  return volume_.DecryptSymlinkTarget(*root_, sealed);
}

void Tree::ReleaseTarget(const std::string& target) const {
  if (!target.empty()) volume_.ReleaseSymlinkTarget(*root_, target);
}

Status Tree::Link(const Dir& dir, const EntryName& name, const Dir& to, const EntryName& to_name) {
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, Stored(dir, name));
  SIGILFS_ASSIGN_OR_RETURN(struct stat st, Lstat(dir, name, stored));
  if (IsDir(st)) return Errno(EPERM, "hard link to a directory");
  SIGILFS_ASSIGN_OR_RETURN(std::string new_stored, Stored(to, to_name));
  LongNameLock lock(*this, new_stored);
  SIGILFS_RETURN_IF_ERROR(PrepareLocked(to, to_name, new_stored));
  Status s = dir.backing().Link(stored, to.backing(), new_stored);
  if (s.ok() && !(s = ConfirmLocked(to, to_name, new_stored)).ok())
    (void)to.backing().Unlink(new_stored);
  if (!s.ok()) UnprepareLocked(to, new_stored);
  return s.ok() ? s : Named(s, to, to_name);
}

Status Tree::Unlink(const Dir& dir, const EntryName& name, Removed* removed) {
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, Stored(dir, name));
  std::unique_ptr<BackingDir> opened;
  SIGILFS_ASSIGN_OR_RETURN(struct stat st, StatBeforeRemoval(dir, name, stored, removed, &opened));
  if (IsDir(st)) return Errno(EISDIR, "unlink of a directory");
  std::string target = volume_.TargetToRelease(dir.backing(), stored, st);
  LongNameLock lock(*this, stored);
  KeepBeforeRemoval(dir, stored, st, removed, std::move(opened));
  if (Status s = dir.backing().Unlink(stored); !s.ok()) {
    if (removed != nullptr) removed->object.reset();
    return Named(s, dir, name);
  }
  volume_.ReleaseName(dir.backing(), stored);
  if (removed != nullptr && removed->object)
    removed->target = std::move(target);  // the link still reads through the kept handle
  else
    volume_.ReleaseSymlinkTarget(*root_, target);
  return Status::Ok();
}

Status Tree::RemoveDir(const Dir& dir, const EntryName& name, Removed* removed) {
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, Stored(dir, name));
  std::unique_ptr<BackingDir> opened;
  SIGILFS_ASSIGN_OR_RETURN(struct stat st, StatBeforeRemoval(dir, name, stored, removed, &opened));
  if (!IsDir(st)) return Errno(ENOTDIR, "rmdir of a non-directory");
  LongNameLock lock(*this, stored);
  KeepBeforeRemoval(dir, stored, st, removed, std::move(opened));
  if (Status s = volume_.RemoveDirectory(dir.backing(), stored); !s.ok()) {
    if (removed != nullptr) removed->object.reset();
    return Named(s, dir, name);
  }
  volume_.ReleaseName(dir.backing(), stored);
  return Status::Ok();
}

Status Tree::Rename(const Dir& dir, const EntryName& name, const Dir& to, const EntryName& to_name,
                    unsigned flags, Renamed* renamed) {
  Renamed unused;
  Renamed& out = renamed != nullptr ? *renamed : unused;
  if ((flags & ~(BackingDir::kNoReplace | BackingDir::kExchange)) != 0 ||
      flags == (BackingDir::kNoReplace | BackingDir::kExchange))
    return Errno(EINVAL, "rename flags");
  SIGILFS_ASSIGN_OR_RETURN(std::string from, Stored(dir, name));
  SIGILFS_ASSIGN_OR_RETURN(std::string dest, Stored(to, to_name));
  LongNameLock names(*this, from, dest);
  SIGILFS_ASSIGN_OR_RETURN(struct stat src, Lstat(dir, name, from));
  auto existing = to.backing().Stat(dest);
  if (!existing.ok() && existing.status().code() != Code::kNotFound)
    return Named(existing.status(), to, to_name);
  if ((flags & BackingDir::kExchange) != 0) {
    if (!existing.ok()) return Named(existing.status(), to, to_name);
    // Side files of long names belong to the names, which stay where they are.
    Status s = dir.backing().Rename(from, to.backing(), dest, BackingDir::kExchange);
    if (!s.ok()) return Named(s, dir, name);
    out.changed = true;
    out.moved = src;
    out.replaced.st = *existing;
    return Status::Ok();
  }
  if (existing.ok()) {
    const struct stat& dst = *existing;
    if (src.st_dev == dst.st_dev && src.st_ino == dst.st_ino) return Status::Ok();  // one file
    if ((flags & BackingDir::kNoReplace) != 0) return Errno(EEXIST, "rename");
    if (IsDir(src) && !IsDir(dst)) return Errno(ENOTDIR, "rename");
    if (!IsDir(src) && IsDir(dst)) return Errno(EISDIR, "rename");
  }
  SIGILFS_RETURN_IF_ERROR(PrepareLocked(to, to_name, dest));
  std::string replaced_target;
  std::string aside;  // an empty directory replaced, until the rename has taken its place
  if (existing.ok()) {
    replaced_target = volume_.TargetToRelease(to.backing(), dest, *existing);
    KeepBeforeRemoval(to, dest, *existing, &out.replaced);
    if (IsDir(*existing)) {
      auto moved_aside = volume_.MoveEmptyDirectoryAside(to.backing(), dest);
      if (!moved_aside.ok()) {
        out.replaced.object.reset();
        return Named(moved_aside.status(), to, to_name);
      }
      aside = std::move(moved_aside).value();
    }
  }
  if (Status s = dir.backing().Rename(from, to.backing(), dest, flags); !s.ok()) {
    if (!aside.empty())
      (void)to.backing().Rename(aside, to.backing(), dest, BackingDir::kNoReplace);
    if (!existing.ok()) UnprepareLocked(to, dest);
    out.replaced.object.reset();
    return Named(s, dir, name);
  }
  out.changed = true;
  out.moved = src;
  // The entry is in place; a side file taken by another host meanwhile that cannot be written
  // back is reported (the entry then lists as damaged until renamed again).
  Status confirmed = ConfirmLocked(to, to_name, dest);
  // Best effort: a leftover is hidden.
  if (!aside.empty()) (void)volume_.RemoveDirectory(to.backing(), aside);
  if (out.replaced.object)
    out.replaced.target = std::move(replaced_target);  // read through the kept handle
  else
    volume_.ReleaseSymlinkTarget(*root_, replaced_target);
  if (&dir.backing() != &to.backing() || from != dest) volume_.ReleaseName(dir.backing(), from);
  return confirmed.ok() ? confirmed : Named(confirmed, to, to_name);
}

Result<Tree::NewFile> Tree::MakeFile(const Dir& dir, const EntryName& name, mode_t mode,
                                     bool exclusive, bool keep_atime, const Finish& finish) {
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, Stored(dir, name));
  LongNameLock lock(*this, stored);
  SIGILFS_RETURN_IF_ERROR(PrepareLocked(dir, name, stored));
  // Cipher files are always opened for reading too: partial writes read the old page.
  FileOpenMode how{.write = true,
                   .create = true,
                   .exclusive = true,
                   .mode = mode & 07777,
                   .keep_atime = keep_atime};
  NewFile made;
  auto file = dir.backing().OpenFile(stored, how);
  made.created = file.ok();
  if (!file.ok() && file.status().code() == Code::kExists && !exclusive) {
    how.create = how.exclusive = false;  // there already, or made by another caller meanwhile
    file = dir.backing().OpenFile(stored, how);
  }
  if (!file.ok()) {
    UnprepareLocked(dir, stored);
    return Named(file.status(), dir, name);
  }
  made.file = std::move(file).value();
  // The object opened: the name still leads to it, unless a rename or removal of this very
  // name came between (which a caller that cares keeps out, as a mount does).
  auto object = dir.backing().OpenObject(stored);
  Status s = object.status();
  const bool opened = s.ok();
  if (opened) {
    made.object = std::move(object).value();
    if (made.created) s = ConfirmLocked(dir, name, stored);
    if (s.ok() && made.created && finish) s = finish(*made.object);
  }
  if (!s.ok()) {
    if (made.created) {  // not half made: the new file goes again, with its side file
      made = NewFile();
      (void)dir.backing().Unlink(stored);
      volume_.ReleaseName(dir.backing(), stored);
    }
    return opened ? s : Named(s, dir, name);
  }
  return made;
}

Result<std::unique_ptr<FileContents>> Tree::Contents(std::unique_ptr<BackingFile> file,
                                                     std::string label,
                                                     std::optional<uint64_t> cipher_size) const {
  return volume_.pages().Open(std::move(file), std::move(label), cipher_size);
}

Result<std::unique_ptr<FileContents>> Tree::CreateFile(const Dir& dir, const EntryName& name,
                                                       mode_t mode, bool exclusive) {
  SIGILFS_ASSIGN_OR_RETURN(NewFile made, MakeFile(dir, name, mode, exclusive));
  return volume_.pages().Open(std::move(made.file), Shown(dir, name));
}

Result<std::unique_ptr<FileContents>> Tree::OpenFile(const Dir& dir, const EntryName& name,
                                                     bool write, const struct stat* same_as) {
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, Stored(dir, name));
  auto file =
      dir.backing().OpenFile(stored, {.write = write, .keep_atime = !write, .same_as = same_as});
  if (!file.ok()) return Named(file.status(), dir, name);
  return volume_.pages().Open(std::move(file).value(), Shown(dir, name));
}

Status Tree::SetMode(const Dir& dir, const EntryName& name, mode_t mode) {
  std::string stored;
  if (!name.empty()) {
    SIGILFS_ASSIGN_OR_RETURN(stored, Stored(dir, name));
  }
  return dir.backing().SetMode(stored, mode & 07777);
}

Status Tree::SetOwner(const Dir& dir, const EntryName& name, uid_t uid, gid_t gid) {
  std::string stored;
  if (!name.empty()) {
    SIGILFS_ASSIGN_OR_RETURN(stored, Stored(dir, name));
  }
  return dir.backing().SetOwner(stored, uid, gid);
}

Status Tree::SetTimes(const Dir& dir, const EntryName& name, const struct timespec times[2]) {
  std::string stored;
  if (!name.empty()) {
    SIGILFS_ASSIGN_OR_RETURN(stored, Stored(dir, name));
  }
  return dir.backing().SetTimes(stored, times);
}

Status Tree::SetSize(const Dir& dir, const EntryName& name, uint64_t size) {
  SIGILFS_ASSIGN_OR_RETURN(auto file, OpenFile(dir, name, /*write=*/true));
  SIGILFS_RETURN_IF_ERROR(file->Truncate(size));
  return file->Sync(false);
}

Result<std::string> Tree::XattrKey(std::string_view attr) const {
  SIGILFS_RETURN_IF_ERROR(CheckXattrName(attr));
  // The ACLs' keys are asked for on every create under a default ACL: made once.
  if (attr == kAccessAcl && !access_acl_key_.empty()) return access_acl_key_;
  if (attr == kDefaultAcl && !default_acl_key_.empty()) return default_acl_key_;
  return volume_.names().XattrStoredName(attr);
}

namespace {

// Where `op` is refused (EACCES) and the owner lacks permission bit `bit`, `op` runs again with
// the bit lent: ext4 lets an owner read an ACL of a file it cannot read, where the cipher
// object's `user.*` attribute needs that permission of a process that is not root.
template <typename Op>
auto WithOwnerBit(BackingDir& dir, const std::string& stored, mode_t bit, Op op) -> decltype(op()) {
  auto first = op();
  if (first.ok() || first.status().sys_errno() != EACCES || ::geteuid() == 0) return first;
  auto st = dir.Stat(stored);
  if (!st.ok() || (st->st_mode & bit) != 0) return first;
  const mode_t mode = st->st_mode & 07777;
  if (!dir.SetMode(stored, mode | bit).ok()) return first;
  auto again = op();
  (void)dir.SetMode(stored, mode);
  return again;
}

}  // namespace

Result<std::vector<uint8_t>> Tree::ReadXattr(BackingDir& dir, const std::string& stored,
                                             std::string_view attr, bool lend) {
  SIGILFS_ASSIGN_OR_RETURN(std::string key, XattrKey(attr));
  auto get = [&] { return dir.GetXattr(stored, key); };
  SIGILFS_ASSIGN_OR_RETURN(std::vector<uint8_t> sealed,
                           lend ? WithOwnerBit(dir, stored, S_IRUSR, get) : get());
  SIGILFS_ASSIGN_OR_RETURN(NameCodec::Xattr x, volume_.names().OpenXattr(key, sealed));
  if (x.name != attr) {
    crypt::SecureWipe(x.value);
    return Status(Code::kCorrupt, "extended attribute stored under another name's key");
  }
  return std::move(x.value);
}

Status Tree::WriteXattr(BackingDir& dir, const std::string& stored, std::string_view attr,
                        ByteSpan value, int flags) {
  SIGILFS_ASSIGN_OR_RETURN(std::string key, XattrKey(attr));
  SIGILFS_ASSIGN_OR_RETURN(std::vector<uint8_t> sealed,
                           volume_.names().SealXattr(key, attr, value));
  return dir.SetXattr(stored, key, sealed, flags);
}

Status Tree::DeleteXattr(BackingDir& dir, const std::string& stored, std::string_view attr) {
  SIGILFS_ASSIGN_OR_RETURN(std::string key, XattrKey(attr));
  return dir.RemoveXattr(stored, key);
}

Result<std::vector<std::string>> Tree::XattrNames(
    BackingDir& dir, const std::string& stored,
    const std::function<void(const std::string&, const Status&)>& damaged) {
  SIGILFS_ASSIGN_OR_RETURN(std::vector<std::string> keys, dir.ListXattrs(stored));
  std::vector<std::string> out;
  for (const std::string& key : keys) {
    if (!key.starts_with(NameCodec::kXattrPrefix)) continue;  // the vault's own (a dir's IV)
    auto sealed = dir.GetXattr(stored, key);
    if (!sealed.ok() && sealed.status().sys_errno() == ENODATA) continue;  // removed meanwhile
    auto x = sealed.ok() ? volume_.names().OpenXattr(key, *sealed)
                         : Result<NameCodec::Xattr>(sealed.status());
    if (!x.ok()) {
      if (damaged) damaged(key, x.status());
      continue;
    }
    crypt::SecureWipe(x->value);
    out.push_back(std::move(x->name));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The entry forms: `name` of `dir` (an empty name: `dir` itself); a symlink has none.
Result<std::string> Tree::XattrEntry(const Dir& dir, const EntryName& name, bool* symlink) {
  std::string stored;
  if (!name.empty()) {
    SIGILFS_ASSIGN_OR_RETURN(stored, Stored(dir, name));
  }
  SIGILFS_ASSIGN_OR_RETURN(struct stat st, Lstat(dir, name, stored));
  *symlink = S_ISLNK(st.st_mode);
  return stored;
}

Result<std::vector<uint8_t>> Tree::GetXattr(const Dir& dir, const EntryName& name,
                                            std::string_view attr) {
  SIGILFS_RETURN_IF_ERROR(CheckXattrName(attr));
  bool symlink = false;
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, XattrEntry(dir, name, &symlink));
  if (symlink) return Errno(ENODATA, "extended attribute of a symlink");
  return ReadXattr(dir.backing(), stored, attr, /*lend=*/false);
}

Status Tree::SetXattr(const Dir& dir, const EntryName& name, std::string_view attr, ByteSpan value,
                      int flags) {
  bool symlink = false;
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, XattrEntry(dir, name, &symlink));
  if (symlink) return Errno(EPERM, "extended attribute on a symlink");
  return WriteXattr(dir.backing(), stored, attr, value, flags);
}

Status Tree::RemoveXattr(const Dir& dir, const EntryName& name, std::string_view attr) {
  SIGILFS_RETURN_IF_ERROR(CheckXattrName(attr));
  bool symlink = false;
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, XattrEntry(dir, name, &symlink));
  if (symlink) return Errno(ENODATA, "extended attribute of a symlink");
  return DeleteXattr(dir.backing(), stored, attr);
}

Result<std::vector<std::string>> Tree::ListXattrs(
    const Dir& dir, const EntryName& name,
    const std::function<void(const std::string&, const Status&)>& damaged) {
  bool symlink = false;
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, XattrEntry(dir, name, &symlink));
  if (symlink) return std::vector<std::string>{};
  return XattrNames(dir.backing(), stored, damaged);
}

Result<std::vector<uint8_t>> Tree::GetXattr(BackingDir& object, std::string_view attr) {
  return ReadXattr(object, "", attr, /*lend=*/true);
}

Status Tree::SetXattr(BackingDir& object, std::string_view attr, ByteSpan value, int flags) {
  return WriteXattr(object, "", attr, value, flags);
}

Status Tree::RemoveXattr(BackingDir& object, std::string_view attr) {
  return DeleteXattr(object, "", attr);
}

Result<std::vector<std::string>> Tree::ListXattrs(
    BackingDir& object, const std::function<void(const std::string&, const Status&)>& damaged) {
  return XattrNames(object, "", damaged);
}

Status Tree::StoreAcl(BackingDir& object, std::string_view attr, const std::vector<uint8_t>* value,
                      int flags, mode_t mode, AclKnown known) {
  if (attr != kAccessAcl && attr != kDefaultAcl) return Errno(EINVAL, "not a POSIX ACL attribute");
  struct stat st;
  if (known.st != nullptr) {
    st = *known.st;
  } else {
    SIGILFS_ASSIGN_OR_RETURN(st, object.Stat(""));
  }
  const mode_t current = st.st_mode & 07777;
  // The write bit lent, as ext4 lets an owner set an ACL on a file it cannot write.
  const bool lend = (current & S_IWUSR) == 0 && ::geteuid() != 0;
  if (lend) SIGILFS_RETURN_IF_ERROR(object.SetMode("", current | S_IWUSR));
  Status s = Status::Ok();
  if (value != nullptr) {
    s = WriteXattr(object, "", attr, *value, flags);
  } else if (!known.absent) {  // else nothing is stored to remove
    if (Status removed = DeleteXattr(object, "", attr);
        !removed.ok() && removed.sys_errno() != ENODATA)
      s = removed;
  }
  if (!s.ok()) {
    if (lend) (void)object.SetMode("", current);
    return s;
  }
  if (lend || current != (mode & 07777)) return object.SetMode("", mode & 07777);
  return Status::Ok();
}

Result<struct statvfs> Tree::StatFs() { return root_->StatFs(); }

// ---------------------------------------------------------------------------------------------
// Staged entries

Result<std::unique_ptr<Tree::Staged>> Tree::Stage(
    const Dir& dir, const std::function<Status(const std::string&)>& make) {
  // The staged entry keeps its directory open itself: it may outlive the caller's handle.
  SIGILFS_ASSIGN_OR_RETURN(std::unique_ptr<Dir> own, OpenDir(dir, ""));
  std::string temp = Volume::HiddenName(kStagePrefix);
  SIGILFS_RETURN_IF_ERROR(make(temp));
  return std::unique_ptr<Staged>(new Staged(*this, std::move(own), std::move(temp)));
}

Result<std::string> Tree::SealTarget(std::string_view target) {
  SIGILFS_ASSIGN_OR_RETURN(std::string sealed, volume_.EncryptSymlinkTarget(*root_, target));
  // A long target's side file is named by the sealed text, which then starts as no inline one
  // can (docs/format.md, "Symlinks").
  if (sealed.starts_with("sigilfs.target.")) OwnVaultFile(*root_, sealed);
  return sealed;
}

Result<std::unique_ptr<Tree::Staged>> Tree::StageFile(const Dir& dir) {
  std::unique_ptr<BackingFile> file;
  SIGILFS_ASSIGN_OR_RETURN(
      auto staged, Stage(dir, [&](const std::string& temp) -> Status {
        SIGILFS_ASSIGN_OR_RETURN(
            file, dir.backing().OpenFile(
                      temp, {.write = true, .create = true, .exclusive = true, .mode = 0600}));
        return Status::Ok();
      }));
  SIGILFS_ASSIGN_OR_RETURN(staged->contents_,
                           volume_.pages().Open(std::move(file), dir.path() + "/" + staged->temp_));
  return staged;
}

Result<std::unique_ptr<Tree::Staged>> Tree::StageSymlink(const Dir& dir, std::string_view target) {
  SIGILFS_ASSIGN_OR_RETURN(std::string sealed, SealTarget(target));
  auto staged =
      Stage(dir, [&](const std::string& temp) { return dir.backing().MakeSymlink(temp, sealed); });
  if (!staged.ok()) {
    volume_.ReleaseSymlinkTarget(*root_, sealed);
    return staged.status();
  }
  (*staged)->own_target_ = sealed;
  return staged;
}

Result<std::unique_ptr<Tree::Staged>> Tree::StageNode(const Dir& dir, mode_t mode, dev_t rdev) {
  const mode_t type = mode & S_IFMT;
  if (type != S_IFIFO && type != S_IFSOCK && type != S_IFCHR && type != S_IFBLK)
    return Errno(EINVAL, "mknod of a regular file, directory or symlink");
  return Stage(dir, [&](const std::string& temp) {
    return dir.backing().MakeNode(temp, type | (mode & 07777), rdev);
  });
}

Result<std::unique_ptr<Tree::Staged>> Tree::StageLink(const Dir& from, const EntryName& name,
                                                      const Dir& dir) {
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, Stored(from, name));
  SIGILFS_ASSIGN_OR_RETURN(struct stat st, from.backing().Stat(stored));
  if (IsDir(st)) return Errno(EPERM, "hard link to a directory");
  return Stage(dir, [&](const std::string& temp) {
    return from.backing().Link(stored, dir.backing(), temp);
  });
}

Result<uint64_t> Tree::RemoveLeftovers(const Dir& dir) {
  std::vector<std::string> left;
  SIGILFS_RETURN_IF_ERROR(dir.backing().List(0, [&left](const BackingEntry& e) {
    if (e.name.starts_with(kStagePrefix)) left.push_back(e.name);
    return true;
  }));
  for (const std::string& name : left) {
    auto st = dir.backing().Stat(name);
    if (!st.ok() || IsDir(*st)) continue;
    const std::string target = volume_.TargetToRelease(dir.backing(), name, *st);
    SIGILFS_RETURN_IF_ERROR(dir.backing().Unlink(name));
    if (!target.empty()) volume_.ReleaseSymlinkTarget(*root_, target);
  }
  return left.size();
}

Tree::Staged::~Staged() {
  contents_.reset();
  if (temp_.empty()) return;
  (void)dir_->backing().Unlink(temp_);
  tree_.volume_.ReleaseSymlinkTarget(*tree_.root_, own_target_);
}

Status Tree::Staged::SetXattr(std::string_view attr, ByteSpan value) {
  if (temp_.empty()) return Errno(EINVAL, "staged entry already placed");
  auto st = dir_->backing().Stat(temp_);
  if (st.ok() && S_ISLNK(st->st_mode)) return Errno(EPERM, "extended attribute on a symlink");
  return tree_.WriteXattr(dir_->backing(), temp_, attr, value, 0);
}

Status Tree::Staged::Finish() {
  if (contents_) {
    // Written back and closed first: nothing is left to move the times set below.
    SIGILFS_RETURN_IF_ERROR(contents_->Sync(false));
    contents_.reset();
  }
  BackingDir& dir = dir_->backing();
  if (owner_) SIGILFS_RETURN_IF_ERROR(dir.SetOwner(temp_, owner_->first, owner_->second));
  if (mode_) {
    SIGILFS_ASSIGN_OR_RETURN(struct stat st, dir.Stat(temp_));
    // A symlink's permissions mean nothing (and Linux cannot change them).
    if (!S_ISLNK(st.st_mode)) SIGILFS_RETURN_IF_ERROR(dir.SetMode(temp_, *mode_));
  }
  if (times_) SIGILFS_RETURN_IF_ERROR(dir.SetTimes(temp_, times_->data()));
  owner_.reset();
  mode_.reset();
  times_.reset();
  return Status::Ok();
}

Status Tree::Staged::Place(const EntryName& name, bool replace) {
  if (temp_.empty()) return Errno(EINVAL, "staged entry already placed");
  SIGILFS_RETURN_IF_ERROR(Finish());
  Tree& tree = tree_;
  BackingDir& dir = dir_->backing();
  SIGILFS_ASSIGN_OR_RETURN(std::string stored, tree.Stored(*dir_, name));
  LongNameLock lock(tree, stored);
  std::string replaced_target;
  auto existing = dir.Stat(stored);
  if (existing.ok()) {
    if (!replace) return Status(Code::kExists, "exists", EEXIST);
    if (IsDir(*existing)) return Status(Code::kExists, "exists and is a directory", EEXIST);
    replaced_target = tree.volume_.TargetToRelease(dir, stored, *existing);
  } else if (existing.status().code() != Code::kNotFound) {
    return tree.Named(existing.status(), *dir_, name);
  }
  SIGILFS_RETURN_IF_ERROR(tree.PrepareLocked(*dir_, name, stored));
  Status s = dir.Rename(temp_, dir, stored, replace ? 0u : unsigned{BackingDir::kNoReplace});
  if (!s.ok() && s.sys_errno() == EINVAL && !replace)  // no RENAME_NOREPLACE: a link refuses too
    s = dir.Link(temp_, dir, stored);
  if (!s.ok()) {
    if (!existing.ok()) tree.UnprepareLocked(*dir_, stored);
    if (s.sys_errno() == EEXIST) return Status(Code::kExists, "exists", EEXIST);
    return tree.Named(s, *dir_, name);
  }
  // Gone after a rename, but left by a link, or by a rename onto another name of its inode.
  (void)dir.Unlink(temp_);
  // In place; as for a rename, a side file that cannot be written back is reported.
  Status confirmed = tree.ConfirmLocked(*dir_, name, stored);
  temp_.clear();
  own_target_.clear();
  tree.volume_.ReleaseSymlinkTarget(*tree.root_, replaced_target);
  return confirmed.ok() ? confirmed : tree.Named(confirmed, *dir_, name);
}

}  // namespace sigilfs::core
