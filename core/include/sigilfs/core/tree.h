// Tree: an unlocked vault's namespace — names, directories, links, renames, attributes and file
// contents — over a BackingDir, for every front end (the mount, import and export, tools).
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/node_table.h"
#include "sigilfs/core/page_layer.h"
#include "sigilfs/core/volume.h"
#include "sigilfs/mutex.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

// An entry's name in a call of Tree: its plaintext, and, once resolved, its stored form in one
// directory. A plaintext name converts implicitly (each call then derives the stored form, an
// encryption of some microseconds); Tree::Resolve derives it once, for a caller that makes
// several calls on one entry (a mount: the lookup, then the create or removal).
class EntryName {
 public:
  EntryName() = default;
  EntryName(std::string_view plain) : plain_(plain) {}    // NOLINT(google-explicit-constructor)
  EntryName(const std::string& plain) : plain_(plain) {}  // NOLINT(google-explicit-constructor)
  EntryName(const char* plain) : plain_(plain) {}         // NOLINT(google-explicit-constructor)
  const std::string& plain() const { return plain_; }
  // The stored form, where resolved (empty otherwise).
  const std::string& stored() const { return stored_; }
  bool empty() const { return plain_.empty(); }

 private:
  friend class Tree;
  std::string plain_;
  std::string stored_;
  DirIv iv_{};  // of the directory `stored_` belongs to
};

struct TreeOptions {
  // Who the vault's own files made for an entry (a directory's IV file, a long name's side
  // file) belong to, when not the caller: a root process writing a user's vault leaves it
  // mountable by that user. Unset: whoever makes them.
  std::optional<std::pair<uid_t, gid_t>> vault_files_owner;
  // Open refuses a store whose root has no readable IV. A mount starts all the same (each name
  // then fails with the damage), so it opens without the check.
  bool check_root_iv = true;
  // Errors name an entry by its vault path; without, by its stored name: a daemon whose log is
  // not encrypted keeps plaintext names out of it.
  bool plain_names_in_errors = true;
  // Other front ends change the store too (a shared mount). The one rule for what a front end
  // keeps of the store: a fact another front end can change while a node still matches its
  // object is read again at every use. So a directory's IV (DirIvOf) is then read from the
  // store each time: the directory may have been replaced by one its node still matches.
  bool shared = false;
  // Damage found on the way is repaired (a torn IV file put back from the directory's
  // attribute); off for a read-only front end.
  bool repair = true;
  // What the tree notices and repairs on its own, one line each, for a front end's log. Lines
  // name directories as the caller's `shown` does (a daemon's: no plaintext).
  std::function<void(const std::string&)> log;
};

// What a caller of Tree::StoreAcl knows of the object already.
struct AclKnown {
  const struct stat* st = nullptr;  // its attributes as they are now
  bool absent = false;              // the ACL is not stored (KnownAbsentAcls): no removal
};

// Entry names are plaintext: one component, never empty, "." or "..", without '/' or NUL
// (kInvalidArgument, EINVAL), at most 255 bytes (kNameTooLong). An empty name in a call that
// takes one means the directory itself. Errors are BackingDir's (the POSIX errnos), and a call
// that fails leaves the tree as it was: an entry is made whole (its long name's side file, a
// directory's IV, a long symlink target's side file) or not at all, and removed with what
// belongs to it.
// Thread-safety: safe for concurrent access; calls on one name race as the POSIX calls do.
class Tree {
 public:
  // An open directory of the vault: its backing directory, its name IV and its vault path.
  class Dir {
   public:
    BackingDir& backing() const { return *backing_; }
    const std::shared_ptr<BackingDir>& shared_backing() const { return backing_; }
    const DirIv& iv() const { return iv_; }
    const std::string& path() const { return path_; }  // "." for the root, else "a/b"
    // The vault path of entry `name` of this directory (an empty name: the directory's own).
    std::string PathOf(std::string_view name) const {
      if (name.empty()) return path_;
      return path_ == "." ? std::string(name) : path_ + "/" + std::string(name);
    }

   private:
    friend class Tree;
    Dir(std::shared_ptr<BackingDir> backing, const DirIv& iv, std::string path)
        : backing_(std::move(backing)), iv_(iv), path_(std::move(path)) {}
    std::shared_ptr<BackingDir> backing_;
    DirIv iv_;
    std::string path_;
  };

  // An entry being made under a hidden temporary name of its directory, given its contents and
  // attributes, then put in place under its name by one rename: a reader sees it complete or
  // not at all. Dropped before Place, it is removed.
  class Staged {
   public:
    ~Staged();
    Staged(const Staged&) = delete;
    Staged& operator=(const Staged&) = delete;

    // A staged regular file's contents (null for other kinds). Written back by Place.
    FileContents* contents() const { return contents_.get(); }
    // Attributes given to the entry in Place, after its contents, in this order: owner (a chown
    // by root clears set-ID bits), permission bits (ignored for a symlink), times.
    void SetOwner(uid_t uid, gid_t gid) { owner_ = {uid, gid}; }
    void SetMode(mode_t mode) { mode_ = mode & 07777; }
    void SetTimes(const struct timespec& atime, const struct timespec& mtime) {
      times_ = {atime, mtime};
    }
    // An extended attribute, as Tree::SetXattr (at once).
    Status SetXattr(std::string_view attr, ByteSpan value);
    // Gives the entry `name` in its directory: over an existing non-directory with `replace`,
    // else only where the name is free (kExists). After a failure the entry is still staged.
    Status Place(const EntryName& name, bool replace);

   private:
    friend class Tree;
    Staged(Tree& tree, std::unique_ptr<Dir> dir, std::string temp)
        : tree_(tree), dir_(std::move(dir)), temp_(std::move(temp)) {}
    Status Finish();
    Tree& tree_;
    std::unique_ptr<Dir> dir_;  // its own handle on the directory
    std::string temp_;          // empty once placed
    std::unique_ptr<FileContents> contents_;
    std::string own_target_;  // a symlink's long target side file, released if never placed
    std::optional<std::pair<uid_t, gid_t>> owner_;
    std::optional<mode_t> mode_;
    std::optional<std::array<struct timespec, 2>> times_;
  };

  // The vault's own cipher directory (the volume's), or a store whose root holds a vault tree
  // (an empty one first given its IV by Format). `volume` outlives the tree.
  static Result<std::unique_ptr<Tree>> Open(Volume& volume, TreeOptions options = {});
  static Result<std::unique_ptr<Tree>> Open(Volume& volume, std::unique_ptr<BackingDir> root,
                                            TreeOptions options = {});
  // Makes the root IV of an empty store (a vault's cipher directory gets its own at creation).
  static Status Format(BackingDir& root);

  Volume& volume() const { return volume_; }

  // Directories. Walk takes a vault path ("a/b", "" or "." for the root; no "..", no symlink
  // followed: ENOTDIR).
  // `copies` and `from_attribute` are Volume::ReadDirIv's (a checker compares both copies).
  Result<std::unique_ptr<Dir>> Root(
      Volume::DirIvCopies copies = Volume::DirIvCopies::kAttributeFirst,
      bool* from_attribute = nullptr);
  Result<std::unique_ptr<Dir>> OpenDir(
      const Dir& parent, const EntryName& name,
      Volume::DirIvCopies copies = Volume::DirIvCopies::kAttributeFirst,
      bool* from_attribute = nullptr);
  Result<std::unique_ptr<Dir>> Walk(std::string_view path);
  // A directory the caller reached itself: `backing`, with the IV it read (a mount caches its
  // directories' IVs), called `path` in errors.
  std::unique_ptr<Dir> DirOf(std::shared_ptr<BackingDir> backing, const DirIv& iv,
                             std::string path) const;
  // The name IV of the directory a front end knows as `node`, read through `backing`, a handle
  // the caller's operation opened on it: cached on the node, or, where the store is shared
  // (TreeOptions::shared), read at every use. A torn IV file is put back from the directory's
  // attribute (TreeOptions::repair); both, and failures, are logged naming it `shown()`.
  Result<DirIv> DirIvOf(Node& node, BackingDir& backing, const std::function<std::string()>& shown)
      SIGILFS_EXCLUDES(node.mu);
  // `plain` as an entry name of `dir`, its stored form derived once (kNameTooLong, EINVAL as
  // every call checks a name).
  Result<EntryName> Resolve(const Dir& dir, std::string_view plain) const;
  // The entry stored as `stored` in `dir` (a name a listing or a node's record gave), its
  // plaintext opened: kAuthFailed or kCorrupt if it was not made for this directory.
  Result<EntryName> Listed(const Dir& dir, const std::string& stored) const;
  // Entry `e` of a listing of `dir` (List, ListSorted) as a name, both forms as listed: a walk
  // then encrypts no name again.
  EntryName NameOf(const Dir& dir, const DirEntry& e) const;
  // A vault path's directory and last name (empty for the root itself); the entry need not
  // exist.
  struct Located {
    std::unique_ptr<Dir> dir;
    std::string name;
  };
  Result<Located> Locate(std::string_view path);

  // Attributes as the vault's user sees them: the backing entry's (lstat), a regular file's
  // size its plaintext size, a symlink's its target's length.
  Result<struct stat> Stat(const Dir& dir, const EntryName& name);
  // The same for an object a front end reached itself: entry `stored` of `dir` (an empty name:
  // `dir` is the object), whose stored attributes are `st`. `open`, if given, is the regular
  // file's open contents, whose size counts what is not written back yet.
  Result<struct stat> StatOf(BackingDir& dir, const std::string& stored, struct stat st,
                             const FileContents* open = nullptr) const;
  // The entry's attributes as stored: kind, identity, links, mode, owner, times, device (a
  // file's size is its cipher file's). What a walk needs, without opening a file: a damaged
  // sealed file still has them.
  Result<struct stat> StatStored(const Dir& dir, const EntryName& name);
  // The entries of `dir` after cursor `from` (0: the start; DirEntry::next_offset resumes
  // after an entry), never "." and "..", in an order that stays put while entries come and go.
  // Names that do not decrypt are skipped and passed to `damaged` (if given).
  Status List(const Dir& dir, uint64_t from, const std::function<bool(const DirEntry&)>& emit,
              const std::function<void(const std::string& stored, const Status&)>& damaged = {});
  // The whole listing, sorted by name, into `out`; the status is the listing's own (entries
  // read before a failure are kept).
  Status ListSorted(
      const Dir& dir, std::vector<DirEntry>& out,
      const std::function<void(const std::string& stored, const Status&)>& damaged = {});

  // A new entry's last touches before it is used (a mount: its owner, inherited ACLs and final
  // mode), given a handle on it. A failure removes the entry again (side files too) and is the
  // call's.
  using Finish = std::function<Status(BackingDir& object)>;
  // New entries, with permission bits `mode` (as the backing store applies its umask).
  Status MakeDir(const Dir& dir, const EntryName& name, mode_t mode, const Finish& finish = {});
  // A FIFO, socket or device node, or an empty regular file (`mode` with its S_IFMT type).
  Status MakeNode(const Dir& dir, const EntryName& name, mode_t mode, dev_t rdev,
                  const Finish& finish = {});
  Status MakeSymlink(const Dir& dir, const EntryName& name, std::string_view target,
                     const Finish& finish = {});
  Result<std::string> ReadLink(const Dir& dir, const EntryName& name);
  // The target of the symlink `object` (a handle on the link itself).
  Result<std::string> ReadLink(BackingDir& object) const;
  // Removes a long symlink target's side file that a removal left to the caller
  // (Removed::target), once the link is not read any more.
  void ReleaseTarget(const std::string& target) const;
  // A new name `to_name` in `to` for non-directory `name` of `dir`.
  Status Link(const Dir& dir, const EntryName& name, const Dir& to, const EntryName& to_name);
  // What a removal did, for a caller that keeps reaching removed objects (a mount's nodes that
  // the kernel still holds). `keep` is asked before the entry goes, with its attributes.
  struct Removed {
    std::function<bool(const struct stat&)> keep;
    struct stat st {};  // the entry removed (by a rename: replaced); st_ino 0 if none was
    // Where `keep` said so: a handle on the object, opened (and checked to be it) before the
    // removal, and a symlink's long target side file, left for the caller to release
    // (Volume::ReleaseSymlinkTarget) once the link is not read any more.
    std::unique_ptr<BackingDir> object;
    std::string target;
  };
  Status Unlink(const Dir& dir, const EntryName& name, Removed* removed = nullptr);
  Status RemoveDir(const Dir& dir, const EntryName& name, Removed* removed = nullptr);
  // What a rename did: the entry moved, and the one it replaced (or, exchanged, the one moved
  // the other way). `changed` is false where the two names were one file's (nothing done).
  struct Renamed {
    bool changed = false;
    struct stat moved {};
    Removed replaced;  // keep: as for a removal; not asked for an exchange
  };
  // rename(2), with BackingDir::kNoReplace or kExchange.
  Status Rename(const Dir& dir, const EntryName& name, const Dir& to, const EntryName& to_name,
                unsigned flags = 0, Renamed* renamed = nullptr);

  // A regular file made, or, unless `exclusive`, opened if present, for a caller that runs the
  // page layer itself (a mount's open files): the backing file (read and write; `keep_atime`
  // as FileOpenMode), a handle on the object, and whether it was made here (then given
  // `finish`).
  struct NewFile {
    std::unique_ptr<BackingFile> file;
    std::unique_ptr<BackingDir> object;
    bool created = false;
  };
  Result<NewFile> MakeFile(const Dir& dir, const EntryName& name, mode_t mode, bool exclusive,
                           bool keep_atime = false, const Finish& finish = {});
  // The contents of a regular file the caller opened (NewFile::file, or BackingDir::OpenFile
  // on a handle it holds) through the page layer; `label` names it in errors. `cipher_size`, if
  // given, is the cipher file's size as the caller just read it (PageLayer::Open).
  Result<std::unique_ptr<FileContents>> Contents(
      std::unique_ptr<BackingFile> file, std::string label,
      std::optional<uint64_t> cipher_size = std::nullopt) const;
  // Regular files: made (kExists if present and `exclusive`, else the existing one opened), or
  // opened (for writing or not), through the page layer.
  Result<std::unique_ptr<FileContents>> CreateFile(const Dir& dir, const EntryName& name,
                                                   mode_t mode, bool exclusive = true);
  // `same_as`: opened only if it is that object (ESTALE otherwise), as FileOpenMode says.
  Result<std::unique_ptr<FileContents>> OpenFile(const Dir& dir, const EntryName& name, bool write,
                                                 const struct stat* same_as = nullptr);

  Status SetMode(const Dir& dir, const EntryName& name, mode_t mode);  // permission bits
  Status SetOwner(const Dir& dir, const EntryName& name, uid_t uid, gid_t gid);
  // utimensat's times (UTIME_NOW and UTIME_OMIT included); never through a symlink.
  Status SetTimes(const Dir& dir, const EntryName& name, const struct timespec times[2]);
  Status SetSize(const Dir& dir, const EntryName& name, uint64_t size);  // a regular file's

  // Extended attributes, each stored under a keyed hash of its name with its name and value
  // sealed (docs/format.md): `user.*` and the POSIX ACLs' two names (EOPNOTSUPP for others;
  // a symlink has none: EPERM to set, ENODATA to get). Set takes XATTR_CREATE/XATTR_REPLACE.
  Result<std::vector<uint8_t>> GetXattr(const Dir& dir, const EntryName& name,
                                        std::string_view attr);
  Status SetXattr(const Dir& dir, const EntryName& name, std::string_view attr, ByteSpan value,
                  int flags = 0);
  Status RemoveXattr(const Dir& dir, const EntryName& name, std::string_view attr);
  // Their names; one whose value does not open is passed to `damaged` (if given) and left out.
  Result<std::vector<std::string>> ListXattrs(
      const Dir& dir, const EntryName& name,
      const std::function<void(const std::string& stored, const Status&)>& damaged = {});

  // The same on an object the caller holds open (`object`: a handle on the object itself, its
  // calls taking the empty name), its own attributes: how a mount reaches its nodes. A symlink
  // is the caller's to refuse. A read the store refuses (EACCES) to an owner without read
  // permission is tried again with the bit lent, as ext4 lets an owner read its ACLs.
  Result<std::vector<uint8_t>> GetXattr(BackingDir& object, std::string_view attr);
  Status SetXattr(BackingDir& object, std::string_view attr, ByteSpan value, int flags = 0);
  Status RemoveXattr(BackingDir& object, std::string_view attr);
  Result<std::vector<std::string>> ListXattrs(
      BackingDir& object,
      const std::function<void(const std::string& stored, const Status&)>& damaged = {});
  // A POSIX ACL (`attr`: system.posix_acl_access or system.posix_acl_default, the kernel's
  // value form) stored on `object`, or removed (`value` null; none there is no error), and then
  // the object's permission bits set to `mode`: an ACL and the mode it implies change together.
  // The policy (which mode an ACL implies, sigilfs/core/acl.h) is the caller's. `known` spares
  // the store calls that would tell what the caller knows already.
  Status StoreAcl(BackingDir& object, std::string_view attr, const std::vector<uint8_t>* value,
                  int flags, mode_t mode, AclKnown known = {});

  Result<struct statvfs> StatFs();

  // Entries made in steps (import, restore): a regular file, a symlink, a node, or another
  // name of existing non-directory `name` of `from`.
  Result<std::unique_ptr<Staged>> StageFile(const Dir& dir);
  Result<std::unique_ptr<Staged>> StageSymlink(const Dir& dir, std::string_view target);
  Result<std::unique_ptr<Staged>> StageNode(const Dir& dir, mode_t mode, dev_t rdev);
  Result<std::unique_ptr<Staged>> StageLink(const Dir& from, const EntryName& name, const Dir& dir);
  // Removes the staged entries a process that was killed left in `dir` (no listing shows them;
  // a long symlink target's side file goes with its link); the number removed. Only for a caller
  // that holds the vault exclusively: another front end's are in the making.
  Result<uint64_t> RemoveLeftovers(const Dir& dir);

 private:
  Tree(Volume& volume, std::unique_ptr<BackingDir> root, TreeOptions options)
      : volume_(volume), root_(std::move(root)), options_(std::move(options)) {}

  Result<std::string> Stored(const Dir& dir, const EntryName& name) const;
  // `s` about entry `name` of `dir`: named by its vault path or its stored name (TreeOptions).
  Status Named(const Status& s, const Dir& dir, const EntryName& name) const;
  // How entry `name` of `dir` is shown in errors and labels (TreeOptions).
  std::string Shown(const Dir& dir, const EntryName& name) const;
  // Runs `finish` on new entry `stored` of `dir` (nothing without one); a failure is returned,
  // the entry to be removed by the caller.
  static Status RunFinish(const Dir& dir, const std::string& stored, const Finish& finish);
  // RunFinish, and on a failure the new non-directory removed with its side files.
  Status FinishOrRemove(const Dir& dir, const std::string& stored, const Finish& finish);
  // The attributes of entry `name` (`stored`) of `dir` before its removal. Where `removed` may
  // keep the object, they are read from a handle opened on it, left in `opened` for
  // KeepBeforeRemoval: one store call fewer than a stat of the name and a handle checked
  // against it.
  Result<struct stat> StatBeforeRemoval(const Dir& dir, const EntryName& name,
                                        const std::string& stored, const Removed* removed,
                                        std::unique_ptr<BackingDir>* opened);
  // Before removing entry `stored` (`st`): the handle and target `removed` asks to keep; `opened`,
  // if given, is a handle on it already (StatBeforeRemoval).
  void KeepBeforeRemoval(const Dir& dir, const std::string& stored, const struct stat& st,
                         Removed* removed, std::unique_ptr<BackingDir> opened = nullptr);
  // A long name's side file is made before its entry and removed after it: a create and a
  // removal of one long name must not interleave, or the removal takes the side file the new
  // entry needs. These locks (by the stored name's hash; none for a short name) keep them apart.
  class LongNameLock {
   public:
    LongNameLock(Tree& tree, const std::string& a,
                 const std::string& b = {}) SIGILFS_NO_THREAD_SAFETY_ANALYSIS;
    ~LongNameLock() SIGILFS_NO_THREAD_SAFETY_ANALYSIS;
    LongNameLock(const LongNameLock&) = delete;
    LongNameLock& operator=(const LongNameLock&) = delete;

   private:
    Mutex* first_ = nullptr;
    Mutex* second_ = nullptr;
  };
  // Under the name's LongNameLock: its side file written before the entry is made, or, after
  // a failed create, removed unless an entry holds the name.
  Status PrepareLocked(const Dir& dir, const EntryName& name, const std::string& stored);
  void UnprepareLocked(const Dir& dir, const std::string& stored);
  // After the entry was made: its side file there (Volume::ConfirmName; shared mode only).
  Status ConfirmLocked(const Dir& dir, const EntryName& name, const std::string& stored);
  // A symlink target sealed, a long one's side file written (and owned as vault files are).
  Result<std::string> SealTarget(std::string_view target);
  // lstat of `stored`, the entry `name` of `dir`, its errors told by the entry's vault path.
  Result<struct stat> Lstat(const Dir& dir, const EntryName& name, const std::string& stored);
  void OwnVaultFile(BackingDir& dir, const std::string& file);
  Result<std::unique_ptr<Staged>> Stage(const Dir& dir,
                                        const std::function<Status(const std::string&)>& make);
  // Extended attributes of entry `stored` of `dir` (empty: `dir` itself).
  Result<std::string> XattrKey(std::string_view attr) const;
  Result<std::string> XattrEntry(const Dir& dir, const EntryName& name, bool* symlink);
  // `lend`: where the owner lacks read permission, lend it for the read (the mount's: ext4
  // lets an owner read its ACLs whatever the mode).
  Result<std::vector<uint8_t>> ReadXattr(BackingDir& dir, const std::string& stored,
                                         std::string_view attr, bool lend);
  Status WriteXattr(BackingDir& dir, const std::string& stored, std::string_view attr,
                    ByteSpan value, int flags);
  Status DeleteXattr(BackingDir& dir, const std::string& stored, std::string_view attr);
  Result<std::vector<std::string>> XattrNames(
      BackingDir& dir, const std::string& stored,
      const std::function<void(const std::string&, const Status&)>& damaged);

  Volume& volume_;
  std::unique_ptr<BackingDir> root_;
  const TreeOptions options_;
  std::string access_acl_key_, default_acl_key_;  // the ACLs' stored attribute names
  std::array<Mutex, 32> long_name_mu_;
};

}  // namespace sigilfs::core
