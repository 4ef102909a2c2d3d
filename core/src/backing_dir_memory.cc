// BackingDir in memory: a whole store of directories, files, links and nodes, for tests and tools.
#include <fcntl.h>
#include <sys/xattr.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>

#include "sigilfs/core/backing_dir.h"
#include "sigilfs/mutex.h"

namespace sigilfs::core {
namespace {

// One device number per store, as every mounted filesystem has its own: objects of two stores
// are never taken for one.
dev_t NewMemoryDev() {
  static std::atomic<dev_t> next{0x53490000};
  return next.fetch_add(1, std::memory_order_relaxed);
}

struct Node {
  struct stat st {};
  std::shared_ptr<MemoryFileData> data;  // regular files
  std::string target;                    // symlinks
  // Directories: entries by name (name -> inode number, cursor), and by cursor, the order of
  // listings (a new entry gets the next cursor, so a listing never meets an entry twice).
  struct Slot {
    uint64_t ino;
    uint64_t cursor;
  };
  std::map<std::string, Slot, std::less<>> entries;
  std::map<uint64_t, std::string> by_cursor;
  uint64_t parent = 0;  // directories: the one holding them
  std::map<std::string, std::vector<uint8_t>, std::less<>> xattrs;
  int handles = 0;  // handles on this object: kept, even removed, while any is open
};

timespec Now() {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME, &t);
  return t;
}

// Every node of one store under one mutex: the store is for tests and tools, not for speed.
struct Store {
  const dev_t dev = NewMemoryDev();
  Mutex mu;
  std::unordered_map<uint64_t, Node> nodes SIGILFS_GUARDED_BY(mu);
  uint64_t next_ino SIGILFS_GUARDED_BY(mu) = 1;
  uint64_t next_cursor SIGILFS_GUARDED_BY(mu) = 1;

  uint64_t NewNode(mode_t mode) SIGILFS_REQUIRES(mu) {
    const uint64_t ino = next_ino++;
    Node& n = nodes[ino];
    n.st.st_dev = dev;
    n.st.st_ino = ino;
    n.st.st_mode = mode;
    n.st.st_nlink = S_ISDIR(mode) ? 2 : 1;
    n.st.st_blksize = 4096;
    n.st.st_atim = n.st.st_mtim = n.st.st_ctim = Now();
    if (S_ISREG(mode)) n.data = std::make_shared<MemoryFileData>();
    return ino;
  }

  // The node of a name in directory `dir`, or null.
  Node* Find(uint64_t dir, std::string_view name, uint64_t* ino = nullptr) SIGILFS_REQUIRES(mu) {
    Node& d = nodes.at(dir);
    auto it = d.entries.find(name);
    if (it == d.entries.end()) return nullptr;
    if (ino != nullptr) *ino = it->second.ino;
    return &nodes.at(it->second.ino);
  }

  void Insert(uint64_t dir, std::string_view name, uint64_t ino) SIGILFS_REQUIRES(mu) {
    Node& d = nodes.at(dir);
    const uint64_t cursor = next_cursor++;
    d.entries.emplace(std::string(name), Node::Slot{ino, cursor});
    d.by_cursor.emplace(cursor, std::string(name));
    d.st.st_mtim = d.st.st_ctim = Now();
    Node& n = nodes.at(ino);
    if (S_ISDIR(n.st.st_mode)) {
      n.parent = dir;
      ++d.st.st_nlink;
    }
  }

  // Takes entry `name` out of `dir` and returns its inode number; the node keeps its links.
  uint64_t Detach(uint64_t dir, std::string_view name) SIGILFS_REQUIRES(mu) {
    Node& d = nodes.at(dir);
    auto it = d.entries.find(name);
    const uint64_t ino = it->second.ino;
    d.by_cursor.erase(it->second.cursor);
    d.entries.erase(it);
    d.st.st_mtim = d.st.st_ctim = Now();
    if (S_ISDIR(nodes.at(ino).st.st_mode)) --d.st.st_nlink;
    return ino;
  }

  // Removes entry `name` of `dir`; its node loses the link and goes once nothing holds it.
  void Erase(uint64_t dir, std::string_view name) SIGILFS_REQUIRES(mu) {
    const uint64_t ino = Detach(dir, name);
    Node& n = nodes.at(ino);
    n.st.st_nlink = S_ISDIR(n.st.st_mode) ? 0 : n.st.st_nlink - 1;
    n.st.st_ctim = Now();
    Collect(ino);
  }

  // Keeps a node while it has a link or an open directory handle (open files keep only their
  // data, which they share).
  void Collect(uint64_t ino) SIGILFS_REQUIRES(mu) {
    Node& n = nodes.at(ino);
    if (n.st.st_nlink == 0 && n.handles == 0) nodes.erase(ino);
  }

  // True if directory `dir` is `ancestor` or lies below it.
  bool Within(uint64_t dir, uint64_t ancestor) SIGILFS_REQUIRES(mu) {
    for (uint64_t at = dir; at != 0; at = nodes.at(at).parent)
      if (at == ancestor) return true;
    return false;
  }
};

Status Fail(int error, std::string_view what, std::string_view name) {
  return Status::FromErrno(error, std::string(what) + " " + std::string(name));
}

// Listing cursors: "." and ".." (listing handles only) have 1 and 2, an entry its slot's + 2.
constexpr uint64_t kFirstEntryCursor = 2;

// The store's handle type (ObjectHandle): the inode number, 8 bytes.
constexpr int kMemoryHandleType = 0x4d454d;

class MemoryBackingDir final : public BackingDir {
 public:
  // Of object `ino`, whose Node::handles the caller has already counted this handle in.
  // `listing`: List includes "." and ".." (OpenListing).
  MemoryBackingDir(std::shared_ptr<Store> store, uint64_t ino, bool listing = false)
      : store_(std::move(store)), ino_(ino), listing_(listing) {}
  ~MemoryBackingDir() override {
    MutexLock lock(store_->mu);
    --store_->nodes.at(ino_).handles;
    store_->Collect(ino_);
  }
  MemoryBackingDir(const MemoryBackingDir&) = delete;
  MemoryBackingDir& operator=(const MemoryBackingDir&) = delete;

  Result<struct stat> Stat(std::string_view name) override {
    Store& s = *store_;
    MutexLock lock(s.mu);
    SIGILFS_ASSIGN_OR_RETURN(Node * n, Entry(s, name, "stat"));
    struct stat st = n->st;
    if (n->data) {
      MemoryFileData& d = *n->data;
      MutexLock data_lock(d.mu);
      st.st_size = static_cast<off_t>(d.bytes.size());
    } else if (S_ISLNK(st.st_mode)) {
      st.st_size = static_cast<off_t>(n->target.size());
    } else if (S_ISDIR(st.st_mode)) {
      st.st_size = 4096;
    }
    st.st_blocks = (st.st_size + 511) / 512;
    return st;
  }

  Result<std::unique_ptr<BackingDir>> OpenDir(std::string_view name) override {
    Store& s = *store_;
    uint64_t ino = 0;
    {
      MutexLock lock(s.mu);
      SIGILFS_RETURN_IF_ERROR(Alive(s, "open directory", name));
      SIGILFS_RETURN_IF_ERROR(DirOnly(s, "open directory", name));
      Node* n = name.empty() ? &s.nodes.at(ino_) : s.Find(ino_, name, &ino);
      if (name.empty()) ino = ino_;
      if (n == nullptr) return Fail(ENOENT, "open directory", name);
      if (!S_ISDIR(n->st.st_mode)) return Fail(ENOTDIR, "open directory", name);
      ++n->handles;
    }
    return std::unique_ptr<BackingDir>(new MemoryBackingDir(store_, ino));
  }

  Result<std::unique_ptr<BackingDir>> OpenObject(std::string_view path) override {
    Store& s = *store_;
    uint64_t ino = ino_;
    {
      MutexLock lock(s.mu);
      while (!path.empty()) {
        const size_t slash = path.find('/');
        const std::string_view name = path.substr(0, slash);
        Node& at = s.nodes.at(ino);
        if (S_ISLNK(at.st.st_mode)) return Fail(ELOOP, "open", name);
        if (!S_ISDIR(at.st.st_mode)) return Fail(ENOTDIR, "open", name);
        if (name.empty() || name == "." || name == "..") return Fail(EINVAL, "open", name);
        if (s.Find(ino, name, &ino) == nullptr) return Fail(ENOENT, "open", name);
        path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
      }
      ++s.nodes.at(ino).handles;
    }
    return std::unique_ptr<BackingDir>(new MemoryBackingDir(store_, ino));
  }

  Result<std::unique_ptr<BackingDir>> OpenListing(bool /*keep_atime*/) override {
    Store& s = *store_;
    {
      MutexLock lock(s.mu);
      SIGILFS_RETURN_IF_ERROR(DirOnly(s, "open directory", "."));
      ++s.nodes.at(ino_).handles;
    }
    return std::unique_ptr<BackingDir>(new MemoryBackingDir(store_, ino_, true));
  }

  Result<std::unique_ptr<BackingFile>> OpenFile(std::string_view name,
                                                const FileOpenMode& how) override {
    Store& s = *store_;
    MutexLock lock(s.mu);
    Node* n = nullptr;
    if (name.empty()) {
      n = &s.nodes.at(ino_);  // this object
    } else {
      SIGILFS_RETURN_IF_ERROR(Alive(s, "open", name));
      SIGILFS_RETURN_IF_ERROR(DirOnly(s, "open", name));
      n = s.Find(ino_, name);
    }
    if (n == nullptr) {
      if (!how.create) return Fail(ENOENT, "open", name);
      const uint64_t ino = s.NewNode(S_IFREG | (how.mode & 07777));
      s.Insert(ino_, name, ino);
      n = &s.nodes.at(ino);
    } else if (how.create && how.exclusive) {
      return Fail(EEXIST, "create", name);
    } else if (S_ISDIR(n->st.st_mode)) {
      return Fail(EISDIR, "open", name);
    } else if (S_ISLNK(n->st.st_mode)) {
      return Fail(ELOOP, "open", name);
    } else if (!S_ISREG(n->st.st_mode)) {
      return Fail(EINVAL, "open of a special file", name);
    }
    if (how.same_as != nullptr && !SameObject(n->st, *how.same_as))
      return Fail(ESTALE, "open of an entry that changed", name);
    return NewMemoryBackingFile(n->data);
  }

  Status MakeDir(std::string_view name, mode_t mode) override {
    return Make(name, S_IFDIR | (mode & 07777), "mkdir", {});
  }

  Status MakeNode(std::string_view name, mode_t mode, dev_t rdev) override {
    const mode_t type = mode & S_IFMT;
    if (type != S_IFCHR && type != S_IFBLK && type != S_IFIFO && type != S_IFSOCK &&
        type != S_IFREG)
      return Fail(EINVAL, "mknod", name);
    return Make(name, mode, "mknod", {}, rdev);
  }

  Status MakeSymlink(std::string_view name, std::string_view target) override {
    if (target.empty()) return Fail(ENOENT, "symlink", name);
    return Make(name, S_IFLNK | 0777, "symlink", target);
  }

  Result<std::string> ReadSymlink(std::string_view name) override {
    Store& s = *store_;
    MutexLock lock(s.mu);
    SIGILFS_ASSIGN_OR_RETURN(Node * n, Entry(s, name, "readlink"));
    if (!S_ISLNK(n->st.st_mode)) return Fail(EINVAL, "readlink", name);
    return n->target;
  }

  Status Link(std::string_view name, BackingDir& to, std::string_view to_name) override {
    auto* other = dynamic_cast<MemoryBackingDir*>(&to);
    if (other == nullptr || other->store_ != store_) return Fail(EXDEV, "link", name);
    Store& s = *store_;
    MutexLock lock(s.mu);
    SIGILFS_RETURN_IF_ERROR(DirOnly(s, "link", name));
    SIGILFS_RETURN_IF_ERROR(other->DirOnly(s, "link", to_name));
    uint64_t ino = 0;
    Node* n = s.Find(ino_, name, &ino);
    if (n == nullptr) return Fail(ENOENT, "link", name);
    if (S_ISDIR(n->st.st_mode)) return Fail(EPERM, "link of a directory", name);
    SIGILFS_RETURN_IF_ERROR(other->Alive(s, "link", to_name));
    if (s.Find(other->ino_, to_name) != nullptr) return Fail(EEXIST, "link", to_name);
    ++n->st.st_nlink;
    n->st.st_ctim = Now();
    s.Insert(other->ino_, to_name, ino);
    return Status::Ok();
  }

  Status Unlink(std::string_view name) override {
    Store& s = *store_;
    MutexLock lock(s.mu);
    if (name.empty()) return Fail(ENOENT, "unlink", name);
    SIGILFS_ASSIGN_OR_RETURN(Node * n, Entry(s, name, "unlink"));
    if (S_ISDIR(n->st.st_mode)) return Fail(EISDIR, "unlink", name);
    s.Erase(ino_, name);
    return Status::Ok();
  }

  Status RemoveDir(std::string_view name) override {
    Store& s = *store_;
    MutexLock lock(s.mu);
    if (name.empty()) return Fail(ENOENT, "rmdir", name);
    SIGILFS_ASSIGN_OR_RETURN(Node * n, Entry(s, name, "rmdir"));
    if (!S_ISDIR(n->st.st_mode)) return Fail(ENOTDIR, "rmdir", name);
    if (!n->entries.empty()) return Fail(ENOTEMPTY, "rmdir", name);
    s.Erase(ino_, name);
    return Status::Ok();
  }

  Status Rename(std::string_view name, BackingDir& to, std::string_view to_name,
                unsigned flags) override {
    auto* other = dynamic_cast<MemoryBackingDir*>(&to);
    if (other == nullptr || other->store_ != store_) return Fail(EXDEV, "rename", name);
    if ((flags & kNoReplace) != 0 && (flags & kExchange) != 0) return Fail(EINVAL, "rename", name);
    Store& s = *store_;
    MutexLock lock(s.mu);
    SIGILFS_RETURN_IF_ERROR(DirOnly(s, "rename", name));
    SIGILFS_RETURN_IF_ERROR(other->DirOnly(s, "rename", to_name));
    uint64_t ino = 0, target_ino = 0;
    Node* n = s.Find(ino_, name, &ino);
    if (n == nullptr) return Fail(ENOENT, "rename", name);
    SIGILFS_RETURN_IF_ERROR(other->Alive(s, "rename", to_name));
    Node* target = s.Find(other->ino_, to_name, &target_ino);
    const uint64_t to_dir = other->ino_;
    // A directory cannot go below itself (nor, in an exchange, the target below it).
    if (S_ISDIR(n->st.st_mode) && s.Within(to_dir, ino)) return Fail(EINVAL, "rename", name);
    if ((flags & kExchange) != 0) {
      if (target == nullptr) return Fail(ENOENT, "rename", to_name);
      if (S_ISDIR(target->st.st_mode) && s.Within(ino_, target_ino))
        return Fail(EINVAL, "rename", to_name);
      if (ino == target_ino) return Status::Ok();
      Swap(s, ino_, name, ino, to_dir, to_name, target_ino);
      return Status::Ok();
    }
    if (target != nullptr) {
      if ((flags & kNoReplace) != 0) return Fail(EEXIST, "rename", to_name);
      if (ino == target_ino) return Status::Ok();  // two names of one file: nothing to do
      if (S_ISDIR(n->st.st_mode) && !S_ISDIR(target->st.st_mode))
        return Fail(ENOTDIR, "rename", to_name);
      if (!S_ISDIR(n->st.st_mode) && S_ISDIR(target->st.st_mode))
        return Fail(EISDIR, "rename", to_name);
      if (S_ISDIR(target->st.st_mode) && !target->entries.empty())
        return Fail(ENOTEMPTY, "rename", to_name);
      s.Erase(to_dir, to_name);
    }
    Move(s, ino_, name, ino, to_dir, to_name);
    return Status::Ok();
  }

  Status List(uint64_t from, const std::function<bool(const BackingEntry&)>& emit) override {
    // Taken under the lock, emitted without it: `emit` may call back into the store.
    std::vector<BackingEntry> batch;
    Store& s = *store_;
    {
      MutexLock lock(s.mu);
      SIGILFS_RETURN_IF_ERROR(DirOnly(s, "readdir", "."));
      SIGILFS_RETURN_IF_ERROR(Alive(s, "readdir", "."));
      const Node& d = s.nodes.at(ino_);
      if (listing_ && from < 1) batch.push_back(BackingEntry{".", ino_, S_IFDIR, 1});
      if (listing_ && from < kFirstEntryCursor)
        batch.push_back(BackingEntry{"..", d.parent != 0 ? d.parent : ino_, S_IFDIR, 2});
      const uint64_t after = from < kFirstEntryCursor ? 0 : from - kFirstEntryCursor;
      for (auto it = d.by_cursor.upper_bound(after); it != d.by_cursor.end(); ++it) {
        const Node::Slot& slot = d.entries.find(it->second)->second;
        batch.push_back(BackingEntry{it->second, slot.ino, s.nodes.at(slot.ino).st.st_mode & S_IFMT,
                                     it->first + kFirstEntryCursor});
      }
    }
    for (const BackingEntry& e : batch)
      if (!emit(e)) break;
    return Status::Ok();
  }

  Status SetMode(std::string_view name, mode_t mode) override {
    Store& s = *store_;
    MutexLock lock(s.mu);
    SIGILFS_ASSIGN_OR_RETURN(Node * n, Entry(s, name, "chmod"));
    if (S_ISLNK(n->st.st_mode)) return Fail(EOPNOTSUPP, "chmod of a symlink", name);
    n->st.st_mode = (n->st.st_mode & S_IFMT) | (mode & 07777);
    n->st.st_ctim = Now();
    return Status::Ok();
  }

  Status SetOwner(std::string_view name, uid_t uid, gid_t gid) override {
    Store& s = *store_;
    MutexLock lock(s.mu);
    SIGILFS_ASSIGN_OR_RETURN(Node * n, Entry(s, name, "chown"));
    if (uid != static_cast<uid_t>(-1)) n->st.st_uid = uid;
    if (gid != static_cast<gid_t>(-1)) n->st.st_gid = gid;
    n->st.st_ctim = Now();
    return Status::Ok();
  }

  Status SetTimes(std::string_view name, const struct timespec times[2]) override {
    Store& s = *store_;
    MutexLock lock(s.mu);
    SIGILFS_ASSIGN_OR_RETURN(Node * n, Entry(s, name, "utimens"));
    const timespec now = Now();
    timespec* fields[2] = {&n->st.st_atim, &n->st.st_mtim};
    for (int i = 0; i < 2; ++i) {
      if (times == nullptr || times[i].tv_nsec == UTIME_NOW)
        *fields[i] = now;
      else if (times[i].tv_nsec != UTIME_OMIT)
        *fields[i] = times[i];
    }
    n->st.st_ctim = now;
    return Status::Ok();
  }

  Result<std::vector<uint8_t>> GetXattr(std::string_view name, std::string_view attr) override {
    Store& s = *store_;
    MutexLock lock(s.mu);
    SIGILFS_ASSIGN_OR_RETURN(Node * n, Entry(s, name, "getxattr"));
    auto it = n->xattrs.find(attr);
    if (it == n->xattrs.end()) return Fail(ENODATA, "getxattr", attr);
    return it->second;
  }

  Status SetXattr(std::string_view name, std::string_view attr, ByteSpan value,
                  int flags) override {
    Store& s = *store_;
    MutexLock lock(s.mu);
    SIGILFS_ASSIGN_OR_RETURN(Node * n, Entry(s, name, "setxattr"));
    auto it = n->xattrs.find(attr);
    if ((flags & XATTR_CREATE) != 0 && it != n->xattrs.end()) return Fail(EEXIST, "setxattr", attr);
    if ((flags & XATTR_REPLACE) != 0 && it == n->xattrs.end())
      return Fail(ENODATA, "setxattr", attr);
    n->xattrs[std::string(attr)].assign(value.begin(), value.end());
    n->st.st_ctim = Now();
    return Status::Ok();
  }

  Status RemoveXattr(std::string_view name, std::string_view attr) override {
    Store& s = *store_;
    MutexLock lock(s.mu);
    SIGILFS_ASSIGN_OR_RETURN(Node * n, Entry(s, name, "removexattr"));
    auto it = n->xattrs.find(attr);
    if (it == n->xattrs.end()) return Fail(ENODATA, "removexattr", attr);
    n->xattrs.erase(it);
    n->st.st_ctim = Now();
    return Status::Ok();
  }

  Result<std::vector<std::string>> ListXattrs(std::string_view name) override {
    Store& s = *store_;
    MutexLock lock(s.mu);
    SIGILFS_ASSIGN_OR_RETURN(Node * n, Entry(s, name, "listxattr"));
    std::vector<std::string> names;
    for (const auto& [attr, value] : n->xattrs) names.push_back(attr);
    return names;
  }

  Result<ObjectHandle> Handle(std::string_view name) override {
    Store& s = *store_;
    MutexLock lock(s.mu);
    SIGILFS_ASSIGN_OR_RETURN(Node * n, Entry(s, name, "file handle"));
    const auto ino = static_cast<uint64_t>(n->st.st_ino);
    ObjectHandle out;
    out.type = kMemoryHandleType;
    out.bytes.resize(sizeof ino);
    std::memcpy(out.bytes.data(), &ino, sizeof ino);
    return out;
  }

  Result<std::unique_ptr<BackingDir>> OpenByHandle(const ObjectHandle& handle) override {
    uint64_t ino = 0;
    if (handle.type != kMemoryHandleType || handle.bytes.size() != sizeof ino)
      return Fail(ESTALE, "open by handle", "");
    std::memcpy(&ino, handle.bytes.data(), sizeof ino);
    Store& s = *store_;
    {
      MutexLock lock(s.mu);
      auto it = s.nodes.find(ino);
      if (it == s.nodes.end() || it->second.st.st_nlink == 0)
        return Fail(ESTALE, "open by handle", "");
      ++it->second.handles;
    }
    return std::unique_ptr<BackingDir>(new MemoryBackingDir(store_, ino));
  }

  // A directory's path, from its parents; none for other objects (the store keeps no parent
  // for them, as a file's path may be unknown to a real one).
  std::vector<std::string> PathTo(BackingDir& object) override {
    auto* other = dynamic_cast<MemoryBackingDir*>(&object);
    if (other == nullptr || other->store_ != store_) return {};
    Store& s = *store_;
    MutexLock lock(s.mu);
    std::vector<std::string> parts;
    for (uint64_t at = other->ino_; at != ino_;) {
      const Node& n = s.nodes.at(at);
      if (!S_ISDIR(n.st.st_mode) || n.parent == 0 || n.st.st_nlink == 0) return {};
      const Node& parent = s.nodes.at(n.parent);
      auto it = std::find_if(parent.entries.begin(), parent.entries.end(),
                             [at](const auto& e) { return e.second.ino == at; });
      if (it == parent.entries.end()) return {};
      parts.insert(parts.begin(), it->first);
      at = n.parent;
    }
    return parts;
  }

  Result<struct statvfs> StatFs() override {
    struct statvfs fs {};
    fs.f_bsize = fs.f_frsize = 4096;
    fs.f_blocks = fs.f_bfree = fs.f_bavail = uint64_t{1} << 30;  // 4 TiB, all free
    fs.f_files = fs.f_ffree = fs.f_favail = uint64_t{1} << 30;
    fs.f_namemax = 255;
    return fs;
  }

  Status Sync() override { return Status::Ok(); }

 private:
  // This directory itself for an empty name, else the entry; ENOENT if it is gone.
  Result<Node*> Entry(Store& s, std::string_view name, std::string_view what)
      SIGILFS_REQUIRES(s.mu) {
    Node& self = s.nodes.at(ino_);
    if (name.empty()) return &self;  // removed too: its own calls still work, as on a descriptor
    SIGILFS_RETURN_IF_ERROR(DirOnly(s, what, name));
    Node* n = s.Find(ino_, name);
    if (n == nullptr) return Fail(ENOENT, what, name);
    return n;
  }

  // Names are a directory's: a handle on another object answers ENOTDIR.
  Status DirOnly(Store& s, std::string_view what, std::string_view name) SIGILFS_REQUIRES(s.mu) {
    if (!S_ISDIR(s.nodes.at(ino_).st.st_mode)) return Fail(ENOTDIR, what, name);
    return Status::Ok();
  }

  // New entries cannot go into a removed directory.
  Status Alive(Store& s, std::string_view what, std::string_view name) SIGILFS_REQUIRES(s.mu) {
    if (s.nodes.at(ino_).st.st_nlink == 0) return Fail(ENOENT, what, name);
    return Status::Ok();
  }

  Status Make(std::string_view name, mode_t mode, std::string_view what, std::string_view target,
              dev_t rdev = 0) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos)
      return Fail(EINVAL, what, name);
    if (name.size() > 255) return Fail(ENAMETOOLONG, what, name);
    Store& s = *store_;
    MutexLock lock(s.mu);
    SIGILFS_RETURN_IF_ERROR(DirOnly(s, what, name));
    SIGILFS_RETURN_IF_ERROR(Alive(s, what, name));
    if (s.Find(ino_, name) != nullptr) return Fail(EEXIST, what, name);
    const uint64_t ino = s.NewNode(mode);
    Node& n = s.nodes.at(ino);
    n.target = std::string(target);
    n.st.st_rdev = rdev;
    s.Insert(ino_, name, ino);
    return Status::Ok();
  }

  // Moves entry `name` of `from` (inode `ino`) to `to_name` of `to` (free by now).
  static void Move(Store& s, uint64_t from, std::string_view name, uint64_t ino, uint64_t to,
                   std::string_view to_name) SIGILFS_REQUIRES(s.mu) {
    s.Detach(from, name);
    s.Insert(to, to_name, ino);
    s.nodes.at(ino).st.st_ctim = Now();
  }

  // Two entries trade their objects (renameat2 RENAME_EXCHANGE).
  static void Swap(Store& s, uint64_t a_dir, std::string_view a_name, uint64_t a, uint64_t b_dir,
                   std::string_view b_name, uint64_t b) SIGILFS_REQUIRES(s.mu) {
    Node& da = s.nodes.at(a_dir);
    Node& db = s.nodes.at(b_dir);
    da.entries.find(a_name)->second.ino = b;
    db.entries.find(b_name)->second.ino = a;
    Node& na = s.nodes.at(a);
    Node& nb = s.nodes.at(b);
    if (S_ISDIR(na.st.st_mode)) {
      na.parent = b_dir;
      --da.st.st_nlink;
      ++db.st.st_nlink;
    }
    if (S_ISDIR(nb.st.st_mode)) {
      nb.parent = a_dir;
      --db.st.st_nlink;
      ++da.st.st_nlink;
    }
    da.st.st_mtim = da.st.st_ctim = db.st.st_mtim = db.st.st_ctim = Now();
  }

  std::shared_ptr<Store> store_;
  const uint64_t ino_;
  const bool listing_;
};

}  // namespace

std::unique_ptr<BackingDir> NewMemoryBackingStore() {
  auto store = std::make_shared<Store>();
  uint64_t root = 0;
  {
    MutexLock lock(store->mu);
    root = store->NewNode(S_IFDIR | 0755);
    ++store->nodes.at(root).handles;
  }
  return std::make_unique<MemoryBackingDir>(std::move(store), root);
}

}  // namespace sigilfs::core
