// The mounted filesystem: every operation as DoX() returning Status/Result (filesystem.cc), over
// its nodes (nodes.cc); lowlevel.cc turns requests into these calls and results into replies.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sigilfs/core/absent_acls.h"
#include "sigilfs/core/node_table.h"
#include "sigilfs/core/open_dir_cache.h"
#include "sigilfs/core/permissions.h"
#include "sigilfs/core/tree.h"
#include "sigilfs/core/verity.h"
#include "sigilfs/core/volume.h"
#include "sigilfs/mutex.h"
#include "sigilfs/status.h"

namespace sigilfs::fuse {

// A handle on a backing object (core::BackingDir::OpenObject), shared by the calls using it.
using Object = std::shared_ptr<core::BackingDir>;

// A node of the mount (core::NodeTable holds them): what the namespace keeps of it, and, while
// it is open, its file: open files hold their cipher file inside their FileContents.
struct Inode : core::Node {
  // Regular files while open.
  std::shared_ptr<core::FileContents> contents SIGILFS_GUARDED_BY(mu);
  Object object SIGILFS_GUARDED_BY(mu);  // while open: the cipher file, for its attributes
  int open_count SIGILFS_GUARDED_BY(mu) = 0;
  // Opens for writing (a file being written cannot be sealed).
  int writers SIGILFS_GUARDED_BY(mu) = 0;
  // Logged once, not on every retry of the same bad page.
  std::string last_read_error SIGILFS_GUARDED_BY(mu);
};

struct Entry {
  std::shared_ptr<Inode> inode;  // with one lookup reference taken for the kernel
  struct stat attr;
  bool damaged = false;  // the size could not be established: attributes not to be cached
};

// Who asks: for ownership of new files, setgid rules and the umask of creates.
struct Caller {
  uid_t uid = 0;
  gid_t gid = 0;
  mode_t umask = 0;  // create, mkdir, mknod: applied here unless a default ACL is
  // Supplementary groups, where a rule may need them: asked for only when it does (libfuse
  // reads them from /proc, two reads of a file per call).
  std::function<std::vector<gid_t>()> groups;
  // Whether the caller holds CAP_FSETID (changes keep set-ID bits), where the kernel did not
  // say: asked for only when a file has such bits. Unset: it does not.
  std::function<bool()> fsetid;
  bool InGroup(gid_t g) const {
    if (uid == 0 || gid == g) return true;
    if (!groups) return false;
    const std::vector<gid_t> list = groups();
    return std::find(list.begin(), list.end(), g) != list.end();
  }
};

// Which attributes DoSetattr changes (the same bits as FUSE_SET_ATTR_*).
enum SetattrBits : int {
  kSetMode = 1 << 0,
  kSetUid = 1 << 1,
  kSetGid = 1 << 2,
  kSetSize = 1 << 3,
  kSetAtime = 1 << 4,
  kSetMtime = 1 << 5,
  kSetAtimeNow = 1 << 7,
  kSetMtimeNow = 1 << 8,
};

struct MountOptions {
  bool read_only = false;
  bool set_owner = false;    // chown new files to the caller (root daemon serving other users)
  bool acls = false;         // keep POSIX ACLs (needs extended attributes)
  bool kernel_acls = false;  // and have the kernel check permissions against them
  // How many nodes the kernel forgot stay known, most recently forgotten first, so that file
  // handles (open_by_handle_at, NFS export) naming them still open. 0: only the nodes the
  // kernel holds.
  size_t handle_cache = kDefaultHandleCache;
  static constexpr size_t kDefaultHandleCache = 32768;  // about 0.7 KiB each
  size_t max_readahead = 0;  // bytes the kernel may read ahead (0: what it proposes)
  // Other mounts change the vault too (`mount --shared`): the kernel's cached pages of a file
  // are dropped at each open (close-to-open).
  bool shared = false;
  // Directory handles kept open for the requests in them (core::OpenDirCache), a descriptor
  // each; 0: every request reaches its directory by path. Used only where the mount is its
  // store's one writer and the store keeps inode numbers (a shared or sshfs store walks paths).
  size_t open_dirs = 0;
};

// The node table in numbers (the daemon's stats file).
struct NodeStats {
  uint64_t nodes = 0;           // nodes the daemon knows, the kernel's and remembered ones
  uint64_t remembered = 0;      // nodes the kernel forgot, kept for file handles
  uint64_t handle_lookups = 0;  // handles the kernel asked about (it forgot their node), stale too
  uint64_t getattrs = 0;        // GETATTR requests (the kernel's attribute cache missed)
  uint64_t getxattrs = 0;       // GETXATTR requests
  uint64_t lookups = 0;         // LOOKUP requests of a name (the kernel's entry cache missed)
  uint64_t open_dirs = 0;       // directory handles kept open for requests (OpenDirCache)
};

// Thread-safety: safe for concurrent access without external synchronization.
// Lock order: tree_mu_ (names and parents) before Inode::mu before the node table's lock.
class Filesystem {
 public:
  Filesystem(std::unique_ptr<core::Volume> volume, MountOptions options);
  ~Filesystem();

  std::shared_ptr<Inode> root() const { return root_; }
  std::shared_ptr<Inode> Get(uint64_t nodeid) const;
  uint64_t NodeId(const core::Node& inode) const { return nodes_->IdOf(inode); }
  void Forget(uint64_t nodeid, uint64_t n);
  NodeStats node_stats() const;

  Result<Entry> DoLookup(Inode& parent, const std::string& name);
  // File handles (FUSE_CAP_EXPORT_SUPPORT): the node `nodeid` names, if the daemon still knows
  // it — held by the kernel or remembered after it was forgotten — with a lookup reference
  // (the kernel's LOOKUP(nodeid, ".")); ESTALE for a node gone, unlinked or never known. Any
  // value may arrive here, so it is checked before it is used as a node.
  Result<Entry> DoLookupHandle(uint64_t nodeid);
  // The parent of a directory the kernel holds (LOOKUP(nodeid, "..")), to reconnect a
  // directory opened by handle to its path.
  Result<Entry> DoLookupParent(Inode& dir);
  // A lookup by stored name in an open directory (readdirplus: the listing already decoded it).
  Result<Entry> DoLookupStored(Inode& parent, core::BackingDir& dir, const std::string& stored);
  Result<struct stat> DoGetattr(Inode& inode);
  Result<struct stat> DoSetattr(Inode& inode, const struct stat& attr, int to_set);
  Result<std::string> DoReadlink(Inode& inode);
  Result<Entry> DoMknod(Inode& parent, const std::string& name, mode_t mode, dev_t rdev,
                        const Caller& caller);
  Result<Entry> DoMkdir(Inode& parent, const std::string& name, mode_t mode, const Caller& caller);
  Result<Entry> DoSymlink(Inode& parent, const std::string& name, const std::string& target,
                          const Caller& caller);
  Result<Entry> DoLink(Inode& inode, Inode& new_parent, const std::string& new_name);
  Status DoUnlink(Inode& parent, const std::string& name);
  Status DoRmdir(Inode& parent, const std::string& name);
  Status DoRename(Inode& parent, const std::string& name, Inode& new_parent,
                  const std::string& new_name, unsigned int flags);
  Result<struct statvfs> DoStatfs();

  // Regular files. Open/Create take an open reference released by Release.
  Status DoOpen(Inode& inode, int flags);
  Result<Entry> DoCreate(Inode& parent, const std::string& name, mode_t mode, int flags,
                         const Caller& caller);
  Result<size_t> DoRead(Inode& inode, uint64_t offset, MutableByteSpan out);
  Result<size_t> DoWrite(Inode& inode, uint64_t offset, core::Source& source, size_t length,
                         bool append);
  // fallocate (mode as fallocate(2)) and lseek SEEK_DATA/SEEK_HOLE on an open regular file.
  Status DoFallocate(Inode& inode, int mode, uint64_t offset, uint64_t length);
  Result<uint64_t> DoSeekData(Inode& inode, uint64_t offset, bool data);
  // A flush that fails for the only open file of `inode` gives up what could not be stored
  // (`*gave_up`: the size or contents changed behind the kernel, which must be told).
  Status DoFlush(Inode& inode, bool* gave_up);
  // The names the kernel may cache for `inode`: (parent node id, plaintext name) for each of
  // its names that still decrypts.
  struct KernelName {
    uint64_t parent;
    std::string name;
  };
  std::vector<KernelName> NamesOf(Inode& inode);
  // Clears set-user-ID, and set-group-ID where the group may execute or the caller is not in
  // the file's group, as a write, truncate, O_TRUNC open or fallocate by a caller without
  // CAP_FSETID must (the kernel leaves it to the daemon under FUSE_HANDLE_KILLPRIV_V2; the rule,
  // core::permissions::ClearedSetId, is the kernel's setattr_should_drop_suidgid). The new
  // permission bits if the mode changed.
  Result<std::optional<mode_t>> ClearSetId(Inode& inode, const Caller& caller);
  Status DoFsync(Inode& inode, bool datasync);
  Status DoRelease(Inode& inode, bool writer);

  // Extended attributes: `user.*`, and the POSIX ACLs `system.posix_acl_access` and
  // `system.posix_acl_default` once the kernel took them (EOPNOTSUPP for the rest), names hashed
  // and values sealed (NameCodec). Setting an access ACL also sets the mode it stands for (and
  // stores nothing if the mode says it all); the caller's groups decide whether set-group-ID
  // stays. Get/list return the value or list; the caller sizes its reply.
  Status DoSetxattr(Inode& inode, const std::string& name, ByteSpan value, int flags,
                    const Caller& caller);
  Result<std::vector<uint8_t>> DoGetxattr(Inode& inode, const std::string& name);
  Result<std::string> DoListxattr(Inode& inode);  // NUL-terminated names, back to back
  Status DoRemovexattr(Inode& inode, const std::string& name);

  // fs-verity on an open regular file: seal it (ETXTBSY while open for writing elsewhere), its
  // descriptor (ENODATA when not sealed), and whether it is sealed.
  Result<core::verity::Digest> DoEnableVerity(Inode& inode, ByteSpan salt);
  Result<core::verity::Descriptor> DoVerityDescriptor(Inode& inode);
  bool DoIsSealed(Inode& inode);

  // Directories: a handle is the directory opened for its listing, and its IV.
  struct DirHandle {
    std::unique_ptr<core::BackingDir> listing;
    core::DirIv iv;
  };
  // Opens a handle, kept here until DoReleasedir: a mount that ends with directories still
  // open (SIGTERM, a killed connection) frees what the kernel never released.
  Result<DirHandle*> DoOpendir(Inode& inode);
  void DoReleasedir(DirHandle* handle);
  core::Volume& volume() { return *volume_; }

  // POSIX ACLs: asked for (MountOptions::acls), and whether the kernel took what they need (set
  // in init, before any other request): the umask left to the daemon, which applies it only
  // where no default ACL is inherited. With kernel_acls the kernel also checks permissions
  // against them.
  bool wants_acls() const { return options_.acls; }
  bool shared() const { return options_.shared; }
  bool wants_kernel_acls() const { return options_.kernel_acls; }
  void CountGetattr() { getattrs_.fetch_add(1, std::memory_order_relaxed); }
  void CountGetxattr() { getxattrs_.fetch_add(1, std::memory_order_relaxed); }
  void CountLookup() { lookups_.fetch_add(1, std::memory_order_relaxed); }
  // A name of directory `dir` that does not decrypt (`stored`, refused for `why`: changed, moved
  // from another directory, its side file damaged), left out of a listing: logged, by its cipher
  // path, the first time this mount meets it, and counted. Listing goes on without it, so the
  // directory's other entries stay reachable (docs/threat-model.md).
  void NoteSkippedName(const core::Node& dir, const std::string& stored, const Status& why);
  // How many names listings left out so far, each counted once; past kMaxSkippedNames no more
  // are told apart (or logged), and the count stops there.
  uint64_t skipped_names() const;
  static constexpr size_t kMaxSkippedNames = 10000;
  size_t max_readahead() const { return options_.max_readahead; }
  void set_acls(bool on) { acls_.store(on, std::memory_order_relaxed); }
  bool acls() const { return acls_.load(std::memory_order_relaxed); }

  // Writes back every open file (on unmount and on signals).
  void FlushAll();

  // The kernel never updates a FUSE inode's access time: the daemon's reads of the cipher
  // objects do, through the backing filesystem. So under the mount's noatime (nodiratime for
  // directories) cipher files and directories are opened with O_NOATIME. `probe` gives the
  // mount's options as the mount table shows them ("rw,nosuid,noatime"); it is asked again at
  // most once a second, so that a remount changing them takes effect.
  void WatchAtimeOptions(std::function<std::string()> probe);

  // For idle unmount: every request marks the time; open files are counted.
  void Touch() {
    last_activity_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                            std::memory_order_relaxed);
  }
  std::chrono::steady_clock::duration IdleFor() const {
    return std::chrono::steady_clock::now().time_since_epoch() -
           std::chrono::steady_clock::duration(last_activity_ns_.load(std::memory_order_relaxed));
  }
  int open_files() const { return open_files_.load(std::memory_order_relaxed); }

 private:
  // A name inside a directory, resolved: the directory (a handle and its stat), its IV, and the
  // name as stored in the cipher directory.
  struct Place {
    std::unique_ptr<core::Tree::Dir> dir;  // its handle and IV
    struct stat dir_st {};                 // the directory's attributes, where asked for (Resolve)
    core::EntryName name;                  // resolved: plaintext and stored form
    const std::string& stored() const { return name.stored(); }
  };
  // A node's directory as the library's: its handle and IV (`st`, if given, its attributes).
  Result<std::unique_ptr<core::Tree::Dir>> TreeDirOf(core::Node& dir, struct stat* st = nullptr)
      SIGILFS_REQUIRES_SHARED(tree_mu_);
  // `name` in directory `dir`; Place::dir_st is filled only `with_dir_stat` (a new entry's
  // owner and set-group-ID bit follow the directory's), as it may cost a store call.
  Result<Place> Resolve(Inode& dir, const std::string& name, bool with_dir_stat = false)
      SIGILFS_REQUIRES_SHARED(tree_mu_);

  std::string PathLocked(const core::Node& inode) const SIGILFS_REQUIRES_SHARED(tree_mu_) {
    return nodes_->PathOf(inode);
  }
  // Whether the mount's options say noatime for a file or a `directory`: the daemon's opens then
  // keep the cipher object's access time (O_NOATIME, where the daemon may use it).
  bool NoAtime(bool directory);
  // A handle on the node's backing object; `st`, if given, gets its attributes. A node whose
  // names are all gone is reached through its removed handle, if it has one; a directory's
  // handle is kept for the next request where open_dirs_ is on.
  Result<Object> OpenInode(const core::Node& inode, struct stat* st = nullptr) const
      SIGILFS_REQUIRES_SHARED(tree_mu_);
  // What a removal asks before an entry (`st`) goes: the entry's node, if known (`*node`), and
  // whether to keep a handle on its object (core::Tree::Removed): where the kernel holds the
  // node, no other name of it is known here and the object has no other link, so that the
  // node stays reachable once removed (core::Node::removed).
  // The entry is `stored` in `parent`.
  core::Tree::Removed KeepOnRemoval(std::shared_ptr<core::Node>* node, const core::Node& parent,
                                    const std::string& stored) SIGILFS_REQUIRES(tree_mu_);
  // After the removal: `node`, left without names, keeps `object`, and with it the side file of
  // a symlink's `target` (Volume::TargetToRelease; released now otherwise).
  void KeepRemoved(core::Node& node, Object object, const std::string& target = {})
      SIGILFS_REQUIRES(tree_mu_, node.name_mu);
  Result<core::DirIv> DirIvOf(core::Node& dir, core::BackingDir& backing)
      SIGILFS_REQUIRES_SHARED(tree_mu_);
  // The node for backing object `st`, found as `stored` in `parent` (one lookup reference
  // taken); a new node's id comes from the object's own file handle, asked of `at` and
  // `at_name` (an empty name: `at` is the object).
  Result<std::shared_ptr<Inode>> Intern(const struct stat& st,
                                        const std::shared_ptr<core::Node>& parent,
                                        const std::string& stored, core::BackingDir& at,
                                        const std::string& at_name)
      SIGILFS_REQUIRES_SHARED(tree_mu_);
  // A node id from an earlier mount (or one forged): the object its backing file handle opens,
  // if the backing filesystem still has it and it lies inside the vault, reached again by its
  // path from the cipher root (needs CAP_DAC_READ_SEARCH, which a root daemon has).
  Result<Entry> ResolvePersistentId(uint64_t nodeid) SIGILFS_REQUIRES_SHARED(tree_mu_);
  // `parts` walked from the cipher root, each level interned: the entry of the last if it is
  // the object `st` with node id `nodeid`, else ESTALE.
  Result<Entry> WalkToPersistentId(const std::vector<std::string>& parts, const struct stat& st,
                                   uint64_t nodeid) SIGILFS_REQUIRES_SHARED(tree_mu_);
  Result<Entry> EntryAt(const std::shared_ptr<core::Node>& parent, core::BackingDir& dir,
                        const std::string& stored) SIGILFS_REQUIRES_SHARED(tree_mu_);
  // A known node's entry, reached through its first name that still leads to it (ESTALE if
  // none does).
  Result<Entry> EntryOf(const std::shared_ptr<core::Node>& node) SIGILFS_REQUIRES_SHARED(tree_mu_);
  // The attributes shown of entry `stored` of `dir` (core::Tree::StatOf), stored ones `st`;
  // `inode`, if known, may hold the file open.
  Result<struct stat> StatOf(const struct stat& st, core::BackingDir& dir,
                             const std::string& stored, Inode* inode);
  // A new entry (`object`) in the directory of `at` given to its maker (MountOptions::set_owner).
  // `known`, if given, holds the entry's stat, which spares asking for it; it is emptied when
  // the owner changes, since a chown may clear set-ID bits.
  Status Chown(core::BackingDir& object, const Place& at, const Caller& caller,
               std::optional<struct stat>* known = nullptr);
  // What a new entry gets (core::permissions::ForNew): the caller's umask, or the parent's
  // default ACL; a stored ACL that does not open is logged. `since`: absent_acls_.Now(), taken
  // before, for what is learned of the parent.
  using NewModes = core::permissions::NewModes;
  Result<NewModes> ModesForNew(Inode& parent_node, core::BackingDir& parent, mode_t type,
                               mode_t mode, const Caller& caller, uint64_t since)
      SIGILFS_REQUIRES_SHARED(tree_mu_);
  // A new entry `made` whose modes were `modes` (ModesForNew with `since`): known to have no
  // ACL if it inherited none.
  void MadeWithoutAcls(core::Node& made, const NewModes& modes, uint64_t since);
  // A new entry's last touches (core::Tree::Finish): its owner (Chown), then its ACLs and
  // mode (core::permissions::FinishNew). `made`, if given, gets the entry's attributes where
  // they are known as they now are (nothing changed them after they were read).
  core::Tree::Finish FinishFor(const Place& at, const NewModes& modes, const Caller& caller,
                               std::optional<struct stat>* made = nullptr);
  // An ACL set (core::permissions::SetAcl) on the object itself: its open handle, or its own.
  Status SetAcl(Inode& inode, const std::string& name, ByteSpan value, int flags,
                const Caller& caller);
  // The lock order is tree_mu_, an inode's mu, the node table's lock, name_mu.
  Result<std::shared_ptr<core::FileContents>> ContentsFor(Inode& inode)
      SIGILFS_REQUIRES_SHARED(tree_mu_) SIGILFS_REQUIRES(inode.mu);
  void CloseContentsLocked(Inode& inode) SIGILFS_REQUIRES(inode.mu);
  // The mount's node of `node` (every node of its table is one).
  static std::shared_ptr<Inode> AsInode(std::shared_ptr<core::Node> node) {
    return std::static_pointer_cast<Inode>(std::move(node));
  }

  std::unique_ptr<core::Volume> volume_;
  Object root_dir_;  // volume_'s cipher directory
  // Whether the store keeps an object's inode number while it exists
  // (core::BackingDir::KeepsInodeNumbers). sshfs does not: it numbers an object afresh when the
  // kernel looks it up again after dropping it, while the kernel may still hold this mount's
  // node of it. There a node is known by its name: its table key is a number of this mount's
  // own, given to the name (core::NodeTableOptions) and moved with it by renames.
  const bool keeps_inode_numbers_;
  std::unique_ptr<core::Tree> tree_;  // over root_dir_
  MountOptions options_;
  // Every node the kernel knows (or that a known node names as its parent, or remembered).
  std::unique_ptr<core::NodeTable> nodes_;
  std::shared_ptr<Inode> root_;

  // The handles of the directories in use (MountOptions::open_dirs), or null. A handle names
  // its object whatever its names become; a directory removed here has its handle closed inside
  // the removal (removal_mu_), one removed behind the mount is found out by its link count.
  std::unique_ptr<core::OpenDirCache> open_dirs_;

  Mutex dir_handles_mu_;  // taken alone
  std::unordered_map<const DirHandle*, std::unique_ptr<DirHandle>> dir_handles_
      SIGILFS_GUARDED_BY(dir_handles_mu_);

  mutable SharedMutex tree_mu_;
  // Taken shared while forgotten nodes' removed objects close (Forget), exclusively around a
  // directory's removal on the store (rmdir, and a rename, which may replace one). The last close
  // of an unlinked object ends its backing inode inside the dentry being killed, and the store's
  // rmdir of the directory above it re-walks the directory's dentries, spinning on its lock, until
  // every kill there is done; over io_uring, where FORGET comes over /dev/fuse beside the ring's
  // rmdirs, that spinning cost rm -rf a quarter of its speed. Waiting on this lock instead costs
  // one close at most. Taken alone or after tree_mu_.
  SharedMutex removal_mu_ SIGILFS_ACQUIRED_AFTER(tree_mu_);
  std::atomic<uint64_t> handle_lookups_{0};
  std::atomic<uint64_t> getattrs_{0};
  std::atomic<uint64_t> getxattrs_{0};
  std::atomic<uint64_t> lookups_{0};
  // The names listings left out, as "DEV:INO/STORED" of their directory's key (NoteSkippedName).
  mutable Mutex skipped_mu_;
  std::unordered_set<std::string> skipped_ SIGILFS_GUARDED_BY(skipped_mu_);

  std::atomic<std::chrono::steady_clock::rep> last_activity_ns_{
      std::chrono::steady_clock::now().time_since_epoch().count()};
  std::atomic<int> open_files_{0};
  std::atomic<bool> acls_{false};
  std::function<std::string()> atime_probe_;  // set before serving
  Mutex atime_mu_;                            // one thread probes at a time
  std::atomic<std::chrono::steady_clock::rep> atime_checked_ns_{0};
  std::atomic<bool> noatime_{false}, nodiratime_{false};
  // The ACLs objects are known not to have: used where ACLs are kept and the mount is the
  // store's one writer (KnowsAbsentAcls).
  core::KnownAbsentAcls absent_acls_;
  bool KnowsAbsentAcls() const { return acls() && !shared(); }
};

}  // namespace sigilfs::fuse
