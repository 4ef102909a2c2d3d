// The reverse view's FUSE daemon: a node per name the kernel looked up, each directory's store
// handle kept open, everything else asked of the store as it is (it is read only, and sealed on
// read by the store itself).
#include "view_server.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <list>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "../daemon/libfuse.h"
#include "../daemon/log.h"
#include "../daemon/replies.h"
#include "../daemon/session.h"
#include "sigilfs/fuse/errno_map.h"
#include "sigilfs/mutex.h"

namespace sigilfs::fuse {
namespace {

// Changes in the plain tree show in the view after at most this long.
constexpr double kTimeout = 1.0;

// A name the kernel looked up. Its fields are View::mu_'s: read and changed under it only.
struct Node {
  std::shared_ptr<Node> parent;  // null for the root
  fuse_ino_t parent_ino = 0;
  std::string name;  // its stored name in the parent
  bool is_dir = false;
  // A directory's store handle while it is among the open ones (View::open_dirs_), else null
  // (opened again through its parent when next asked for).
  std::shared_ptr<core::BackingDir> dir;
  std::list<std::shared_ptr<Node>>::iterator open_at;  // its place there, while `dir` is set
  uint64_t lookups = 0;
};

class View {
 public:
  // At most `max_open_dirs` directory handles (a descriptor each) are kept open at once.
  View(std::unique_ptr<core::BackingDir> root, size_t max_open_dirs)
      : max_open_dirs_(max_open_dirs) {
    auto node = std::make_shared<Node>();
    node->dir = std::move(root);  // the root's stays open, outside open_dirs_
    node->is_dir = true;
    node->lookups = 1;
    root_ = node->dir;
    nodes_.emplace(FUSE_ROOT_ID, std::move(node));
  }

  core::BackingDir& root() { return *root_; }

  // The store handle of directory node `ino` (null if it is none, or unknown).
  std::shared_ptr<core::BackingDir> DirOf(fuse_ino_t ino) {
    MutexLock lock(mu_);
    auto it = nodes_.find(ino);
    return it == nodes_.end() ? nullptr : OpenLocked(it->second);
  }

  // The store and name through which node `ino` is reached: a directory itself (empty name),
  // any other entry through its parent.
  struct Reach {
    std::shared_ptr<core::BackingDir> dir;
    std::string name;
  };
  std::optional<Reach> ReachOf(fuse_ino_t ino) {
    MutexLock lock(mu_);
    auto it = nodes_.find(ino);
    if (it == nodes_.end()) return std::nullopt;
    const std::shared_ptr<Node>& node = it->second;
    if (node->is_dir) {
      auto dir = OpenLocked(node);
      if (dir == nullptr) return std::nullopt;
      return Reach{std::move(dir), ""};
    }
    auto dir = node->parent == nullptr ? nullptr : OpenLocked(node->parent);
    if (dir == nullptr) return std::nullopt;
    return Reach{std::move(dir), node->name};
  }

  // The node of entry `name` of `parent` (made, or found again), counted as looked up once;
  // `dir` is its handle if it is a directory. ESTALE where `parent_ino` is no longer known.
  Result<fuse_ino_t> Remember(fuse_ino_t parent_ino, const std::string& name,
                              std::shared_ptr<core::BackingDir> dir) {
    MutexLock lock(mu_);
    auto parent = nodes_.find(parent_ino);
    if (parent == nodes_.end()) return Status::FromErrno(ESTALE, "a forgotten directory");
    auto [it, fresh] = by_name_.try_emplace({parent_ino, name}, next_ino_);
    if (fresh) {
      auto node = std::make_shared<Node>();
      node->parent = parent->second;
      node->parent_ino = parent_ino;
      node->name = name;
      nodes_.emplace(next_ino_++, std::move(node));
    }
    const std::shared_ptr<Node>& node = nodes_.at(it->second);
    Close(*node);  // what the name is now
    node->is_dir = dir != nullptr;
    if (node->is_dir) Keep(node, std::move(dir));
    ++node->lookups;
    return it->second;
  }

  void Forget(fuse_ino_t ino, uint64_t n) {
    MutexLock lock(mu_);
    auto it = nodes_.find(ino);
    if (it == nodes_.end() || ino == FUSE_ROOT_ID) return;
    Node& node = *it->second;
    node.lookups -= std::min(node.lookups, n);
    if (node.lookups > 0) return;
    Close(node);
    by_name_.erase({node.parent_ino, node.name});
    nodes_.erase(it);
  }

  size_t open_dirs() {
    MutexLock lock(mu_);
    return open_dirs_.size();
  }

 private:
  // A directory node's handle, opened again through its parents if it was closed (null if
  // that fails: the directory is gone).
  std::shared_ptr<core::BackingDir> OpenLocked(const std::shared_ptr<Node>& node)
      SIGILFS_REQUIRES(mu_) {
    if (!node->is_dir) return nullptr;
    if (node->parent == nullptr) return node->dir;  // the root
    if (node->dir != nullptr) {
      open_dirs_.splice(open_dirs_.begin(), open_dirs_, node->open_at);  // recently used
      return node->dir;
    }
    auto parent = OpenLocked(node->parent);
    if (parent == nullptr) return nullptr;
    auto opened = parent->OpenDir(node->name);
    if (!opened.ok()) return nullptr;
    std::shared_ptr<core::BackingDir> dir = std::move(opened).value();
    Keep(node, dir);
    return dir;
  }

  // Holds `dir` as `node`'s handle, closing the least recently used beyond the bound.
  void Keep(const std::shared_ptr<Node>& node, std::shared_ptr<core::BackingDir> dir)
      SIGILFS_REQUIRES(mu_) {
    node->dir = std::move(dir);
    open_dirs_.push_front(node);
    node->open_at = open_dirs_.begin();
    while (open_dirs_.size() > max_open_dirs_) Close(*open_dirs_.back());
  }

  // Drops `node`'s handle (calls in flight keep theirs).
  void Close(Node& node) SIGILFS_REQUIRES(mu_) {
    if (node.parent == nullptr || node.dir == nullptr) return;
    node.dir.reset();
    open_dirs_.erase(node.open_at);  // last: it may hold the last reference to the node
  }

  const size_t max_open_dirs_;
  std::shared_ptr<core::BackingDir> root_;
  Mutex mu_;
  std::unordered_map<fuse_ino_t, std::shared_ptr<Node>> nodes_ SIGILFS_GUARDED_BY(mu_);
  std::map<std::pair<fuse_ino_t, std::string>, fuse_ino_t> by_name_ SIGILFS_GUARDED_BY(mu_);
  // Directory nodes whose handles are open, the most recently used first.
  std::list<std::shared_ptr<Node>> open_dirs_ SIGILFS_GUARDED_BY(mu_);
  fuse_ino_t next_ino_ SIGILFS_GUARDED_BY(mu_) = FUSE_ROOT_ID + 1;
};

using Req = Request<View>;

// What open and opendir keep in fi->fh: the view's file, and a listing handle of a directory.
core::BackingFile* FileOf(const fuse_file_info* fi) {
  return reinterpret_cast<core::BackingFile*>(fi->fh);  // NOLINT(performance-no-int-to-ptr)
}
core::BackingDir* ListingOf(const fuse_file_info* fi) {
  return reinterpret_cast<core::BackingDir*>(fi->fh);  // NOLINT(performance-no-int-to-ptr)
}

void Lookup(Req& r, fuse_ino_t parent, const char* name) {
  View& view = r.server();
  std::shared_ptr<core::BackingDir> p = view.DirOf(parent);
  if (p == nullptr) return (void)std::move(r).Err(ENOTDIR);
  auto st = p->Stat(name);
  if (!st.ok()) return ReplyError(r, st.status());
  std::shared_ptr<core::BackingDir> dir;
  if (S_ISDIR(st->st_mode)) {
    auto opened = p->OpenDir(name);
    if (!opened.ok()) return ReplyError(r, opened.status());
    dir = std::move(opened).value();
  }
  auto ino = view.Remember(parent, name, std::move(dir));
  if (!ino.ok()) return ReplyError(r, ino.status());
  fuse_entry_param e{};
  e.ino = *ino;
  e.attr = *st;
  e.attr_timeout = e.entry_timeout = kTimeout;
  if (!std::move(r).Entry(e)) view.Forget(e.ino, 1);  // the kernel never got it
}

void Getattr(Req& r, fuse_ino_t ino, fuse_file_info*) {
  auto at = r.server().ReachOf(ino);
  if (!at) return (void)std::move(r).Err(ESTALE);
  auto st = at->dir->Stat(at->name);
  if (!st.ok()) return ReplyError(r, st.status());
  std::move(r).Attr(*st, kTimeout);
}

void Readlink(Req& r, fuse_ino_t ino) {
  auto at = r.server().ReachOf(ino);
  if (!at) return (void)std::move(r).Err(ESTALE);
  auto target = at->dir->ReadSymlink(at->name);
  if (!target.ok()) return ReplyError(r, target.status());
  std::move(r).Readlink(target->c_str());
}

void Open(Req& r, fuse_ino_t ino, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return (void)std::move(r).Err(EROFS);
  auto at = r.server().ReachOf(ino);
  if (!at) return (void)std::move(r).Err(ESTALE);
  auto file = at->dir->OpenFile(at->name, {.write = false, .keep_atime = true});
  if (!file.ok()) return ReplyError(r, file.status());
  fi->fh = reinterpret_cast<uint64_t>(std::move(file).value().release());
  if (!std::move(r).Open(fi)) delete FileOf(fi);
}

void Read(Req& r, fuse_ino_t, size_t size, off_t offset, fuse_file_info* fi) {
  core::BackingFile* file = FileOf(fi);
  std::vector<uint8_t> buf(size);
  auto n = file->ReadAt(buf, static_cast<uint64_t>(offset));
  if (!n.ok()) {
    Log("read: %s", n.status().ToString().c_str());
    return ReplyError(r, n.status());
  }
  std::move(r).Buf(buf.data(), *n);
}

void Release(Req& r, fuse_ino_t, fuse_file_info* fi) {
  delete FileOf(fi);
  std::move(r).Err(0);
}

void Opendir(Req& r, fuse_ino_t ino, fuse_file_info* fi) {
  std::shared_ptr<core::BackingDir> dir = r.server().DirOf(ino);
  if (dir == nullptr) return (void)std::move(r).Err(ENOTDIR);
  auto listing = dir->OpenListing(true);
  if (!listing.ok()) return ReplyError(r, listing.status());
  fi->fh = reinterpret_cast<uint64_t>(std::move(listing).value().release());
  if (!std::move(r).Open(fi)) delete ListingOf(fi);
}

void Readdir(Req& r, fuse_ino_t, size_t size, off_t offset, fuse_file_info* fi) {
  core::BackingDir* listing = ListingOf(fi);
  std::vector<char> buf(size);
  size_t used = 0;
  Status s = listing->List(static_cast<uint64_t>(offset), [&](const core::BackingEntry& e) {
    struct stat st {};
    st.st_ino = e.ino;
    st.st_mode = e.type;
    const size_t need = r.AddDirentry(buf.data() + used, size - used, e.name.c_str(), &st,
                                      static_cast<off_t>(e.next));
    if (need > size - used) return false;
    used += need;
    return true;
  });
  if (!s.ok() && used == 0) return ReplyError(r, s);
  std::move(r).Buf(buf.data(), used);
}

void Releasedir(Req& r, fuse_ino_t, fuse_file_info* fi) {
  delete ListingOf(fi);
  std::move(r).Err(0);
}

void Getxattr(Req& r, fuse_ino_t ino, const char* name, size_t size) {
  auto at = r.server().ReachOf(ino);
  if (!at) return (void)std::move(r).Err(ESTALE);
  auto value = at->dir->GetXattr(at->name, name);
  if (!value.ok()) return ReplyError(r, value.status());
  ReplySized(r, value->data(), value->size(), size);
}

void Listxattr(Req& r, fuse_ino_t ino, size_t size) {
  auto at = r.server().ReachOf(ino);
  if (!at) return (void)std::move(r).Err(ESTALE);
  auto names = at->dir->ListXattrs(at->name);
  if (!names.ok()) return ReplyError(r, names.status());
  std::string joined;
  for (const std::string& n : *names) joined.append(n).push_back('\0');
  ReplySized(r, joined.data(), joined.size(), size);
}

void Statfs(Req& r, fuse_ino_t) {
  auto st = r.server().root().StatFs();
  if (!st.ok()) return ReplyError(r, st.status());
  std::move(r).Statfs(*st);
}

// Read-only operations.
fuse_lowlevel_ops MakeOperations() {
  return OperationsOf<View>([](fuse_lowlevel_ops& ops) {
    ops.lookup = Serve<Lookup>::Call;
    ops.getattr = Serve<Getattr>::Call;
    ops.readlink = Serve<Readlink>::Call;
    ops.open = Serve<Open>::Call;
    ops.read = Serve<Read>::Call;
    ops.release = Serve<Release>::Call;
    ops.opendir = Serve<Opendir>::Call;
    ops.readdir = Serve<Readdir>::Call;
    ops.releasedir = Serve<Releasedir>::Call;
    ops.getxattr = Serve<Getxattr>::Call;
    ops.listxattr = Serve<Listxattr>::Call;
    ops.statfs = Serve<Statfs>::Call;
  });
}

}  // namespace

int ServeView(std::unique_ptr<core::BackingDir> root, const ViewServerOptions& o) {
  const rlim_t descriptors = RaiseFileLimit();
  // A descriptor per open directory handle: a quarter of what the process may open, so that
  // open files and listings have the rest.
  size_t max_open_dirs =
      descriptors == RLIM_INFINITY ? 65536 : std::clamp<size_t>(descriptors / 4, 64, 65536);
  if (o.max_open_dirs > 0) max_open_dirs = o.max_open_dirs;
  View view(std::move(root), max_open_dirs);
  Session session;
  session.mountpoint = o.mountpoint;
  session.source = o.source;
  session.subtype = "sigilfs-reverse";
  // Read only, and the kernel checks permissions against the plain entries' modes and owners.
  session.options = {"ro", "default_permissions"};
  session.options.insert(session.options.end(), o.fuse_options.begin(), o.fuse_options.end());
  session.foreground = o.foreground;
  static const fuse_lowlevel_ops ops = MakeOperations();
  session.ops = &ops;
  session.server = &view;
  return RunSession(session);
}

}  // namespace sigilfs::fuse
