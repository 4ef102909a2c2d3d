// The mounted filesystem's operations over the cipher directory (names, inodes, contents).
#include "filesystem.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string_view>
#include <thread>
#include <utility>

#include "log.h"
#include "sigilfs/core/acl.h"
#include "sigilfs/core/names.h"

namespace sigilfs::fuse {

namespace acl = core::acl;
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

std::shared_ptr<Inode> Filesystem::Get(uint64_t nodeid) const {
  // The kernel only names node ids it was given and has not forgotten: the table holds them.
  return AsInode(nodes_->Get(nodeid));
}

void Filesystem::Forget(uint64_t nodeid, uint64_t n) {
  std::vector<std::shared_ptr<core::Node>> dropped;  // released outside the table's lock
  nodes_->Forget(nodeid, n, &dropped);
  // A node only this holds closes now: if it kept a removed object, never beside a rmdir on
  // the store (removal_mu_).
  bool closes_removed = std::any_of(dropped.begin(), dropped.end(), [](const auto& node) {
    return node.use_count() == 1 && node->keeps_removed.load(std::memory_order_acquire);
  });
  if (!closes_removed) return;
  ReaderLock closing(removal_mu_);
  dropped.clear();
}

NodeStats Filesystem::node_stats() const {
  const core::NodeCounts counts = nodes_->counts();
  return {counts.nodes,
          counts.remembered,
          handle_lookups_.load(std::memory_order_relaxed),
          getattrs_.load(std::memory_order_relaxed),
          getxattrs_.load(std::memory_order_relaxed),
          lookups_.load(std::memory_order_relaxed)};
}

Result<Object> Filesystem::OpenInode(const core::Node& inode, struct stat* st_out) const {
  auto& node = const_cast<core::Node&>(inode);
  // A node is reached by path, so a name that went stale (its entry replaced behind our back)
  // would silently resolve to another object: check that what was opened is this node's
  // cipher inode, and drop names that no longer lead to it.
  for (;;) {
    std::string first;
    if (&inode != root_.get()) {
      MutexLock lock(node.name_mu);
      if (node.names.empty()) {
        if (!node.removed) return Status(Code::kNotFound, "unlinked");
        // Removed here while the kernel holds it: through the handle kept for it.
        if (st_out != nullptr) {
          SIGILFS_ASSIGN_OR_RETURN(*st_out, node.removed->Stat(""));
        }
        return node.removed;
      }
      first = node.names.front().stored;
    }
    auto object = root_dir_->OpenObject(&inode == root_.get() ? "" : PathLocked(inode));
    if (!object.ok()) {
      const int e = object.status().sys_errno();
      if (e != ENOENT && e != ENOTDIR && e != ELOOP) return object.status();
    } else if (auto st = (*object)->Stat("");
               st.ok() && st->st_dev == inode.key_dev &&
               (keeps_inode_numbers_ ? st->st_ino == inode.key_ino
                                     : (st->st_mode & S_IFMT) == inode.type)) {
      if (st_out != nullptr) *st_out = *st;
      return Object(std::move(object).value());
    }
    if (&inode == root_.get()) return Status(Code::kIoError, "the cipher root moved");
    MutexLock lock(node.name_mu);
    if (!node.names.empty() && node.names.front().stored == first)
      node.names.erase(node.names.begin());  // stale: try the next name, if any
  }
}

Result<DirIv> Filesystem::DirIvOf(core::Node& dir, core::BackingDir& backing) {
  // Cached on the node, or read at every use in shared mode (core::TreeOptions::shared).
  return tree_->DirIvOf(dir, backing, [this, &dir] {
    tree_mu_.AssertHeld();  // the caller's, shared
    return PathLocked(dir);
  });
}

Result<std::unique_ptr<core::Tree::Dir>> Filesystem::TreeDirOf(core::Node& dir,
                                                               struct stat* st_out) {
  struct stat st;
  SIGILFS_ASSIGN_OR_RETURN(Object object, OpenInode(dir, &st));
  if (!S_ISDIR(st.st_mode)) return Errno(ENOTDIR, "lookup");
  SIGILFS_ASSIGN_OR_RETURN(DirIv iv, DirIvOf(dir, *object));
  if (st_out != nullptr) *st_out = st;
  // Named in errors by its inode number: no plaintext name reaches the daemon's log.
  return tree_->DirOf(std::move(object), iv, "inode " + std::to_string(st.st_ino));
}

Result<Filesystem::Place> Filesystem::Resolve(Inode& dir, const std::string& name) {
  Place at;
  SIGILFS_ASSIGN_OR_RETURN(at.dir, TreeDirOf(dir, &at.dir_st));
  SIGILFS_ASSIGN_OR_RETURN(at.name, tree_->Resolve(*at.dir, name));
  return at;
}

uint64_t Filesystem::PersistentId(core::BackingDir& at, const std::string& at_name,
                                  const struct stat& st) {
  auto handle = at.Handle(at_name);
  // FILEID_INO32_GEN: the 32-bit inode number, then the generation.
  if (!handle.ok() || handle->type != 1 || handle->bytes.size() != 8) return 0;
  uint32_t ino = 0, gen = 0;
  std::memcpy(&ino, handle->bytes.data(), 4);
  std::memcpy(&gen, handle->bytes.data() + 4, 4);
  if (ino != st.st_ino) return 0;
  const uint64_t id = (uint64_t{gen & 0x7fffffffU} << 32) | ino;
  return id > 1 ? id : 0;  // 0 and 1 (the root) are the kernel's
}

Result<std::shared_ptr<Inode>> Filesystem::Intern(const struct stat& st,
                                                  const std::shared_ptr<core::Node>& parent,
                                                  const std::string& stored, core::BackingDir& at,
                                                  const std::string& at_name) {
  // A table hit found under another name is this object if that name still leads to it.
  auto still_there = [this](const core::Node::Name& first, const struct stat& now_st) {
    tree_mu_.AssertHeld();  // the caller's, shared
    auto dir = OpenInode(*first.parent);
    if (!dir.ok()) return false;
    auto now = (*dir)->Stat(first.stored);
    return now.ok() && now->st_dev == now_st.st_dev && now->st_ino == now_st.st_ino;
  };
  // An id that persists across mounts, where the store's file handles give one.
  auto persistent = [&] { return keeps_inode_numbers_ ? PersistentId(at, at_name, st) : 0; };
  return AsInode(nodes_->Intern(st, parent, stored, still_there, persistent));
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

Result<Entry> Filesystem::EntryAt(const std::shared_ptr<core::Node>& parent, core::BackingDir& dir,
                                  const std::string& stored) {
  SIGILFS_ASSIGN_OR_RETURN(struct stat st, dir.Stat(stored));
  SIGILFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> inode, Intern(st, parent, stored, dir, stored));
  auto attr = StatOf(st, dir, stored, inode.get());
  if (!attr.ok()) {
    const Code code = attr.status().code();
    if (S_ISREG(st.st_mode) && (code == Code::kCorrupt || code == Code::kAuthFailed)) {
      // A file whose size cannot be established (a sealed file with a damaged record or
      // trailer) is still an entry, so it can be unlinked, renamed or replaced. The kernel does
      // not cache its attributes: a stat asks again and gets the error, and opening it fails.
      st.st_size = 0;
      return Entry{std::move(inode), st, true};
    }
    Forget(NodeId(*inode), 1);
    return attr.status();
  }
  return Entry{std::move(inode), *attr};
}

Result<Entry> Filesystem::DoLookup(Inode& parent, const std::string& name) {
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name));
  return EntryAt(parent.shared_from_this(), at.dir->backing(), at.stored());
}

namespace {
Status Stale(const char* why) { return Status(Code::kIoError, why, ESTALE); }
}  // namespace

Result<Entry> Filesystem::DoLookupHandle(uint64_t nodeid) {
  handle_lookups_.fetch_add(1, std::memory_order_relaxed);
  ReaderLock tree(tree_mu_);
  std::shared_ptr<core::Node> node = nodes_->Known(nodeid);
  if (!node) {
    // Only ids made from the store's file handles can name an object no node holds.
    if ((nodeid & (uint64_t{1} << 63)) != 0) return Stale("file handle of a node no longer known");
    return ResolvePersistentId(nodeid);
  }
  return EntryOf(node);
}

namespace {
// Entries of the vault's tree that a search for a file may visit: an entry name of the vault's
// own (a `.` in it) only if it is a long name's entry.
bool IsEntryName(std::string_view stored) {
  return !core::NameCodec::IsReserved(stored) || core::NameCodec::IsLongName(stored);
}
}  // namespace

std::vector<std::string> Filesystem::PathInVault(core::BackingDir& object) const {
  return root_dir_->PathTo(object);
}

std::vector<std::string> Filesystem::FindInVault(uint64_t ino) const {
  // Breadth first, by the directory entries' own inode numbers (no stat), never following a
  // symlink; at most kFindBudget entries, so that a forged handle costs a bounded search.
  constexpr size_t kFindBudget = 4'000'000;
  size_t seen = 0;
  std::deque<std::string> dirs{""};
  while (!dirs.empty() && seen < kFindBudget) {
    const std::string dir = std::move(dirs.front());
    dirs.pop_front();
    auto d = root_dir_->OpenObject(dir);
    if (!d.ok()) continue;
    std::vector<std::string> found;
    (void)(*d)->List(0, [&](const core::BackingEntry& e) {
      if (!IsEntryName(e.name)) return true;
      ++seen;
      if (e.ino == ino && !S_ISDIR(e.type) && e.type != 0) {
        found.push_back(e.name);
        return false;
      }
      if (S_ISDIR(e.type) || e.type == 0) dirs.push_back(dir.empty() ? e.name : dir + "/" + e.name);
      return true;
    });
    if (!found.empty()) {
      std::vector<std::string> parts;
      for (size_t at = 0; !dir.empty() && at <= dir.size();) {
        const size_t slash = std::min(dir.find('/', at), dir.size());
        parts.push_back(dir.substr(at, slash - at));
        at = slash + 1;
      }
      parts.push_back(found.front());
      return parts;
    }
  }
  return {};
}

Result<Entry> Filesystem::ResolvePersistentId(uint64_t nodeid) {
  // The backing handle the id was made from, with either top bit of the generation.
  const auto ino = static_cast<uint32_t>(nodeid);
  std::unique_ptr<core::BackingDir> object;
  for (const uint32_t top : {0U, 0x80000000U}) {
    core::BackingDir::ObjectHandle handle;
    handle.type = 1;  // FILEID_INO32_GEN
    handle.bytes.resize(8);
    const uint32_t gen = static_cast<uint32_t>(nodeid >> 32) | top;
    std::memcpy(handle.bytes.data(), &ino, 4);
    std::memcpy(handle.bytes.data() + 4, &gen, 4);
    if (auto opened = root_dir_->OpenByHandle(handle); opened.ok()) {
      object = std::move(opened).value();
      break;
    }
  }
  if (!object) return Stale("no such object (or no CAP_DAC_READ_SEARCH to find it)");
  auto st = object->Stat("");
  if (!st.ok() || st->st_dev != root_->key_dev || st->st_ino != ino)
    return Stale("not an object of the vault's filesystem");
  // Where it is: the path the backing filesystem knows it by (a directory's always, as it is
  // reconnected to its parents; a file's while its directory entry is cached), checked below by
  // walking it from the cipher root to this very object, which is what proves the object is the
  // vault's (not another vault's on the same filesystem, nor anything else there). Otherwise the
  // vault is searched for the inode number.
  auto found = WalkToPersistentId(PathInVault(*object), *st, nodeid);
  if (!found.ok() && !S_ISDIR(st->st_mode))
    found = WalkToPersistentId(FindInVault(st->st_ino), *st, nodeid);
  return found;
}

Result<Entry> Filesystem::WalkToPersistentId(const std::vector<std::string>& parts,
                                             const struct stat& st, uint64_t nodeid) {
  if (parts.empty()) return Stale("not found inside the vault");
  // Each level interned as a lookup would (one reference each, given back below but for the
  // object's own, which goes to the kernel), so the object's node has its name and parents.
  std::vector<Entry> chain;
  auto stale = [&](const char* why) {
    for (const Entry& e : chain) Forget(NodeId(*e.inode), 1);
    return Stale(why);
  };
  std::shared_ptr<core::Node> parent = root_;
  Object dir = root_dir_;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& stored = parts[i];
    if (stored.empty() || !IsEntryName(stored)) return stale("not a name of the vault");
    auto entry = EntryAt(parent, *dir, stored);
    if (!entry.ok()) return stale("the path does not lead to it");
    chain.push_back(std::move(entry).value());
    if (i + 1 < parts.size()) {
      if (!S_ISDIR(chain.back().attr.st_mode)) return stale("the path does not lead to it");
      auto sub = dir->OpenDir(stored);
      if (!sub.ok()) return stale("the path does not lead to it");
      dir = std::move(sub).value();
      parent = chain.back().inode;
    }
  }
  const Entry& last = chain.back();
  if (last.inode->key_dev != st.st_dev || last.inode->key_ino != st.st_ino ||
      NodeId(*last.inode) != nodeid)
    return stale("the path leads to another object");
  Entry found = last;
  chain.pop_back();
  for (const Entry& e : chain) Forget(NodeId(*e.inode), 1);
  return found;
}

Result<Entry> Filesystem::DoLookupParent(Inode& dir) {
  ReaderLock tree(tree_mu_);
  if (&dir == root_.get()) return EntryOf(root_);
  // Drops names that no longer lead to it, so the first one is its parent.
  SIGILFS_RETURN_IF_ERROR(OpenInode(dir).status());
  std::shared_ptr<core::Node> parent;
  {
    MutexLock lock(dir.name_mu);
    if (dir.names.empty()) return Stale("the directory was removed");
    parent = dir.names.front().parent;
  }
  return EntryOf(parent);
}

Result<Entry> Filesystem::EntryOf(const std::shared_ptr<core::Node>& node) {
  if (node == root_) {
    SIGILFS_ASSIGN_OR_RETURN(struct stat st, root_dir_->Stat(""));
    return Entry{root_, st};  // the kernel counts no lookups of the root
  }
  // OpenInode drops the names that no longer lead to the node; the first left leads to it.
  if (auto object = OpenInode(*node); !object.ok())
    return object.status().code() == Code::kNotFound ? Stale("unlinked") : object.status();
  core::Node::Name first;
  {
    MutexLock lock(node->name_mu);
    if (node->names.empty()) return Stale("unlinked");
    first = node->names.front();
  }
  SIGILFS_ASSIGN_OR_RETURN(Object dir, OpenInode(*first.parent));
  SIGILFS_ASSIGN_OR_RETURN(Entry entry, EntryAt(first.parent, *dir, first.stored));
  if (entry.inode != node) {  // replaced meanwhile: the handle's object is gone
    Forget(NodeId(*entry.inode), 1);
    return Stale("the name now leads to another object");
  }
  return entry;
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
                                         const Caller& caller) {
  return [this, &at, &modes, &caller](core::BackingDir& object) {
    // One stat of the new entry serves both, unless the owner changes.
    SIGILFS_ASSIGN_OR_RETURN(struct stat now, object.Stat(""));
    std::optional<struct stat> st = now;
    SIGILFS_RETURN_IF_ERROR(Chown(object, at, caller, &st));
    return FinishNew(object, modes, st ? &*st : nullptr);
  };
}

Result<Entry> Filesystem::DoCreate(Inode& parent, const std::string& name, mode_t mode, int flags,
                                   const Caller& caller) {
  if (options_.read_only) return Status::FromErrno(EROFS, "create");
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name));
  SIGILFS_ASSIGN_OR_RETURN(NewModes modes, ModesForNew(at.dir->backing(), S_IFREG, mode, caller));
  SIGILFS_ASSIGN_OR_RETURN(core::Tree::NewFile made,
                           tree_->MakeFile(*at.dir, at.name, modes.initial(), (flags & O_EXCL) != 0,
                                           NoAtime(false), FinishFor(at, modes, caller)));
  const std::string& stored = at.stored();
  if (DebugOps())
    Log("op create dir=%llu %s created=%d", (unsigned long long)at.dir_st.st_ino, stored.c_str(),
        made.created ? 1 : 0);
  const bool created = made.created;
  SIGILFS_ASSIGN_OR_RETURN(struct stat st, made.object->Stat(""));
  SIGILFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> inode,
                           Intern(st, parent.shared_from_this(), stored, *made.object, ""));
  Status failed = Status::Ok();
  std::shared_ptr<core::FileContents> contents;
  {
    MutexLock lock(inode->mu);
    if (!inode->contents) {
      auto contents = tree_->Contents(std::move(made.file), "file " + std::to_string(st.st_ino));
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
  auto cleared = [&caller](const struct stat& st) -> std::optional<mode_t> {
    const mode_t now = st.st_mode & 07777;
    if ((now & (S_ISUID | S_ISGID)) == 0) return std::nullopt;
    // Group membership matters only for set-group-ID without group execute.
    const bool sgid_needs_group = (now & (S_ISGID | S_IXGRP)) == S_ISGID;
    const mode_t mode = WithoutSetId(now, !sgid_needs_group || caller.InGroup(st.st_gid));
    if (mode == now || (caller.fsetid && caller.fsetid())) return std::nullopt;
    return mode;
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

const std::string kAccessAcl(acl::kAccessName), kDefaultAcl(acl::kDefaultName);

}  // namespace

Result<std::vector<uint8_t>> Filesystem::ReadXattr(core::BackingDir& object,
                                                   const std::string& name) {
  auto value = tree_->GetXattr(object, name);
  // Logged without the attribute's name, which is the user's (the log is not encrypted).
  if (!value.ok() &&
      (value.status().code() == Code::kAuthFailed || value.status().code() == Code::kCorrupt))
    Log("extended attribute: %s", value.status().ToString().c_str());
  return value;
}

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
  const mode_t current = st.st_mode & 07777;
  const std::vector<uint8_t> bytes = acl::Serialize(*parsed);
  if (name == kDefaultAcl) {
    // Only directories have one (the kernel refuses the others before asking, as ext4 does).
    if (!S_ISDIR(st.st_mode)) return Status::FromErrno(EACCES, "default ACL on a non-directory");
    return tree_->StoreAcl(*object, name, &bytes, flags, current);
  }
  // FUSE leaves posix_acl_update_mode to the server: the mode follows the ACL, an ACL the mode
  // says in full is not stored, and set-group-ID goes unless the caller is in the file's group.
  mode_t perms = 0;
  const bool equivalent = acl::EquivalentMode(*parsed, &perms);
  mode_t mode = (current & ~0777u) | perms;
  if ((mode & S_ISGID) != 0 && !caller.InGroup(st.st_gid)) mode &= ~S_ISGID;
  if (DebugOps())
    Log("op setacl ino=%llu mode %o -> %o equivalent=%d", (unsigned long long)st.st_ino, current,
        mode, equivalent ? 1 : 0);
  if (!acls()) {
    if (!equivalent) return Status::FromErrno(EOPNOTSUPP, "ACLs are off (-o acl)");
    return mode != current ? object->SetMode("", mode) : Status::Ok();
  }
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    // The backing filesystem keeps no `user.*` attributes on special files: only what the mode
    // can say is possible there.
    if (!equivalent) return Status::FromErrno(EOPNOTSUPP, "ACL on a special file");
    return mode != current ? object->SetMode("", mode) : Status::Ok();
  }
  return tree_->StoreAcl(*object, name, equivalent ? nullptr : &bytes, flags, mode);
}

Result<Filesystem::NewModes> Filesystem::ModesForNew(core::BackingDir& parent, mode_t type,
                                                     mode_t mode, const Caller& caller) {
  NewModes out;
  out.mode = mode & 07777;
  if (acls()) {
    // With POSIX ACLs the kernel neither applies the umask nor inherits default ACLs for FUSE:
    // posix_acl_create is the daemon's.
    auto inherited = ReadXattr(parent, kDefaultAcl);
    if (inherited.ok()) {
      auto parsed = acl::Parse(*inherited);
      if (!parsed.ok()) {
        Log("default ACL of directory: %s", parsed.status().ToString().c_str());
        return Status(Code::kCorrupt, "stored default ACL");
      }
      if (acl::CreateMasq(*parsed, &out.mode)) out.access_acl = acl::Serialize(*parsed);
      if (S_ISDIR(type)) out.default_acl = std::move(*inherited);
      return out;
    }
    // No attribute, or none possible there: no default ACL.
    const int e = inherited.status().sys_errno();
    if (e != ENODATA && e != EOPNOTSUPP) return inherited.status();
  }
  out.mode &= ~caller.umask;
  return out;
}

Status Filesystem::FinishNew(core::BackingDir& object, const NewModes& modes,
                             const struct stat* known) {
  // The access ACL first: until it is stored the entry has its owner's bits only.
  if (!modes.access_acl.empty())
    SIGILFS_RETURN_IF_ERROR(tree_->StoreAcl(object, kAccessAcl, &modes.access_acl, 0, modes.mode));
  if (!modes.default_acl.empty())
    SIGILFS_RETURN_IF_ERROR(
        tree_->StoreAcl(object, kDefaultAcl, &modes.default_acl, 0, modes.mode));
  // The daemon's own umask applied to the cipher object too, and a chown by root clears
  // set-ID bits: the mode asked for wins. (A stored ACL may have changed the mode.)
  struct stat st;
  if (known != nullptr && modes.access_acl.empty() && modes.default_acl.empty()) {
    st = *known;
  } else {
    SIGILFS_ASSIGN_OR_RETURN(st, object.Stat(""));
  }
  if ((st.st_mode & 07777) != modes.mode) return object.SetMode("", modes.mode);
  return Status::Ok();
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
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(auto object, OpenInode(inode));
  return ReadXattr(*object, name);
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
    // As on ext4, removing an ACL that is not there is no error (and changes no mode).
    ReaderLock tree(tree_mu_);
    struct stat st;
    SIGILFS_ASSIGN_OR_RETURN(auto object, OpenInode(inode, &st));
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return Status::Ok();  // never stored
    return tree_->StoreAcl(*object, name, nullptr, 0, st.st_mode & 07777);
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
      const mode_t mode = attr.st_mode & 07777;
      // The kernel leaves a FUSE server's ACLs alone on chmod (posix_acl_chmod is the
      // server's): the owner, group-class (mask) and other entries follow the new mode.
      std::vector<uint8_t> rewritten;
      if (acls() && (S_ISREG(inode.type) || S_ISDIR(inode.type))) {
        auto value = ReadXattr(*object, kAccessAcl);
        if (value.ok()) {
          auto parsed = acl::Parse(*value);
          if (!parsed.ok()) return Status(Code::kCorrupt, "stored access ACL");
          acl::Chmod(*parsed, mode);
          rewritten = acl::Serialize(*parsed);
        } else if (value.status().sys_errno() != ENODATA &&
                   value.status().sys_errno() != EOPNOTSUPP) {
          return value.status();
        }
      }
      if (!rewritten.empty()) {
        SIGILFS_RETURN_IF_ERROR(tree_->StoreAcl(*object, kAccessAcl, &rewritten, 0, mode));
      } else {
        SIGILFS_RETURN_IF_ERROR(object->SetMode("", mode));
      }
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
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name));
  SIGILFS_ASSIGN_OR_RETURN(NewModes modes,
                           ModesForNew(at.dir->backing(), mode & S_IFMT, mode, caller));
  if (!S_ISREG(mode) && !modes.access_acl.empty()) {
    // The backing filesystem keeps no `user.*` attributes on special files: they get the mode
    // the inherited ACL allows, without its named entries. Their group bits become what the
    // owning group itself may do, not the mask (which would hand the group what only named
    // entries were given).
    auto parsed = acl::Parse(modes.access_acl);
    const mode_t group = parsed.ok() ? acl::OwningGroupPerms(*parsed) : 0;
    modes.mode = (modes.mode & ~static_cast<mode_t>(S_IRWXG)) | (group << 3);
    modes.access_acl.clear();
  }
  SIGILFS_RETURN_IF_ERROR(tree_->MakeNode(*at.dir, at.name, (mode & S_IFMT) | modes.initial(), rdev,
                                          FinishFor(at, modes, caller)));
  if (DebugOps())
    Log("op mknod dir=%llu %s", (unsigned long long)at.dir_st.st_ino, at.stored().c_str());
  return EntryAt(parent.shared_from_this(), at.dir->backing(), at.stored());
}

Result<Entry> Filesystem::DoMkdir(Inode& parent, const std::string& name, mode_t mode,
                                  const Caller& caller) {
  if (options_.read_only) return Status::FromErrno(EROFS, "mkdir");
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name));
  SIGILFS_ASSIGN_OR_RETURN(NewModes modes, ModesForNew(at.dir->backing(), S_IFDIR, mode, caller));
  // A setgid directory passes its bit on to subdirectories, as on ext4.
  modes.mode |= at.dir_st.st_mode & S_ISGID;
  SIGILFS_RETURN_IF_ERROR(
      tree_->MakeDir(*at.dir, at.name, modes.initial(), FinishFor(at, modes, caller)));
  if (DebugOps())
    Log("op mkdir dir=%llu %s", (unsigned long long)at.dir_st.st_ino, at.stored().c_str());
  return EntryAt(parent.shared_from_this(), at.dir->backing(), at.stored());
}

Result<Entry> Filesystem::DoSymlink(Inode& parent, const std::string& name,
                                    const std::string& target, const Caller& caller) {
  if (options_.read_only) return Status::FromErrno(EROFS, "symlink");
  ReaderLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name));
  SIGILFS_RETURN_IF_ERROR(
      tree_->MakeSymlink(*at.dir, at.name, target,
                         [&](core::BackingDir& object) { return Chown(object, at, caller); }));
  if (DebugOps())
    Log("op symlink dir=%llu %s", (unsigned long long)at.dir_st.st_ino, at.stored().c_str());
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

core::Tree::Removed Filesystem::KeepOnRemoval(std::shared_ptr<core::Node>* node,
                                              const core::Node& parent, const std::string& stored) {
  core::Tree::Removed removed;
  removed.keep = [this, node, &parent, stored](const struct stat& st) {
    tree_mu_.AssertHeld();  // the caller's, for the whole removal
    *node = nodes_->Find(st, parent, stored);
    if (!*node || (*node)->removed) return false;
    // Another link (a hard link never looked up here) keeps the object, and an unlinked file
    // the kernel still caches may stay cached long: only an object this removal deletes is
    // kept.
    if (!S_ISDIR(st.st_mode) && st.st_nlink != 1) return false;
    {
      MutexLock lock((*node)->name_mu);
      if ((*node)->names.size() > 1) return false;  // still reached through another name
    }
    return nodes_->Lookups(**node) > 0;  // forgotten by the kernel: nothing can ask
  };
  return removed;
}

void Filesystem::KeepRemoved(core::Node& node, Object object, const std::string& target) {
  if (object && node.names.empty() && !node.removed) {
    node.removed = std::move(object);
    node.keeps_removed.store(true, std::memory_order_release);
    if (!target.empty()) {
      node.removed_target = target;
      node.removed_target_volume = &tree_->volume();
    }
    return;
  }
  tree_->ReleaseTarget(target);
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
    Log("op unlink dir=%llu %s ino=%llu node=%p", (unsigned long long)at.dir_st.st_ino,
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
  }
  if (!renamed.changed) return Status::Ok();  // two names of one file
  const std::string& old_stored = from.stored();
  const std::string& new_stored = to.stored();
  const bool target_existed = renamed.replaced.st.st_ino != 0;
  if (DebugOps())
    Log("op rename dir=%llu %s ino=%llu -> dir=%llu %s replaced=%d",
        (unsigned long long)from.dir_st.st_ino, old_stored.c_str(),
        (unsigned long long)renamed.moved.st_ino, (unsigned long long)to.dir_st.st_ino,
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

void Filesystem::WatchAtimeOptions(std::function<std::string()> probe) {
  atime_probe_ = std::move(probe);
  atime_checked_ns_.store(0);
  (void)NoAtime(false);
}

bool Filesystem::NoAtime(bool directory) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  const std::chrono::steady_clock::duration checked(atime_checked_ns_.load());
  if (atime_probe_ && now - checked >= std::chrono::seconds(1)) {
    MutexLock lock(atime_mu_, std::try_to_lock);
    if (lock.owns_lock()) {
      bool noatime = false, nodiratime = false;
      const std::string options = atime_probe_();
      for (size_t at = 0; at <= options.size();) {
        const size_t comma = std::min(options.find(',', at), options.size());
        const std::string_view option = std::string_view(options).substr(at, comma - at);
        noatime = noatime || option == "noatime";
        nodiratime = nodiratime || option == "nodiratime";
        at = comma + 1;
      }
      noatime_.store(noatime);
      nodiratime_.store(nodiratime);
      atime_checked_ns_.store(now.count());
    }
  }
  return noatime_.load() || (directory && nodiratime_.load());
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
