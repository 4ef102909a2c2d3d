// The mount's nodes: a node's object reached by its names, entries interned, nodes named by
// file handles found again, removed objects kept while the kernel holds them, atime options.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <string_view>
#include <utility>

#include "filesystem.h"
#include "log.h"
#include "sigilfs/core/persistent_id.h"

namespace sigilfs::fuse {

std::shared_ptr<Inode> Filesystem::Get(uint64_t nodeid) const {
  // The kernel only names node ids it was given and has not forgotten: the table holds them.
  return AsInode(nodes_->Get(nodeid));
}

void Filesystem::Forget(uint64_t nodeid, uint64_t n) {
  std::vector<std::shared_ptr<core::Node>> dropped;  // released outside the table's lock
  nodes_->Forget(nodeid, n, &dropped);
  // Their kept directory handles go with them (one may name a directory removed behind the
  // mount).
  std::vector<Object> handles;
  if (open_dirs_) {
    for (const auto& node : dropped)
      if (Object kept = open_dirs_->Close(*node)) handles.push_back(std::move(kept));
  }
  // A node only this holds closes now: if it kept a removed object, never beside a rmdir on
  // the store (removal_mu_).
  bool closes_removed =
      !handles.empty() || std::any_of(dropped.begin(), dropped.end(), [](const auto& node) {
        return node.use_count() == 1 && node->keeps_removed.load(std::memory_order_acquire);
      });
  if (!closes_removed) return;
  ReaderLock closing(removal_mu_);
  handles.clear();
  dropped.clear();
}

NodeStats Filesystem::node_stats() const {
  const core::NodeCounts counts = nodes_->counts();
  return {counts.nodes,
          counts.remembered,
          handle_lookups_.load(std::memory_order_relaxed),
          getattrs_.load(std::memory_order_relaxed),
          getxattrs_.load(std::memory_order_relaxed),
          lookups_.load(std::memory_order_relaxed),
          open_dirs_ ? open_dirs_->size() : 0};
}

void Filesystem::NoteSkippedName(const core::Node& dir, const std::string& stored,
                                 const Status& why) {
  {
    MutexLock lock(skipped_mu_);
    if (skipped_.size() >= kMaxSkippedNames) return;
    if (!skipped_
             .insert(std::to_string(dir.key_dev) + ":" + std::to_string(dir.key_ino) + "/" + stored)
             .second)
      return;
    if (skipped_.size() == kMaxSkippedNames)
      Log("%zu names left out of listings: more are neither logged nor counted", skipped_.size());
  }
  std::string path;
  {
    ReaderLock lock(tree_mu_);
    path = PathLocked(dir);
  }
  path = path == "." ? stored : path + "/" + stored;
  // The cipher path only: a log never holds plaintext.
  Log("left out of listings, as its name does not decrypt: %s (%s); logged once per mount, "
      "counted by `sigilfs stats`",
      path.c_str(), why.ToString().c_str());
}

uint64_t Filesystem::skipped_names() const {
  MutexLock lock(skipped_mu_);
  return skipped_.size();
}

Result<Object> Filesystem::OpenInode(const core::Node& inode, struct stat* st_out) const {
  auto& node = const_cast<core::Node&>(inode);
  if (&inode == root_.get()) {  // open for good
    if (st_out != nullptr) {
      SIGILFS_ASSIGN_OR_RETURN(*st_out, root_dir_->Stat(""));
    }
    return root_dir_;
  }
  // A node is reached by path, so a name that went stale (its entry replaced behind our back)
  // would silently resolve to another object: check that what was opened is this node's
  // cipher inode, and drop names that no longer lead to it.
  for (;;) {
    std::string first;
    {
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
    // A directory in use is kept open (exclusive mounts): its handle is the object itself.
    if (open_dirs_ && inode.type == S_IFDIR) {
      if (Object kept = open_dirs_->Find(inode)) {
        if (st_out == nullptr) return kept;
        auto st = kept->Stat("");
        // Removed behind the mount: the path, walked again below, says where it went.
        if (st.ok() && st->st_nlink > 0) {
          *st_out = *st;
          return kept;
        }
        (void)open_dirs_->Close(inode);
      }
    }
    auto object = root_dir_->OpenObject(PathLocked(inode));
    if (!object.ok()) {
      const int e = object.status().sys_errno();
      if (e != ENOENT && e != ENOTDIR && e != ELOOP) return object.status();
    } else if (auto st = (*object)->Stat("");
               st.ok() && st->st_dev == inode.key_dev &&
               (keeps_inode_numbers_ ? st->st_ino == inode.key_ino
                                     : (st->st_mode & S_IFMT) == inode.type)) {
      if (st_out != nullptr) *st_out = *st;
      Object found(std::move(object).value());
      if (open_dirs_ && S_ISDIR(st->st_mode)) open_dirs_->Keep(node.shared_from_this(), found);
      return found;
    }
    MutexLock lock(node.name_mu);
    if (!node.names.empty() && node.names.front().stored == first)
      node.names.erase(node.names.begin());  // stale: try the next name, if any
  }
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
  auto persistent = [&] { return keeps_inode_numbers_ ? core::PersistentId(at, at_name, st) : 0; };
  return AsInode(nodes_->Intern(st, parent, stored, still_there, persistent));
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

Result<Entry> Filesystem::ResolvePersistentId(uint64_t nodeid) {
  SIGILFS_ASSIGN_OR_RETURN(core::PersistentObject found,
                           core::OpenPersistentId(*root_dir_, nodeid));
  // Where it is: the path the backing filesystem knows it by (a directory's always, as it is
  // reconnected to its parents; a file's while its directory entry is cached), checked below by
  // walking it from the cipher root to this very object, which is what proves the object is the
  // vault's (not another vault's on the same filesystem, nor anything else there). Otherwise the
  // vault is searched for the inode number.
  auto entry = WalkToPersistentId(core::PathInVault(*root_dir_, *found.object), found.st, nodeid);
  if (!entry.ok() && !S_ISDIR(found.st.st_mode))
    entry = WalkToPersistentId(core::FindInVault(*root_dir_, found.st.st_ino), found.st, nodeid);
  return entry;
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
    if (stored.empty() || !core::IsEntryName(stored)) return stale("not a name of the vault");
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

}  // namespace sigilfs::fuse
