// The reverse view's FUSE daemon: a node per name the kernel looked up (core::NodeTable), the
// directory handles in use kept open, everything else asked of the store as it is (it is read
// only, and sealed on read by the store itself).
#include "view_server.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <utility>

#include "../daemon/libfuse.h"
#include "../daemon/log.h"
#include "../daemon/replies.h"
#include "../daemon/session.h"
#include "sigilfs/core/node_table.h"
#include "sigilfs/core/open_dir_cache.h"
#include "sigilfs/fuse/errno_map.h"
#include "sigilfs/mutex.h"

namespace sigilfs::fuse {
namespace {

// Changes in the plain tree show in the view after at most this long.
constexpr double kTimeout = 1.0;

// The view's nodes are a core::NodeTable's, keyed by name (a view's inode numbers are the
// plain tree's, which another name may take meanwhile): the table keeps the kernel's lookups,
// node ids, generations and names, the view the directory handles it holds open.
class View {
 public:
  // At most `max_open_dirs` directory handles (a descriptor each) are kept open at once.
  View(std::unique_ptr<core::BackingDir> root, const struct stat& root_st, size_t max_open_dirs)
      : root_(std::move(root)), table_(root_st, TableOptions()), open_dirs_(max_open_dirs) {}

  core::BackingDir& root() { return *root_; }

  // The store handle of directory node `ino` (null if it is none, or unknown).
  std::shared_ptr<core::BackingDir> DirOf(fuse_ino_t ino) {
    std::shared_ptr<core::Node> node = table_.Known(ino);
    if (node == nullptr) return nullptr;
    return Open(node);
  }

  // The store and name through which node `ino` is reached: a directory itself (empty name),
  // any other entry through its parent.
  struct Reach {
    std::shared_ptr<core::BackingDir> dir;
    std::string name;
  };
  std::optional<Reach> ReachOf(fuse_ino_t ino) {
    std::shared_ptr<core::Node> node = table_.Known(ino);
    if (node == nullptr) return std::nullopt;
    if (node->type == S_IFDIR) {
      auto dir = Open(node);
      if (dir == nullptr) return std::nullopt;
      return Reach{std::move(dir), ""};
    }
    core::Node::Name name = FirstName(*node);
    auto dir = name.parent == nullptr ? nullptr : Open(name.parent);
    if (dir == nullptr) return std::nullopt;
    return Reach{std::move(dir), std::move(name.stored)};
  }

  // The node of entry `name` (attributes `st`) of `parent`, made or found again, counted as
  // looked up once; `dir` is its handle if it is a directory. ESTALE where `parent_ino` is no
  // longer known.
  Result<std::shared_ptr<core::Node>> Remember(fuse_ino_t parent_ino, const std::string& name,
                                               const struct stat& st,
                                               std::shared_ptr<core::BackingDir> dir) {
    std::shared_ptr<core::Node> parent = table_.Known(parent_ino);
    if (parent == nullptr || parent->type != S_IFDIR)
      return Status::FromErrno(ESTALE, "a forgotten directory");
    std::shared_ptr<core::Node> node = table_.Intern(st, parent, name, {});
    // What the name is now: a handle opened before is of what it was.
    if (dir != nullptr)
      open_dirs_.Keep(node, std::move(dir));
    else
      (void)open_dirs_.Close(*node);
    return node;
  }

  uint64_t IdOf(const core::Node& node) const { return table_.IdOf(node); }

  void Forget(fuse_ino_t ino, uint64_t n) {
    std::vector<std::shared_ptr<core::Node>> dropped;
    table_.Forget(ino, n, &dropped);
    for (const std::shared_ptr<core::Node>& node : dropped) (void)open_dirs_.Close(*node);
  }

 private:
  static core::NodeTableOptions TableOptions() {
    core::NodeTableOptions options;
    options.keeps_inode_numbers = false;
    return options;
  }

  static core::Node::Name FirstName(const core::Node& node) {
    MutexLock lock(node.name_mu);
    return node.names.empty() ? core::Node::Name{} : node.names.front();
  }

  // A directory node's handle, opened again through its parents if it was closed (null if
  // that fails: the directory is gone). Nodes dropped from the table meanwhile (Intern replaces
  // a node whose object changed) are not asked for again: their handles fall out of the cache.
  std::shared_ptr<core::BackingDir> Open(const std::shared_ptr<core::Node>& node) {
    if (node->type != S_IFDIR) return nullptr;
    if (node == table_.root()) return root_;
    if (auto dir = open_dirs_.Find(*node)) return dir;
    core::Node::Name name = FirstName(*node);
    if (name.parent == nullptr) return nullptr;
    auto parent = Open(name.parent);
    if (parent == nullptr) return nullptr;
    auto opened = parent->OpenDir(name.stored);
    if (!opened.ok()) return nullptr;
    std::shared_ptr<core::BackingDir> dir = std::move(opened).value();
    open_dirs_.Keep(node, dir);
    return dir;
  }

  const std::shared_ptr<core::BackingDir> root_;  // open for good, outside open_dirs_
  core::NodeTable table_;
  core::OpenDirCache open_dirs_;  // the other directories' handles in use
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
  auto node = view.Remember(parent, name, *st, std::move(dir));
  if (!node.ok()) return ReplyError(r, node.status());
  fuse_entry_param e{};
  e.ino = view.IdOf(**node);
  e.generation = (*node)->generation;
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
  auto root_st = root->Stat("");
  if (!root_st.ok()) {
    std::fprintf(stderr, "sigilfs reverse: %s\n", root_st.status().ToString().c_str());
    return 1;
  }
  View view(std::move(root), *root_st, max_open_dirs);
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
