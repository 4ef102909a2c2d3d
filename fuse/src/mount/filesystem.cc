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
#include "sigilfs/crypt/random.h"

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

// Name bookkeeping of an inode.
// Names compare by the parent's backing identity, not the parent object: a directory can be
// known by two node objects (one displaced but not yet forgotten by the kernel).
bool SameName(const Inode::Name& n, const Inode& parent, const std::string& stored) {
  return n.stored == stored && n.parent->key_dev == parent.key_dev &&
         n.parent->key_ino == parent.key_ino;
}
void AddName(Inode& inode, const std::shared_ptr<Inode>& parent, const std::string& stored)
    SIGILFS_REQUIRES(inode.name_mu) {
  for (auto it = inode.names.begin(); it != inode.names.end(); ++it) {
    if (SameName(*it, *parent, stored)) {
      // Through the node the kernel uses now: the one renames of that directory keep current.
      it->parent = parent;
      std::rotate(inode.names.begin(), it, it + 1);  // most recently used first
      return;
    }
  }
  inode.names.insert(inode.names.begin(), Inode::Name{parent, stored});
}
void RemoveName(Inode& inode, const Inode& parent, const std::string& stored)
    SIGILFS_REQUIRES(inode.name_mu) {
  std::erase_if(inode.names, [&](const Inode::Name& n) { return SameName(n, parent, stored); });
}

}  // namespace

Inode::~Inode() {
  if (removed_target_volume != nullptr) removed_target_volume->ReleaseSymlinkTarget(removed_target);
}

Filesystem::Filesystem(std::unique_ptr<core::Volume> volume, MountOptions options)
    : volume_(std::move(volume)),
      root_dir_(core::BorrowPosixBackingDir(volume_->root_fd())),
      keeps_inode_numbers_(root_dir_->KeepsInodeNumbers()),
      options_(options),
      root_(std::make_shared<Inode>()) {
  if (auto st = root_dir_->Stat(""); st.ok()) {
    root_->key_dev = st->st_dev;
    root_->key_ino = keeps_inode_numbers_ ? st->st_ino : 1;
  }
  root_->type = S_IFDIR;
  root_->table_.nlookup = 1;  // the kernel holds the root forever
  // Node ids are addresses, which a later mount reuses: generations starting at random make a
  // handle from an earlier mount ESTALE (but for a one in 2^32 chance), not another file.
  crypt::RandomBytes(
      MutableByteSpan(reinterpret_cast<uint8_t*>(&next_generation_), sizeof next_generation_));
  // The namespace's storage rules (attributes, ACLs) are the library's. The root IV is not
  // checked here: a mount starts on a damaged root, and each lookup reports the damage.
  core::TreeOptions tree_options;
  tree_options.check_root_iv = false;
  tree_options.plain_names_in_errors = false;  // the daemon's log is not encrypted
  tree_ = std::move(core::Tree::Open(*volume_, core::BorrowPosixBackingDir(volume_->root_fd()),
                                     std::move(tree_options)))
              .value();
}

Filesystem::~Filesystem() { FlushAll(); }

namespace {
// Node ids that are a node's address have this bit set (user-space addresses never do), so they
// never meet the ids made from backing file handles, which never do.
constexpr uint64_t kAddressId = uint64_t{1} << 63;
}  // namespace

uint64_t Filesystem::NodeId(const Inode& inode) const {
  if (&inode == root_.get()) return 1;
  // An id that persists across mounts where the backing filesystem offers one; otherwise the
  // node's address, as in libfuse's passthrough examples.
  return inode.nodeid != 0 ? inode.nodeid : (reinterpret_cast<uint64_t>(&inode) | kAddressId);
}

std::shared_ptr<Inode> Filesystem::Get(uint64_t nodeid) const {
  if (nodeid == 1) return root_;
  // The kernel only names node ids we gave it and have not forgotten: the table holds them.
  if ((nodeid & kAddressId) != 0)
    // NOLINTNEXTLINE(performance-no-int-to-ptr): such node ids are node addresses
    return reinterpret_cast<Inode*>(nodeid & ~kAddressId)->shared_from_this();
  ReaderLock lock(ids_mu_);
  auto it = known_.find(nodeid);
  return it == known_.end() ? nullptr : it->second->shared_from_this();
}

void Filesystem::Forget(uint64_t nodeid, uint64_t n) {
  if (nodeid == 1) return;
  std::vector<std::shared_ptr<Inode>> dropped;  // released outside the lock
  DropReferences(nodeid, n, &dropped);
  // A node only this holds closes now: if it kept a removed object, never beside a rmdir on
  // the store (removal_mu_).
  bool closes_removed = std::any_of(dropped.begin(), dropped.end(), [](const auto& node) {
    return node.use_count() == 1 && node->keeps_removed.load(std::memory_order_acquire);
  });
  if (!closes_removed) return;
  ReaderLock closing(removal_mu_);
  dropped.clear();
}

void Filesystem::DropReferences(uint64_t nodeid, uint64_t n,
                                std::vector<std::shared_ptr<Inode>>* out) {
  std::vector<std::shared_ptr<Inode>>& dropped = *out;
  MutexLock lock(table_mu_);
  // No reference taken here: DropLocked tells by the count whether anything else holds a node.
  Inode* inode = nullptr;
  if ((nodeid & kAddressId) != 0) {
    inode = reinterpret_cast<Inode*>(nodeid & ~kAddressId);  // NOLINT(performance-no-int-to-ptr)
  } else {
    // Changes need table_mu_ too, so this stays true while it is held.
    ReaderLock ids(ids_mu_);
    if (auto id = known_.find(nodeid); id != known_.end()) inode = id->second;
  }
  if (inode == nullptr) return;
  uint64_t& nlookup = TableOf(*inode).nlookup;
  nlookup -= std::min(n, nlookup);
  if (nlookup > 0) return;
  auto it = table_.find({inode->key_dev, inode->key_ino});
  if (it != table_.end() && it->second.get() == inode) {
    bool named;
    {
      MutexLock name_lock(inode->name_mu);
      named = !inode->names.empty();
    }
    // A file handle (NFS, open_by_handle_at) may name it later: the kernel then asks for it by
    // node id, so it stays known, kept current by renames, for a while. An unlinked node could
    // only be ESTALE.
    if (named && options_.handle_cache > 0) return RememberLocked(*inode, &dropped);
    ReleaseLocked(it, &dropped);
  } else if (auto o = orphans_.find(inode); o != orphans_.end()) {
    std::shared_ptr<Inode> node = std::move(o->second);
    orphans_.erase(o);
    WriterLock ids(ids_mu_);
    known_.erase(nodeid);
    DropLocked(std::move(node), &dropped);
  }
}

void Filesystem::ReleaseLocked(
    std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<Inode>>::iterator it,
    std::vector<std::shared_ptr<Inode>>* dropped) {
  // The kernel forgets a directory once it has no dentry below it, but a file there may live
  // on through a hard link elsewhere (or a FORGET of a child may still be on its way): such a
  // node still names this one as its parent and reaches its files through it. Out of the
  // table, renames of the directory would no longer update it (they find nodes here) while
  // the next lookup made a second node for it: paths through the first went stale and
  // OpenInode dropped the child's valid name (link() then failed with ENOENT). So it stays,
  // kept current, and is this directory's node again when looked up. (Anything else holding
  // it briefly, a request finishing on another thread, keeps it too: then it stays until it is
  // looked up again or its last child goes, memory only, bounded by the vault's directories.
  // The count cannot tell a child from such a holder.)
  UnrememberLocked(*it->second);  // the list holds plain pointers
  if (S_ISDIR(it->second->type) && it->second.use_count() > 1) {
    // A removed directory (no name left) goes whoever holds it: nothing can rename it or look
    // it up again, and a node still naming it has a stale name. Kept, it would stay for good,
    // with its descriptor (Inode::removed_fd) and its cipher directory on the backing store,
    // when the holder was no child but a request still finishing on another thread, whose
    // reply had already let the kernel forget the node.
    MutexLock name_lock(it->second->name_mu);
    if (!it->second->names.empty()) return;
  }
  DropNameIdsOfLocked(*it->second);
  std::shared_ptr<Inode> node = std::move(it->second);
  table_.erase(it);
  {
    WriterLock ids(ids_mu_);
    known_.erase(NodeId(*node));
  }
  DropLocked(std::move(node), dropped);
}

void Filesystem::RememberLocked(Inode& node, std::vector<std::shared_ptr<Inode>>* dropped) {
  {
    // What the daemon caches of a node (a directory's IV) goes as it did when forgotten nodes
    // left the table: the next use reads it again. (table_mu_ before mu is the wrong order, so
    // only if free: a request using the node meanwhile will have read it just now.)
    if (node.mu.TryLock()) {
      node.iv.reset();
      node.mu.Unlock();
    }
  }
  auto& forgotten_at = TableOf(node).forgotten_at;
  if (!forgotten_at) forgotten_at = forgotten_.insert(forgotten_.end(), &node);
  while (forgotten_.size() > options_.handle_cache) {
    Inode* oldest = forgotten_.front();
    UnrememberLocked(*oldest);
    auto it = table_.find({oldest->key_dev, oldest->key_ino});
    if (it != table_.end() && it->second.get() == oldest) ReleaseLocked(it, dropped);
  }
}

void Filesystem::UnrememberLocked(Inode& node) {
  auto& forgotten_at = TableOf(node).forgotten_at;
  if (!forgotten_at) return;
  forgotten_.erase(*forgotten_at);
  forgotten_at.reset();
}

NodeStats Filesystem::node_stats() const {
  MutexLock lock(table_mu_);
  return {table_.size() + orphans_.size(),
          forgotten_.size(),
          handle_lookups_.load(std::memory_order_relaxed),
          getattrs_.load(std::memory_order_relaxed),
          getxattrs_.load(std::memory_order_relaxed),
          lookups_.load(std::memory_order_relaxed)};
}

void Filesystem::DropLocked(std::shared_ptr<Inode> node,
                            std::vector<std::shared_ptr<Inode>>* dropped) {
  std::vector<std::shared_ptr<Inode>> work{std::move(node)};
  while (!work.empty()) {
    std::shared_ptr<Inode> cur = std::move(work.back());
    work.pop_back();
    std::vector<Inode::Name> names;
    if (cur.use_count() == 1) {  // no child goes through it: its names can go now
      MutexLock name_lock(cur->name_mu);
      names.swap(cur->names);
    }
    dropped->push_back(std::move(cur));
    for (auto& name : names) {
      std::shared_ptr<Inode> parent = std::move(name.parent);
      if (parent == root_) continue;
      if (const Inode::TableState& t = TableOf(*parent); t.nlookup > 0 || t.forgotten_at) continue;
      // A forgotten directory kept for its children (see ReleaseLocked) that only the table and
      // this name held: it goes too.
      auto it = table_.find({parent->key_dev, parent->key_ino});
      if (it == table_.end() || it->second != parent || parent.use_count() > 2) continue;
      DropNameIdsOfLocked(*parent);
      table_.erase(it);
      {
        WriterLock ids(ids_mu_);
        known_.erase(NodeId(*parent));
      }
      work.push_back(std::move(parent));
    }
  }
}

std::string Filesystem::PathLocked(const Inode& inode) const {
  std::vector<std::string> parts;
  const Inode* cur = &inode;
  std::shared_ptr<Inode> hold;
  while (cur != root_.get()) {
    MutexLock lock(cur->name_mu);
    if (cur->names.empty()) break;
    parts.push_back(cur->names.front().stored);
    hold = cur->names.front().parent;
    cur = hold.get();
  }
  std::string path;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (!path.empty()) path += '/';
    path += *it;
  }
  return path.empty() ? "." : path;
}

Result<Object> Filesystem::OpenInode(const Inode& inode, struct stat* st_out) const {
  Inode& node = const_cast<Inode&>(inode);
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

Result<DirIv> Filesystem::DirIvOf(Inode& dir, core::BackingDir& backing) {
  MutexLock lock(dir.mu);
  // In shared mode another mount may have replaced the directory since its IV was read (`rm -rf
  // D; mkdir D`, where the store reuses the inode number, or any replacement on a store that
  // renumbers): the node would still match it, and a name made under the old IV would be lost
  // to every other mount. So the IV is read each time, from the directory handle this very
  // operation opened, and names are made and read under what the store holds now.
  if (!dir.iv || options_.shared) {
    bool from_attribute = false;
    auto iv = volume_->ReadDirIv(backing, &from_attribute);
    if (!iv.ok()) {
      Log("directory %s: %s", PathLocked(dir).c_str(), iv.status().ToString().c_str());
      return iv.status();
    }
    if (from_attribute && !options_.read_only) {
      // A crash kept the directory but not its IV file's data: put the file back for backups
      // that do not carry attributes.
      Status restored = volume_->RestoreDirIvFile(backing, *iv);
      Log("directory %s: IV file torn, IV taken from the directory's attribute; %s",
          PathLocked(dir).c_str(), restored.ok() ? "file restored" : restored.ToString().c_str());
    }
    if (options_.shared) return *iv;
    dir.iv = *iv;
  }
  return *dir.iv;
}

Result<std::unique_ptr<core::Tree::Dir>> Filesystem::TreeDirOf(Inode& dir, struct stat* st_out) {
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
                                                  const std::shared_ptr<Inode>& parent,
                                                  const std::string& stored, core::BackingDir& at,
                                                  const std::string& at_name) {
  std::vector<std::shared_ptr<Inode>> dropped;  // released outside the lock
  MutexLock lock(table_mu_);
  const std::pair<uint64_t, uint64_t> key = KeyLocked(st, *parent, stored);
  auto& slot = table_[key];
  if (slot) {
    // No descriptor pins a cipher inode, so the backing filesystem may give a deleted entry's
    // inode number to a new one while the kernel still holds the old node. The slot is the
    // same object only if it is provably alive and of the same type: open, or reached by this
    // very name, or its recorded name still leads to this inode. Otherwise the entry gets a
    // fresh node (the old one is kept until the kernel forgets it).
    // (Where the store renumbers its objects, the slot is this name's: the same object if of
    // the same type, as far as anything can tell.)
    bool alive =
        slot->type == (st.st_mode & S_IFMT) && (slot->is_open.load() || !keeps_inode_numbers_);
    if (!alive && slot->type == (st.st_mode & S_IFMT)) {
      Inode::Name first;
      {
        MutexLock name_lock(slot->name_mu);
        if (!slot->names.empty()) first = slot->names.front();
      }
      if (first.parent != nullptr) {
        if (first.parent->key_dev == parent->key_dev && first.parent->key_ino == parent->key_ino &&
            first.stored == stored) {
          alive = true;
        } else {
          if (auto dir = OpenInode(*first.parent); dir.ok()) {
            auto now = (*dir)->Stat(first.stored);
            alive = now.ok() && now->st_dev == st.st_dev && now->st_ino == st.st_ino;
          }
        }
      }
    }
    if (DebugOps()) {
      size_t names = 0;
      {
        MutexLock name_lock(slot->name_mu);
        names = slot->names.size();
      }
      Log("intern ino=%llu %s: node=%p type=%o new_type=%o nlookup=%llu names=%zu verdict=%s",
          (unsigned long long)st.st_ino, stored.c_str(), static_cast<void*>(slot.get()), slot->type,
          st.st_mode & S_IFMT, (unsigned long long)TableOf(*slot).nlookup, names,
          alive ? "same" : "fresh");
    }
    UnrememberLocked(*slot);  // known to the kernel again, or displaced
    if (!alive) {
      if (TableOf(*slot).nlookup > 0) {
        orphans_[slot.get()] = slot;  // the kernel may still use its id
        slot.reset();
      } else {
        {
          WriterLock ids(ids_mu_);
          known_.erase(NodeId(*slot));
        }
        // As when forgotten: a directory kept only for it as a child goes with it.
        DropLocked(std::exchange(slot, nullptr), &dropped);
      }
    }
  }
  if (!slot) {
    slot = std::make_shared<Inode>();
    slot->key_dev = key.first;
    slot->key_ino = key.second;
    slot->type = st.st_mode & S_IFMT;
    // An id that persists across mounts, unless a node the kernel still holds has it (this
    // object, displaced above without proof that it is the same): its generation is then a
    // function of the id under the vault's key, the same in every mount of this vault alone.
    const uint64_t id = keeps_inode_numbers_ ? PersistentId(at, at_name, st) : 0;
    WriterLock ids(ids_mu_);
    if (id != 0 && !known_.contains(id)) {
      slot->nodeid = id;
      slot->generation = volume_->names().HandleGeneration(id);
    } else {
      slot->generation = next_generation_++;
      if (slot->generation == 0) slot->generation = next_generation_++;  // the root's
    }
    known_.emplace(NodeId(*slot), slot.get());
  }
  {
    // Found under this name (perhaps one more hard link): remember it.
    MutexLock name_lock(slot->name_mu);
    AddName(*slot, parent, stored);
  }
  ++TableOf(*slot).nlookup;
  return slot;
}

Result<struct stat> Filesystem::Translate(struct stat st, core::BackingDir& dir,
                                          const std::string& stored, const Inode* inode) {
  if (S_ISREG(st.st_mode)) {
    std::shared_ptr<core::FileContents> open;
    if (inode != nullptr) {
      MutexLock lock(const_cast<Inode*>(inode)->mu);
      open = inode->contents;
    }
    if (open) {
      st.st_size = static_cast<off_t>(open->size());  // includes what is not written back yet
    } else {
      auto size = volume_->PlainSize(dir, stored, st);
      if (!size.ok()) {
        Log("%s: %s", stored.c_str(), size.status().ToString().c_str());
        return size.status();
      }
      st.st_size = static_cast<off_t>(*size);
    }
  } else if (S_ISLNK(st.st_mode)) {
    SIGILFS_ASSIGN_OR_RETURN(std::string sealed, dir.ReadSymlink(stored));
    auto target = volume_->DecryptSymlinkTarget(sealed);
    if (!target.ok()) return target.status();
    st.st_size = static_cast<off_t>(target->size());
  }
  return st;
}

Result<Entry> Filesystem::EntryAt(const std::shared_ptr<Inode>& parent, core::BackingDir& dir,
                                  const std::string& stored) {
  SIGILFS_ASSIGN_OR_RETURN(struct stat st, dir.Stat(stored));
  SIGILFS_ASSIGN_OR_RETURN(std::shared_ptr<Inode> inode, Intern(st, parent, stored, dir, stored));
  auto attr = Translate(st, dir, stored, inode.get());
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
  std::shared_ptr<Inode> node = root_;
  if (nodeid != 1) {
    MutexLock lock(table_mu_);
    Inode* known = nullptr;
    {
      ReaderLock ids(ids_mu_);
      if (auto it = known_.find(nodeid); it != known_.end()) known = it->second;
    }
    if (known == nullptr) {
      if ((nodeid & kAddressId) != 0) return Stale("file handle of a node no longer known");
      node = nullptr;
    } else {
      node = known->shared_from_this();  // in table_ or orphans_: alive under table_mu_
    }
  }
  if (!node) return ResolvePersistentId(nodeid);
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
  std::shared_ptr<Inode> parent = root_;
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
  std::shared_ptr<Inode> parent;
  {
    MutexLock lock(dir.name_mu);
    if (dir.names.empty()) return Stale("the directory was removed");
    parent = dir.names.front().parent;
  }
  return EntryOf(parent);
}

Result<Entry> Filesystem::EntryOf(const std::shared_ptr<Inode>& node) {
  if (node == root_) {
    SIGILFS_ASSIGN_OR_RETURN(struct stat st, root_dir_->Stat(""));
    return Entry{root_, st};  // the kernel counts no lookups of the root
  }
  // OpenInode drops the names that no longer lead to the node; the first left leads to it.
  if (auto object = OpenInode(*node); !object.ok())
    return object.status().code() == Code::kNotFound ? Stale("unlinked") : object.status();
  Inode::Name first;
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
  return Translate(st, *object, "", &inode);
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
  auto contents =
      volume_->pages().Open(std::move(file).value(), "file " + std::to_string(inode.key_ino));
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
      auto contents =
          volume_->pages().Open(std::move(made.file), "file " + std::to_string(st.st_ino));
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
    Forget(NodeId(*inode), 1);  // after inode->mu: Forget takes table_mu_ and may try mu
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
    auto translated = Translate(st, at.dir->backing(), stored, inode.get());
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
  std::vector<Inode::Name> names;
  {
    MutexLock lock(inode.name_mu);
    names = inode.names;
  }
  std::vector<KernelName> out;
  for (const Inode::Name& n : names) {
    auto dir = OpenInode(*n.parent);
    if (!dir.ok()) continue;
    auto iv = DirIvOf(*n.parent, **dir);
    if (!iv.ok()) continue;
    auto plain = volume_->PlainName(**dir, *iv, n.stored);
    if (plain.ok()) out.push_back({NodeId(*n.parent), std::move(plain).value()});
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
        Inode::Name where;
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
  SIGILFS_ASSIGN_OR_RETURN(std::string sealed, object->ReadSymlink(""));
  auto target = volume_->DecryptSymlinkTarget(sealed);
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
  Inode::Name from;
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

core::Tree::Removed Filesystem::KeepOnRemoval(std::shared_ptr<Inode>* node, const Inode& parent,
                                              const std::string& stored) {
  core::Tree::Removed removed;
  removed.keep = [this, node, &parent, stored](const struct stat& st) {
    tree_mu_.AssertHeld();  // the caller's, for the whole removal
    *node = FindLocked(st, parent, stored);
    if (!*node || (*node)->removed) return false;
    // Another link (a hard link never looked up here) keeps the object, and an unlinked file
    // the kernel still caches may stay cached long: only an object this removal deletes is
    // kept.
    if (!S_ISDIR(st.st_mode) && st.st_nlink != 1) return false;
    {
      MutexLock lock((*node)->name_mu);
      if ((*node)->names.size() > 1) return false;  // still reached through another name
    }
    MutexLock lock(table_mu_);
    return TableOf(**node).nlookup > 0;  // forgotten by the kernel: nothing can ask
  };
  return removed;
}

void Filesystem::KeepRemoved(Inode& node, Object object, const std::string& target) {
  if (object && node.names.empty() && !node.removed) {
    node.removed = std::move(object);
    node.keeps_removed.store(true, std::memory_order_release);
    if (!target.empty()) {
      node.removed_target = target;
      node.removed_target_volume = volume_.get();
    }
    return;
  }
  if (!target.empty()) volume_->ReleaseSymlinkTarget(target);
}

std::shared_ptr<Inode> Filesystem::FindLocked(const struct stat& st, const Inode& parent,
                                              const std::string& stored) {
  MutexLock lock(table_mu_);
  uint64_t number = st.st_ino;
  if (!keeps_inode_numbers_) {
    auto id = name_ids_.find({parent.key_ino, stored});
    if (id == name_ids_.end()) return nullptr;
    number = id->second;
  }
  auto it = table_.find({st.st_dev, number});
  return it == table_.end() ? nullptr : it->second;
}

std::pair<uint64_t, uint64_t> Filesystem::KeyLocked(const struct stat& st, const Inode& parent,
                                                    const std::string& stored) {
  if (keeps_inode_numbers_) return {st.st_dev, st.st_ino};
  auto [id, made] = name_ids_.try_emplace({parent.key_ino, stored}, 0);
  if (made) id->second = next_name_id_++;
  return {st.st_dev, id->second};
}

void Filesystem::RenameNameIdLocked(const Inode& from_dir, const std::string& from,
                                    const Inode& to_dir, const std::string& to, bool exchange) {
  if (keeps_inode_numbers_) return;
  auto source = name_ids_.extract({from_dir.key_ino, from});
  auto target = name_ids_.extract({to_dir.key_ino, to});
  if (!source.empty()) {
    source.key() = {to_dir.key_ino, to};
    name_ids_.insert(std::move(source));
  }
  if (exchange && !target.empty()) {
    target.key() = {from_dir.key_ino, from};
    name_ids_.insert(std::move(target));
  }
}

void Filesystem::DropNameIdLocked(const Inode& dir, const std::string& stored) {
  if (!keeps_inode_numbers_) name_ids_.erase({dir.key_ino, stored});
}

void Filesystem::DropNameIdsOfLocked(const Inode& node) {
  if (keeps_inode_numbers_) return;
  MutexLock lock(node.name_mu);
  for (const Inode::Name& n : node.names) {
    auto id = name_ids_.find({n.parent->key_ino, n.stored});
    if (id != name_ids_.end() && id->second == node.key_ino) name_ids_.erase(id);
  }
}

Status Filesystem::DoUnlink(Inode& parent, const std::string& name) {
  if (options_.read_only) return Status::FromErrno(EROFS, "unlink");
  WriterLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name));
  std::shared_ptr<Inode> inode;
  core::Tree::Removed removed = KeepOnRemoval(&inode, parent, at.stored());
  SIGILFS_RETURN_IF_ERROR(tree_->Unlink(*at.dir, at.name, &removed));
  {
    MutexLock lock(table_mu_);
    DropNameIdLocked(parent, at.stored());
  }
  if (DebugOps())
    Log("op unlink dir=%llu %s ino=%llu node=%p", (unsigned long long)at.dir_st.st_ino,
        at.stored().c_str(), (unsigned long long)removed.st.st_ino,
        static_cast<void*>(inode.get()));
  if (inode) {
    // Other hard links (if any) keep reaching it.
    MutexLock lock(inode->name_mu);
    RemoveName(*inode, parent, at.stored());
    KeepRemoved(*inode, std::move(removed.object), removed.target);
  } else if (!removed.target.empty()) {
    volume_->ReleaseSymlinkTarget(removed.target);
  }
  return Status::Ok();
}

Status Filesystem::DoRmdir(Inode& parent, const std::string& name) {
  if (options_.read_only) return Status::FromErrno(EROFS, "rmdir");
  WriterLock tree(tree_mu_);
  SIGILFS_ASSIGN_OR_RETURN(Place at, Resolve(parent, name));
  std::shared_ptr<Inode> inode;
  core::Tree::Removed removed = KeepOnRemoval(&inode, parent, at.stored());
  {
    WriterLock no_closes(removal_mu_);
    SIGILFS_RETURN_IF_ERROR(tree_->RemoveDir(*at.dir, at.name, &removed));
  }
  {
    MutexLock lock(table_mu_);
    DropNameIdLocked(parent, at.stored());
  }
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
  std::shared_ptr<Inode> replaced;
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
  auto move_to = [](const std::shared_ptr<Inode>& inode, Inode& from_dir, const std::string& from,
                    Inode& to_dir, const std::string& to) {
    if (!inode) return;
    MutexLock lock(inode->name_mu);
    RemoveName(*inode, from_dir, from);
    AddName(*inode, to_dir.shared_from_this(), to);
  };
  if ((flags & RENAME_EXCHANGE) != 0) {
    // Side files of long names belong to the names, which stay where they are.
    auto a = FindLocked(renamed.moved, parent, old_stored);
    auto b = FindLocked(renamed.replaced.st, new_parent, new_stored);
    {
      MutexLock lock(table_mu_);
      RenameNameIdLocked(parent, old_stored, new_parent, new_stored, /*exchange=*/true);
    }
    move_to(a, parent, old_stored, new_parent, new_stored);
    move_to(b, new_parent, new_stored, parent, old_stored);
    return Status::Ok();
  }
  if (replaced) {
    MutexLock lock(replaced->name_mu);
    RemoveName(*replaced, new_parent, new_stored);
    KeepRemoved(*replaced, std::move(renamed.replaced.object), renamed.replaced.target);
  } else if (!renamed.replaced.target.empty()) {
    volume_->ReleaseSymlinkTarget(renamed.replaced.target);
  }
  std::shared_ptr<Inode> moved = FindLocked(renamed.moved, parent, old_stored);
  {
    MutexLock lock(table_mu_);
    RenameNameIdLocked(parent, old_stored, new_parent, new_stored, /*exchange=*/false);
  }
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
  std::vector<std::shared_ptr<Inode>> inodes;
  {
    MutexLock lock(table_mu_);
    for (auto& [key, inode] : table_) inodes.push_back(inode);
  }
  for (auto& inode : inodes) {
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
