// The mount's operations: each request turned into calls of core::Tree, the node table and
// core::permissions, and their results back (the nodes themselves: nodes.cc).
#include "filesystem.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <utility>

#include "log.h"
#include "sigilfs/core/acl.h"
#include "sigilfs/core/names.h"
#include "sigilfs/core/permissions.h"

namespace sigilfs::fuse {

namespace acl = core::acl;
namespace permissions = core::permissions;
namespace {

using core::DirIv;

Status Errno(int e, const char* what) { return Status::FromErrno(e, what); }

// SIGILFS_DEBUG_OPS=1 logs every change the daemon makes to the cipher tree (names are the
// stored, encrypted ones: no plaintext): for investigating divergences.
bool DebugOps() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read once, before any thread needs it
  static const bool kOn = std::getenv("SIGILFS_DEBUG_OPS") != nullptr;
  return kOn;
}

// The caller's groups, as the permission rules ask for them.
permissions::InGroup InGroupOf(const Caller& caller) {
  return [&caller](gid_t gid) { return caller.InGroup(gid); };
}

// A stored ACL or attribute that does not open is logged, without its name (the user's; the
// log is not encrypted).
Status Logged(const char* what, const Status& s) {
  if (s.code() == Code::kAuthFailed || s.code() == Code::kCorrupt)
    Log("%s: %s", what, s.ToString().c_str());
  return s;
}

}  // namespace

Filesystem::Filesystem(std::unique_ptr<core::Volume> volume, MountOptions options)
    : volume_(std::move(volume)),
      root_dir_(core::BorrowPosixBackingDir(volume_->root_fd())),
      keeps_inode_numbers_(root_dir_->KeepsInodeNumbers()),
      options_(options) {
  struct stat root_st {};
  if (auto st = root_dir_->Stat(""); st.ok()) root_st = *st;
  core::NodeTableOptions table;
  table.keeps_inode_numbers = keeps_inode_numbers_;
  table.remember = options_.handle_cache;
  table.generation_of = [this](uint64_t id) { return volume_->names().HandleGeneration(id); };
  table.make_node = [] { return std::make_shared<Inode>(); };
  if (DebugOps()) table.debug_log = [](const std::string& line) { Log("%s", line.c_str()); };
  nodes_ = std::make_unique<core::NodeTable>(root_st, std::move(table));
  root_ = AsInode(nodes_->root());
  if (options_.open_dirs > 0 && !options_.shared && keeps_inode_numbers_)
    open_dirs_ = std::make_unique<core::OpenDirCache>(options_.open_dirs);
  // The namespace's storage rules (attributes, ACLs) are the library's. The root IV is not
  // checked here: a mount starts on a damaged root, and each lookup reports the damage.
  core::TreeOptions tree_options;
  tree_options.check_root_iv = false;
  tree_options.plain_names_in_errors = false;  // the daemon's log is not encrypted
  tree_options.shared = options_.shared;
  tree_options.repair = !options_.read_only;
  tree_options.log = [](const std::string& line) { Log("%s", line.c_str()); };
  tree_ = std::move(core::Tree::Open(*volume_, core::BorrowPosixBackingDir(volume_->root_fd()),
                                     std::move(tree_options)))
              .value();
}

Filesystem::~Filesystem() { FlushAll(); }

Result<DirIv> Filesystem::DirIvOf(core::Node& dir, core::BackingDir& backing) {
  // Cached on the node, or read at every use in shared mode (core::TreeOptions::shared).
  return tree_->DirIvOf(dir, backing, [this, &dir] {
    tree_mu_.AssertHeld();  // the caller's, shared
    return PathLocked(dir);
  });
}

Result<std::unique_ptr<core::Tree::Dir>> Filesystem::TreeDirOf(core::Node& dir,
                                                               struct stat* st_out) {
  if (dir.type != S_IFDIR) return Errno(ENOTDIR, "lookup");
  SIGILFS_ASSIGN_OR_RETURN(Object object, OpenInode(dir, st_out));
  SIGILFS_ASSIGN_OR_RETURN(DirIv iv, DirIvOf(dir, *object));
  // Named in errors by its inode number: no plaintext name reaches the daemon's log.
  const uint64_t ino = st_out != nullptr ? st_out->st_ino : dir.key_ino;
  return tree_->DirOf(std::move(object), iv, "inode " + std::to_string(ino));
}

Result<Filesystem::Place> Filesystem::Resolve(Inode& dir, const std::string& name,
                                              bool with_dir_stat) {
  Place at;
  SIGILFS_ASSIGN_OR_RETURN(at.dir, TreeDirOf(dir, with_dir_stat ? &at.dir_st : nullptr));
  SIGILFS_ASSIGN_OR_RETURN(at.name, tree_->Resolve(*at.dir, name));
  return at;
}

Result<struct stat> Filesystem::StatOf(const struct stat& st, core::BackingDir& dir,
                                       const std::string& stored, Inode* inode) {
  std::shared_ptr<core::FileContents> open;  // its size counts what is not written back yet
  if (inode != nullptr && S_ISREG(st.st_mode)) {
    MutexLock lock(inode->mu);
    open = inode->contents;
  }
  auto shown = tree_->StatOf(dir, stored, st, open.get());
  if (!shown.ok() && S_ISREG(st.st_mode))
    Log("%s: %s", stored.c_str(), shown.status().ToString().c_str());
  return shown;
}

Result<Entry> Filesystem::DoLookup(Inode& parent, const std::string& name) {
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name));
  return EntryAt(parent.shared_from_this(), at.dir->backing(), at.stored());
}

Result<Entry> Filesystem::DoLookupStored(Inode& parent, core::BackingDir& dir,
                                         const std::string& stored) {
  ReaderLock tree(tree_mu_);
  return EntryAt(parent.shared_from_this(), dir, stored);
}

Result<struct stat> Filesystem::DoGetattr(Inode& inode) {
  {
    MutexLock lock(inode.mu);
    if (inode.object) {
      SIGILFS_ASSIGN_OR_RETURN(struct stat st, inode.object->Stat(""));
      st.st_size = static_cast<off_t>(inode.contents->size());
      return st;
    }
  }
  ReaderLock tree(tree_mu_);
  struct stat st;
  SIGILFS_ASSIGN_OR_RETURN(Object object, OpenInode(inode, &st));
  return StatOf(st, *object, "", &inode);
}

Result<std::shared_ptr<core::FileContents>> Filesystem::ContentsFor(Inode& inode) {
  if (inode.contents) return inode.contents;
  SIGILFS_ASSIGN_OR_RETURN(Object object, OpenInode(inode));
  core::FileOpenMode how;
  how.write = !options_.read_only;
  how.keep_atime = NoAtime(false);
  auto file = object->OpenFile("", how);
  if (!file.ok() && how.write &&
      (file.status().sys_errno() == EACCES || file.status().sys_errno() == EROFS)) {
    how.write = false;  // writes will then fail, as they should
    file = object->OpenFile("", how);
  }
  SIGILFS_RETURN_IF_ERROR(file.status());
  auto contents = tree_->Contents(std::move(file).value(), "file " + std::to_string(inode.key_ino));
  if (!contents.ok()) {
    Log("%s", contents.status().ToString().c_str());
    return contents.status();
  }
  inode.contents = std::move(contents).value();
  inode.object = std::move(object);
  inode.is_open = true;
  open_files_.fetch_add(1, std::memory_order_relaxed);
  return inode.contents;
}

Status Filesystem::DoOpen(Inode& inode, int flags) {
  const bool writing = (flags & O_ACCMODE) != O_RDONLY;
  if (options_.read_only && writing) return Status::FromErrno(EROFS, "open");
  ReaderLock tree(tree_mu_);  // before inode.mu, as everywhere (TSan found one the other way)
  MutexLock lock(inode.mu);
  SIGILFS_ASSIGN_OR_RETURN(auto contents, ContentsFor(inode));
  ++inode.open_count;
  Status s = Status::Ok();
  if (writing && contents->sealed()) {
    s = Status(Code::kPermissionDenied, "open for writing: a sealed (verity) file", EPERM);
  } else if ((flags & O_TRUNC) != 0 && writing) {
    s = contents->Truncate(0);
  }
  if (!s.ok()) {
    --inode.open_count;
    if (inode.open_count == 0) CloseContentsLocked(inode);
    return s;
  }
  if (writing) ++inode.writers;
  return Status::Ok();
}

void Filesystem::CloseContentsLocked(Inode& inode) {
  if (inode.contents) open_files_.fetch_sub(1, std::memory_order_relaxed);
  inode.contents.reset();
  inode.is_open = false;
  inode.object.reset();
}

Status Filesystem::Chown(core::BackingDir& object, const Place& at, const Caller& caller,
                         std::optional<struct stat>* known) {
  if (!options_.set_owner) return Status::Ok();
  // New entries belong to whoever made them; in a setgid directory, to its group.
  const gid_t gid = (at.dir_st.st_mode & S_ISGID) != 0 ? at.dir_st.st_gid : caller.gid;
  // Already theirs (a root caller of a root daemon): nothing to change. Stores that cannot
  // change a symlink's owner (sshfs's follows the link) then still take symlinks.
  struct stat st {};
  bool have = known != nullptr && known->has_value();
  if (have) {
    st = **known;
  } else if (auto now = object.Stat(""); now.ok()) {
    st = *now;
    have = true;
  }
  if (have && st.st_uid == caller.uid && st.st_gid == gid) return Status::Ok();
  if (known != nullptr) known->reset();  // a chown may clear set-ID bits: no longer current
  return object.SetOwner("", caller.uid, gid);
}

core::Tree::Finish Filesystem::FinishFor(const Place& at, const NewModes& modes,
                                         const Caller& caller, std::optional<struct stat>* made) {
  return [this, &at, &modes, &caller, made](core::BackingDir& object) {
    // One stat of the new entry serves both, unless the owner changes.
    SIGILFS_ASSIGN_OR_RETURN(struct stat now, object.Stat(""));
    std::optional<struct stat> st = now;
    SIGILFS_RETURN_IF_ERROR(Chown(object, at, caller, &st));
    SIGILFS_RETURN_IF_ERROR(permissions::FinishNew(*tree_, object, modes, st ? &*st : nullptr));
    // Nothing changed it since: the maker need not ask again.
    if (made != nullptr && st && modes.access_acl.empty() && modes.default_acl.empty() &&
        (st->st_mode & 07777) == modes.mode)
      *made = st;
    return Status::Ok();
  };
}

Result<Entry> Filesystem::DoCreate(Inode& parent, const std::string& name, mode_t mode, int flags,
                                   const Caller& caller) {
  if (options_.read_only) return Status::FromErrno(EROFS, "create");
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name, options_.set_owner));
  const uint64_t since = absent_acls_.Now();
  SIGILFS_ASSIGN_OR_RETURN(NewModes modes,
                           ModesForNew(parent, at.dir->backing(), S_IFREG, mode, caller, since));
  std::optional<struct stat> made_st;  // the new file's attributes, if its making gave them
  SIGILFS_ASSIGN_OR_RETURN(core::Tree::NewFile made,
                           tree_->MakeFile(*at.dir, at.name, modes.initial(), (flags & O_EXCL) != 0,
                                           NoAtime(false), FinishFor(at, modes, caller, &made_st)));
  const std::string& stored = at.stored();
  if (DebugOps())
    Log("op create dir=%llu %s created=%d", (unsigned long long)parent.key_ino, stored.c_str(),
        made.created ? 1 : 0);
  const bool created = made.created;
  struct stat st;
  if (made.created && made_st) {
    st = *made_st;
  } else {
    SIGILFS_ASSIGN_OR_RETURN(st, made.object->Stat(""));
  }
  SIGILFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> inode,
                           Intern(st, parent.shared_from_this(), stored, *made.object, ""));
  if (created) MadeWithoutAcls(*inode, modes, since);
  Status failed = Status::Ok();
  std::shared_ptr<core::FileContents> contents;
  {
    MutexLock lock(inode->mu);
    if (!inode->contents) {
      // A file this create made is as `st` says (empty), read just now.
      auto contents = tree_->Contents(std::move(made.file), "file " + std::to_string(st.st_ino),
                                      created ? std::optional<uint64_t>(st.st_size) : std::nullopt);
      if (!contents.ok()) {
        failed = contents.status();
      } else {
        inode->contents = std::move(contents).value();
        inode->object = std::move(made.object);
        inode->is_open = true;
        open_files_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (failed.ok()) {
      ++inode->open_count;
      if ((flags & O_ACCMODE) != O_RDONLY) ++inode->writers;
      contents = inode->contents;
    }
  }
  if (!failed.ok()) {
    Forget(NodeId(*inode), 1);  // after inode->mu: Forget takes the table's lock and may try mu
    return failed;
  }
  // The node now holds a lookup and an open for the kernel: a failure gives both back.
  Status s = Status::Ok();
  if ((flags & O_TRUNC) != 0 && !created) s = contents->Truncate(0);
  struct stat attr {};
  if (s.ok() && !created && (flags & O_TRUNC) != 0) {  // otherwise `st` is as it is now
    auto now = at.dir->backing().Stat(stored);
    if (now.ok())
      st = *now;
    else
      s = now.status();
  }
  if (s.ok()) {
    auto translated = StatOf(st, at.dir->backing(), stored, inode.get());
    if (translated.ok())
      attr = *translated;
    else
      s = translated.status();
  }
  if (!s.ok()) {
    (void)DoRelease(*inode, (flags & O_ACCMODE) != O_RDONLY);
    Forget(NodeId(*inode), 1);
    return s;
  }
  return Entry{std::move(inode), attr};
}

Result<size_t> Filesystem::DoRead(Inode& inode, uint64_t offset, MutableByteSpan out) {
  std::shared_ptr<core::FileContents> c;
  {
    MutexLock lock(inode.mu);
    c = inode.contents;
  }
  if (!c) return Status::FromErrno(EBADF, "read");
  auto n = c->Read(offset, out);
  // The kernel takes a short reply for the end of the file (and would shrink its idea of the
  // size), so a read that stopped inside the file goes on: a page that cannot be read fails the
  // whole request, and bytes appended since the first part (a reader following a writer) are
  // part of the reply. Each round returns an error, nothing (cut meanwhile), or more bytes.
  while (n.ok() && *n < out.size() && offset + *n < c->size()) {
    auto more = c->Read(offset + *n, out.subspan(*n));
    if (!more.ok()) {
      n = more.status();
      break;
    }
    if (*more == 0) break;
    *n += *more;
  }
  if (!n.ok()) {
    // A damaged page fails every read of it (and the kernel retries page by page): log it once.
    std::string message = n.status().ToString();
    MutexLock lock(inode.mu);
    if (message != inode.last_read_error) {
      Log("read at %llu: %s", static_cast<unsigned long long>(offset), message.c_str());
      inode.last_read_error = std::move(message);
    }
  }
  return n;
}

Result<size_t> Filesystem::DoWrite(Inode& inode, uint64_t offset, core::Source& source,
                                   size_t length, bool append) {
  if (options_.read_only) return Status::FromErrno(EROFS, "write");
  MutexLock lock(inode.mu);
  std::shared_ptr<core::FileContents> c = inode.contents;
  if (!c) return Status::FromErrno(EBADF, "write");
  if (append) return c->Append(source, length);  // appenders serialize on inode.mu
  lock.Unlock();
  return c->Write(offset, source, length);
}

Result<std::optional<mode_t>> Filesystem::ClearSetId(Inode& inode, const Caller& caller) {
  if (!S_ISREG(inode.type)) return std::optional<mode_t>();
  // The mode without the bits the caller's change removes; nullopt if it keeps them all.
  auto cleared = [&caller](const struct stat& st) {
    return permissions::ClearedSetId(st, InGroupOf(caller), caller.fsetid);
  };
  {
    // An open file (every write's): its descriptor, without walking the path. Writes by callers
    // without CAP_FSETID all come here.
    MutexLock lock(inode.mu);
    if (inode.object) {
      SIGILFS_ASSIGN_OR_RETURN(struct stat st, inode.object->Stat(""));
      const std::optional<mode_t> mode = cleared(st);
      if (mode) SIGILFS_RETURN_IF_ERROR(inode.object->SetMode("", *mode));
      return mode;
    }
  }
  ReaderLock tree(tree_mu_);
  struct stat st;
  SIGILFS_ASSIGN_OR_RETURN(Object object, OpenInode(inode, &st));
  const std::optional<mode_t> mode = cleared(st);
  if (mode) SIGILFS_RETURN_IF_ERROR(object->SetMode("", *mode));
  return mode;
}

Status Filesystem::DoFallocate(Inode& inode, int mode, uint64_t offset, uint64_t length) {
  if (options_.read_only) return Status::FromErrno(EROFS, "fallocate");
  std::shared_ptr<core::FileContents> c;
  {
    MutexLock lock(inode.mu);
    c = inode.contents;
  }
  if (!c) return Status::FromErrno(EBADF, "fallocate");
  return c->Allocate(mode, offset, length);
}

Result<uint64_t> Filesystem::DoSeekData(Inode& inode, uint64_t offset, bool data) {
  std::shared_ptr<core::FileContents> c;
  {
    MutexLock lock(inode.mu);
    c = inode.contents;
  }
  if (!c) return Status::FromErrno(EBADF, "lseek");
  return c->SeekData(offset, data);
}

Status Filesystem::DoFlush(Inode& inode, bool* gave_up) {
  *gave_up = false;
  std::shared_ptr<core::FileContents> c;
  {
    MutexLock lock(inode.mu);
    c = inode.contents;
  }
  if (!c) return Status::Ok();
  Status s = c->Flush();
  // The closer of the only open file is told its data did not all reach the disk; what could
  // not be stored goes now, before close returns, so that what is read from here on is what
  // the cipher file holds, and the kernel can be told so while nobody is reading (a release
  // comes after close has returned). With the file open elsewhere the pages stay for a later
  // flush to retry; the last release gives them up.
  if (!s.ok()) {
    MutexLock lock(inode.mu);
    if (inode.open_count == 1 && inode.contents == c) *gave_up = c->DiscardUnstored();
  }
  return s;
}

std::vector<Filesystem::KernelName> Filesystem::NamesOf(Inode& inode) {
  ReaderLock tree(tree_mu_);
  std::vector<core::Node::Name> names;
  {
    MutexLock lock(inode.name_mu);
    names = inode.names;
  }
  std::vector<KernelName> out;
  for (const core::Node::Name& n : names) {
    auto dir = TreeDirOf(*n.parent);
    if (!dir.ok()) continue;
    auto name = tree_->Listed(**dir, n.stored);
    if (name.ok()) out.push_back({NodeId(*n.parent), name->plain()});
  }
  return out;
}

Status Filesystem::DoFsync(Inode& inode, bool datasync) {
  std::shared_ptr<core::FileContents> c;
  {
    MutexLock lock(inode.mu);
    c = inode.contents;
  }
  return c ? c->Sync(datasync) : Status::Ok();
}

Status Filesystem::DoRelease(Inode& inode, bool writer) {
  MutexLock lock(inode.mu);
  if (writer && inode.writers > 0) --inode.writers;
  if (--inode.open_count > 0 || !inode.contents) return Status::Ok();
  Status s = inode.contents->Flush();
  CloseContentsLocked(inode);
  return s;
}

namespace {

constexpr std::string_view kUserNamespace = "user.";

// Only `user.*` attributes and, once the kernel took them, POSIX ACLs are stored (encrypted);
// the others are not the vault's to keep.
Status CheckXattrName(const std::string& name, bool acls) {
  if (name.compare(0, kUserNamespace.size(), kUserNamespace) == 0) return Status::Ok();
  if (acls && acl::IsAclName(name)) return Status::Ok();
  return Status::FromErrno(EOPNOTSUPP, "xattr namespace");
}

const std::string kAccessAcl(acl::kAccessName);

// The KnownAbsentAcls bit of an ACL's attribute name; 0 for other names.
uint8_t AclBit(const std::string& name) {
  if (name == acl::kAccessName) return core::KnownAbsentAcls::kAccess;
  if (name == acl::kDefaultName) return core::KnownAbsentAcls::kDefault;
  return 0;
}

}  // namespace

Status Filesystem::SetAcl(Inode& inode, const std::string& name, ByteSpan value, int flags,
                          const Caller& caller) {
  auto parsed = acl::Parse(value);
  if (!parsed.ok()) return parsed.status();
  ReaderLock tree(tree_mu_);
  // The object itself: its open descriptor (`cp -a` sets the ACL before it closes the file), or
  // one of its own.
  Object object;
  {
    MutexLock lock(inode.mu);
    object = inode.object;
  }
  struct stat st;
  if (object) {
    SIGILFS_ASSIGN_OR_RETURN(st, object->Stat(""));
  } else {
    SIGILFS_ASSIGN_OR_RETURN(object, OpenInode(inode, &st));
  }
  // `cp -a` and `rsync -A` set an access ACL the mode says on every file they copy: on a file
  // known to have none stored, that is only a chmod.
  const bool absent = KnowsAbsentAcls() && core::KnownAbsentAcls::Known(inode, AclBit(name));
  Status s = permissions::SetAcl(*tree_, *object, st, name, *parsed, flags, acls(),
                                 InGroupOf(caller), absent);
  if (KnowsAbsentAcls()) {
    // An access ACL the mode says in full is not stored (permissions::SetAcl).
    mode_t perms = 0;
    const bool unstored = s.ok() && name == kAccessAcl && acl::EquivalentMode(*parsed, &perms);
    absent_acls_.Changed(inode, unstored ? core::KnownAbsentAcls::kAccess : 0);
  }
  return s;
}

Result<Filesystem::NewModes> Filesystem::ModesForNew(Inode& parent_node, core::BackingDir& parent,
                                                     mode_t type, mode_t mode, const Caller& caller,
                                                     uint64_t since) {
  using core::KnownAbsentAcls;
  const bool know = KnowsAbsentAcls();
  const bool none = know && KnownAbsentAcls::Known(parent_node, KnownAbsentAcls::kDefault);
  auto modes = permissions::ForNew(*tree_, parent, type, mode, caller.umask, acls(), none);
  if (!modes.ok()) (void)Logged("default ACL of directory", modes.status());
  if (know && !none && modes.ok() && !modes->parent_default_acl)
    absent_acls_.Learned(parent_node, KnownAbsentAcls::kDefault, since);
  return modes;
}

void Filesystem::MadeWithoutAcls(core::Node& made, const NewModes& modes, uint64_t since) {
  // Nothing inherited: the new entry has no ACL, as its parent had no default one.
  if (KnowsAbsentAcls() && !modes.parent_default_acl)
    absent_acls_.Learned(made, core::KnownAbsentAcls::kAccess | core::KnownAbsentAcls::kDefault,
                         since);
}

Status Filesystem::DoSetxattr(Inode& inode, const std::string& name, ByteSpan value, int flags,
                              const Caller& caller) {
  if (options_.read_only) return Status::FromErrno(EROFS, "setxattr");
  // Without ACLs, an access ACL that says no more than a mode is taken as that mode: `cp -a`,
  // `rsync -A` and `tar --acls` set one on every file they copy, and on a refusal fall back to
  // a chmod, one more round trip per file. Others are refused as the namespace is.
  SIGILFS_RETURN_IF_ERROR(CheckXattrName(name, acls() || name == kAccessAcl));
  if (acl::IsAclName(name)) {
    if (S_ISLNK(inode.type)) return Status::FromErrno(EOPNOTSUPP, "ACL on a symlink");
    return SetAcl(inode, name, value, flags, caller);
  }
  if (S_ISLNK(inode.type)) return Status::FromErrno(EPERM, "setxattr on a symlink");
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(auto object, OpenInode(inode));
  return tree_->SetXattr(*object, name, value, flags);
}

Result<std::vector<uint8_t>> Filesystem::DoGetxattr(Inode& inode, const std::string& name) {
  SIGILFS_RETURN_IF_ERROR(CheckXattrName(name, acls()));
  if (S_ISLNK(inode.type)) return Status::FromErrno(ENODATA, "getxattr");
  // `ls -l` asks for every file's access ACL: one known not to be there costs no store call.
  const uint8_t bit = KnowsAbsentAcls() ? AclBit(name) : 0;
  if (bit != 0 && core::KnownAbsentAcls::Known(inode, bit))
    return Status::FromErrno(ENODATA, "getxattr");
  const uint64_t since = bit != 0 ? absent_acls_.Now() : 0;
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(auto object, OpenInode(inode));
  auto value = tree_->GetXattr(*object, name);
  if (!value.ok()) (void)Logged("extended attribute", value.status());
  if (bit != 0 && !value.ok() && value.status().sys_errno() == ENODATA)
    absent_acls_.Learned(inode, bit, since);
  return value;
}

Result<std::string> Filesystem::DoListxattr(Inode& inode) {
  if (S_ISLNK(inode.type)) return std::string();
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(auto object, OpenInode(inode));
  SIGILFS_ASSIGN_OR_RETURN(
      std::vector<std::string> names,
      tree_->ListXattrs(*object, [](const std::string& stored, const Status& s) {
        Log("xattr %s: %s (not listed)", stored.c_str(), s.ToString().c_str());
      }));
  std::string out;
  for (const std::string& n : names) {
    out += n;
    out.push_back('\0');
  }
  return out;
}

Status Filesystem::DoRemovexattr(Inode& inode, const std::string& name) {
  if (options_.read_only) return Status::FromErrno(EROFS, "removexattr");
  // Without ACLs none is ever stored: removing one finds nothing, which copying tools (`cp -a`
  // on a directory removes its default ACL) take as done, where a refusal is an error to them.
  if (!acls() && acl::IsAclName(name)) return Status::FromErrno(ENODATA, "no ACL (-o acl)");
  SIGILFS_RETURN_IF_ERROR(CheckXattrName(name, acls()));
  if (S_ISLNK(inode.type)) return Status::FromErrno(ENODATA, "removexattr");
  if (acl::IsAclName(name)) {
    // Known not to be there (`cp -a` removes every directory's default ACL): nothing changes.
    if (KnowsAbsentAcls() && core::KnownAbsentAcls::Known(inode, AclBit(name))) return Status::Ok();
    ReaderLock tree(tree_mu_);
    struct stat st;
    SIGILFS_ASSIGN_OR_RETURN(auto object, OpenInode(inode, &st));
    Status s = permissions::RemoveAcl(*tree_, *object, st, name);
    if (KnowsAbsentAcls()) absent_acls_.Changed(inode, s.ok() ? AclBit(name) : 0);
    return s;
  }
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(auto object, OpenInode(inode));
  return tree_->RemoveXattr(*object, name);
}

Result<core::verity::Digest> Filesystem::DoEnableVerity(Inode& inode, ByteSpan salt) {
  if (options_.read_only) return Status::FromErrno(EROFS, "enable verity");
  std::shared_ptr<core::FileContents> c;
  // As fs-verity: a file open for writing (by anyone) cannot be sealed. The kernel sends the
  // release of a closed descriptor after close() has returned, so a writer that has just
  // closed may still be counted: give such releases a moment to arrive.
  for (int waited_ms = 0;; waited_ms += 10) {
    {
      MutexLock lock(inode.mu);
      if (S_ISDIR(inode.type)) return Status::FromErrno(EISDIR, "enable verity: a directory");
      if (!S_ISREG(inode.type)) return Status::FromErrno(EINVAL, "enable verity: not a file");
      if (inode.writers == 0) {
        c = inode.contents;
        break;
      }
    }
    if (waited_ms >= 1000) return Status::FromErrno(ETXTBSY, "enable verity");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!c) return Status::FromErrno(EBADF, "enable verity");
  auto digest = c->EnableVerity(salt);
  if (!digest.ok()) Log("enable verity: %s", digest.status().ToString().c_str());
  return digest;
}

Result<core::verity::Descriptor> Filesystem::DoVerityDescriptor(Inode& inode) {
  std::shared_ptr<core::FileContents> c;
  {
    MutexLock lock(inode.mu);
    c = inode.contents;
  }
  if (!c) return Status::FromErrno(ENODATA, "measure verity");
  return c->VerityDescriptor();
}

bool Filesystem::DoIsSealed(Inode& inode) {
  MutexLock lock(inode.mu);
  return inode.contents != nullptr && inode.contents->sealed();
}

Result<struct stat> Filesystem::DoSetattr(Inode& inode, const struct stat& attr, int to_set) {
  if (options_.read_only) return Status::FromErrno(EROFS, "setattr");
  if ((to_set & kSetSize) != 0) {
    ReaderLock tree(tree_mu_);  // before inode.mu
    MutexLock lock(inode.mu);
    const bool was_open = inode.contents != nullptr;
    SIGILFS_ASSIGN_OR_RETURN(auto c, ContentsFor(inode));
    Status s = c->Truncate(static_cast<uint64_t>(attr.st_size));
    if (!was_open) CloseContentsLocked(inode);
    SIGILFS_RETURN_IF_ERROR(s);
  }
  if ((to_set & (kSetMode | kSetUid | kSetGid | kSetAtime | kSetMtime)) != 0) {
    ReaderLock tree(tree_mu_);
    // The object itself (an unlinked open file too): its open descriptor, or one of its own.
    Object object;
    {
      MutexLock lock(inode.mu);
      object = inode.object;
    }
    if (!object) {
      SIGILFS_ASSIGN_OR_RETURN(object, OpenInode(inode));
    }
    if ((to_set & kSetMode) != 0 && !S_ISLNK(inode.type)) {
      const Status s = permissions::Chmod(
          *tree_, *object, inode.type, attr.st_mode, acls(),
          KnowsAbsentAcls() && core::KnownAbsentAcls::Known(inode, core::KnownAbsentAcls::kAccess));
      SIGILFS_RETURN_IF_ERROR(Logged("access ACL", s));
    }
    if ((to_set & (kSetUid | kSetGid)) != 0) {
      const uid_t uid = (to_set & kSetUid) ? attr.st_uid : static_cast<uid_t>(-1);
      const gid_t gid = (to_set & kSetGid) ? attr.st_gid : static_cast<gid_t>(-1);
      // A symlink given the owner it has (cp -a, tar) is left as it is: a store that cannot
      // change a symlink's owner (sshfs's chown follows the link) still takes the copy. A file
      // is changed all the same, for what a chown clears.
      bool unchanged = false;
      if (S_ISLNK(inode.type)) {
        auto st = object->Stat("");
        unchanged = st.ok() && (uid == static_cast<uid_t>(-1) || uid == st->st_uid) &&
                    (gid == static_cast<gid_t>(-1) || gid == st->st_gid);
      }
      if (!unchanged) SIGILFS_RETURN_IF_ERROR(object->SetOwner("", uid, gid));
    }
    if ((to_set & (kSetAtime | kSetMtime)) != 0) {
      struct timespec ts[2];
      ts[0] = (to_set & kSetAtime) ? attr.st_atim : timespec{0, UTIME_OMIT};
      ts[1] = (to_set & kSetMtime) ? attr.st_mtim : timespec{0, UTIME_OMIT};
      if ((to_set & kSetAtimeNow) != 0) ts[0] = {0, UTIME_NOW};
      if ((to_set & kSetMtimeNow) != 0) ts[1] = {0, UTIME_NOW};
      // Dirty pages written back later would move the cipher file's mtime past the time being
      // set (cp -a and tar set times on the open file, then close it): write them back first.
      std::shared_ptr<core::FileContents> open;
      {
        MutexLock lock(inode.mu);
        open = inode.contents;
      }
      if (open) SIGILFS_RETURN_IF_ERROR(open->Flush());
      if (S_ISLNK(inode.type)) {
        // A symlink's own times: through its directory, without following it.
        core::Node::Name where;
        {
          MutexLock lock(inode.name_mu);
          if (inode.names.empty()) return Status::FromErrno(ENOENT, "utimens");
          where = inode.names.front();
        }
        SIGILFS_ASSIGN_OR_RETURN(Object dir, OpenInode(*where.parent));
        SIGILFS_RETURN_IF_ERROR(dir->SetTimes(where.stored, ts));
      } else {
        SIGILFS_RETURN_IF_ERROR(object->SetTimes("", ts));
      }
    }
  }
  return DoGetattr(inode);
}

Result<std::string> Filesystem::DoReadlink(Inode& inode) {
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(auto object, OpenInode(inode));
  auto target = tree_->ReadLink(*object);
  if (!target.ok()) Log("readlink: %s", target.status().ToString().c_str());
  return target;
}

Result<Entry> Filesystem::DoMknod(Inode& parent, const std::string& name, mode_t mode, dev_t rdev,
                                  const Caller& caller) {
  if (options_.read_only) return Status::FromErrno(EROFS, "mknod");
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name, options_.set_owner));
  const uint64_t since = absent_acls_.Now();
  SIGILFS_ASSIGN_OR_RETURN(
      NewModes modes, ModesForNew(parent, at.dir->backing(), mode & S_IFMT, mode, caller, since));
  if (!S_ISREG(mode)) permissions::WithoutAcl(modes);  // no `user.*` attributes there
  SIGILFS_RETURN_IF_ERROR(tree_->MakeNode(*at.dir, at.name, (mode & S_IFMT) | modes.initial(), rdev,
                                          FinishFor(at, modes, caller)));
  if (DebugOps())
    Log("op mknod dir=%llu %s", (unsigned long long)parent.key_ino, at.stored().c_str());
  auto made = EntryAt(parent.shared_from_this(), at.dir->backing(), at.stored());
  if (made.ok()) MadeWithoutAcls(*made->inode, modes, since);
  return made;
}

Result<Entry> Filesystem::DoMkdir(Inode& parent, const std::string& name, mode_t mode,
                                  const Caller& caller) {
  if (options_.read_only) return Status::FromErrno(EROFS, "mkdir");
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name, /*with_dir_stat=*/true));
  const uint64_t since = absent_acls_.Now();
  SIGILFS_ASSIGN_OR_RETURN(NewModes modes,
                           ModesForNew(parent, at.dir->backing(), S_IFDIR, mode, caller, since));
  // A setgid directory passes its bit on to subdirectories, as on ext4.
  modes.mode |= at.dir_st.st_mode & S_ISGID;
  SIGILFS_RETURN_IF_ERROR(
      tree_->MakeDir(*at.dir, at.name, modes.initial(), FinishFor(at, modes, caller)));
  if (DebugOps())
    Log("op mkdir dir=%llu %s", (unsigned long long)parent.key_ino, at.stored().c_str());
  auto made = EntryAt(parent.shared_from_this(), at.dir->backing(), at.stored());
  if (made.ok()) MadeWithoutAcls(*made->inode, modes, since);
  return made;
}

Result<Entry> Filesystem::DoSymlink(Inode& parent, const std::string& name,
                                    const std::string& target, const Caller& caller) {
  if (options_.read_only) return Status::FromErrno(EROFS, "symlink");
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name, options_.set_owner));
  SIGILFS_RETURN_IF_ERROR(
      tree_->MakeSymlink(*at.dir, at.name, target,
                         [&](core::BackingDir& object) { return Chown(object, at, caller); }));
  if (DebugOps())
    Log("op symlink dir=%llu %s", (unsigned long long)parent.key_ino, at.stored().c_str());
  return EntryAt(parent.shared_from_this(), at.dir->backing(), at.stored());
}

Result<Entry> Filesystem::DoLink(Inode& inode, Inode& new_parent, const std::string& new_name) {
  if (options_.read_only) return Status::FromErrno(EROFS, "link");
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(new_parent, new_name));
  // The object by its first name that still leads to it (OpenInode drops the others).
  SIGILFS_RETURN_IF_ERROR(OpenInode(inode).status());
  core::Node::Name from;
  {
    MutexLock lock(inode.name_mu);
    if (inode.names.empty()) return Errno(ENOENT, "link of a removed file");
    from = inode.names.front();
  }
  SIGILFS_ASSIGN_OR_RETURN(auto from_dir, TreeDirOf(*from.parent));
  SIGILFS_ASSIGN_OR_RETURN(core::EntryName from_name, tree_->Listed(*from_dir, from.stored));
  SIGILFS_RETURN_IF_ERROR(tree_->Link(*from_dir, from_name, *at.dir, at.name));
  return EntryAt(new_parent.shared_from_this(), at.dir->backing(), at.stored());
}

Status Filesystem::DoUnlink(Inode& parent, const std::string& name) {
  if (options_.read_only) return Status::FromErrno(EROFS, "unlink");
  WriterLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name));
  std::shared_ptr<core::Node> inode;
  core::Tree::Removed removed = KeepOnRemoval(&inode, parent, at.stored());
  SIGILFS_RETURN_IF_ERROR(tree_->Unlink(*at.dir, at.name, &removed));
  nodes_->DropName(parent, at.stored());
  if (DebugOps())
    Log("op unlink dir=%llu %s ino=%llu node=%p", (unsigned long long)parent.key_ino,
        at.stored().c_str(), (unsigned long long)removed.st.st_ino,
        static_cast<void*>(inode.get()));
  if (inode) {
    // Other hard links (if any) keep reaching it.
    MutexLock lock(inode->name_mu);
    RemoveName(*inode, parent, at.stored());
    KeepRemoved(*inode, std::move(removed.object), removed.target);
  } else {
    tree_->ReleaseTarget(removed.target);
  }
  return Status::Ok();
}

Status Filesystem::DoRmdir(Inode& parent, const std::string& name) {
  if (options_.read_only) return Status::FromErrno(EROFS, "rmdir");
  WriterLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name));
  std::shared_ptr<core::Node> inode;
  core::Tree::Removed removed = KeepOnRemoval(&inode, parent, at.stored());
  {
    WriterLock no_closes(removal_mu_);
    SIGILFS_RETURN_IF_ERROR(tree_->RemoveDir(*at.dir, at.name, &removed));
    // Its kept handle now names a removed directory: closed here, beside no other removal.
    if (inode && open_dirs_) (void)open_dirs_->Close(*inode);
  }
  nodes_->DropName(parent, at.stored());
  if (inode) {
    MutexLock lock(inode->name_mu);
    RemoveName(*inode, parent, at.stored());
    KeepRemoved(*inode, std::move(removed.object));
  }
  return Status::Ok();
}

Status Filesystem::DoRename(Inode& parent, const std::string& name, Inode& new_parent,
                            const std::string& new_name, unsigned int flags) {
  if (options_.read_only) return Status::FromErrno(EROFS, "rename");
  if ((flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) != 0)
    return Status::FromErrno(EINVAL, "rename");
  WriterLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place from, Resolve(parent, name));
  SIGILFS_ASSIGN_OR_RETURN(Place to, Resolve(new_parent, new_name));
  unsigned how = 0;
  if ((flags & RENAME_NOREPLACE) != 0) how |= core::BackingDir::kNoReplace;
  if ((flags & RENAME_EXCHANGE) != 0) how |= core::BackingDir::kExchange;
  std::shared_ptr<core::Node> replaced;
  core::Tree::Renamed renamed;
  if ((flags & RENAME_EXCHANGE) == 0)
    renamed.replaced = KeepOnRemoval(&replaced, new_parent, to.stored());
  {
    // A rename over a directory removes it on the store, which walks it as rmdir does
    // (DoRmdir): not beside the close of a removed object.
    WriterLock no_closes(removal_mu_);
    SIGILFS_RETURN_IF_ERROR(tree_->Rename(*from.dir, from.name, *to.dir, to.name, how, &renamed));
    if (replaced && open_dirs_) (void)open_dirs_->Close(*replaced);  // as in DoRmdir
  }
  if (!renamed.changed) return Status::Ok();  // two names of one file
  const std::string& old_stored = from.stored();
  const std::string& new_stored = to.stored();
  const bool target_existed = renamed.replaced.st.st_ino != 0;
  if (DebugOps())
    Log("op rename dir=%llu %s ino=%llu -> dir=%llu %s replaced=%d",
        (unsigned long long)parent.key_ino, old_stored.c_str(),
        (unsigned long long)renamed.moved.st_ino, (unsigned long long)new_parent.key_ino,
        new_stored.c_str(), target_existed ? 1 : 0);
  // Renames one of an inode's names (or adds it, if the inode was not known by the old one).
  auto move_to = [](const std::shared_ptr<core::Node>& inode, core::Node& from_dir,
                    const std::string& from, core::Node& to_dir, const std::string& to) {
    if (!inode) return;
    MutexLock lock(inode->name_mu);
    RemoveName(*inode, from_dir, from);
    AddName(*inode, to_dir.shared_from_this(), to);
  };
  if ((flags & RENAME_EXCHANGE) != 0) {
    // Side files of long names belong to the names, which stay where they are.
    auto a = nodes_->Find(renamed.moved, parent, old_stored);
    auto b = nodes_->Find(renamed.replaced.st, new_parent, new_stored);
    nodes_->MoveName(parent, old_stored, new_parent, new_stored, /*exchange=*/true);
    move_to(a, parent, old_stored, new_parent, new_stored);
    move_to(b, new_parent, new_stored, parent, old_stored);
    return Status::Ok();
  }
  if (replaced) {
    MutexLock lock(replaced->name_mu);
    RemoveName(*replaced, new_parent, new_stored);
    KeepRemoved(*replaced, std::move(renamed.replaced.object), renamed.replaced.target);
  } else {
    tree_->ReleaseTarget(renamed.replaced.target);
  }
  std::shared_ptr<core::Node> moved = nodes_->Find(renamed.moved, parent, old_stored);
  nodes_->MoveName(parent, old_stored, new_parent, new_stored, /*exchange=*/false);
  move_to(moved, parent, old_stored, new_parent, new_stored);
  return Status::Ok();
}

Result<struct statvfs> Filesystem::DoStatfs() {
  SIGILFS_ASSIGN_OR_RETURN(struct statvfs st, tree_->StatFs());
  st.f_namemax = core::kMaxPlainNameLength;
  return st;
}

Result<Filesystem::DirHandle*> Filesystem::DoOpendir(Inode& inode) {
  auto handle = std::make_unique<DirHandle>();
  {
    ReaderLock tree(tree_mu_);
    struct stat st;
    SIGILFS_ASSIGN_OR_RETURN(Object object, OpenInode(inode, &st));
    if (!S_ISDIR(st.st_mode)) return Errno(ENOTDIR, "opendir");
    SIGILFS_ASSIGN_OR_RETURN(handle->listing, object->OpenListing(NoAtime(true)));
    SIGILFS_ASSIGN_OR_RETURN(handle->iv, DirIvOf(inode, *object));
  }
  DirHandle* kept = handle.get();
  MutexLock lock(dir_handles_mu_);
  dir_handles_.emplace(kept, std::move(handle));
  return kept;
}

void Filesystem::DoReleasedir(DirHandle* handle) {
  std::unique_ptr<DirHandle> released;  // closed outside the lock
  MutexLock lock(dir_handles_mu_);
  if (auto it = dir_handles_.find(handle); it != dir_handles_.end()) {
    released = std::move(it->second);
    dir_handles_.erase(it);
  }
}

void Filesystem::FlushAll() {
  for (const std::shared_ptr<core::Node>& node : nodes_->Nodes()) {
    Inode* inode = static_cast<Inode*>(node.get());
    std::shared_ptr<core::FileContents> c;
    {
      MutexLock lock(inode->mu);
      c = inode->contents;
    }
    if (c) {
      Status s = c->Flush();
      if (!s.ok()) Log("flush on unmount: %s", s.ToString().c_str());
    }
  }
}

}  // namespace sigilfs::fuse
