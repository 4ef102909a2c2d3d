// BackingDir: the one interface through which the namespace reaches the cipher tree's directories.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sigilfs/core/backing_file.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

// One entry of a listing, with the cursor that resumes a listing after it.
struct BackingEntry {
  std::string name;
  uint64_t ino = 0;
  mode_t type = 0;    // S_IFMT bits
  uint64_t next = 0;  // List(next, …) goes on with the entry after this one
};

// How OpenFile opens a regular file.
struct FileOpenMode {
  bool write = true;       // read and write; false: read only
  bool create = false;     // made (with `mode`) if missing
  bool exclusive = false;  // with `create`: kExists if present
  mode_t mode = 0600;
  // The file's access time stays where the store allows it (O_NOATIME: the owner's files, or
  // CAP_FOWNER): reads of the vault by its own tools are not the user's reads.
  bool keep_atime = false;
  // An existing file is opened only if it is this object (as SameObject tells; ESTALE
  // otherwise): the entry looked at before is the one read.
  const struct stat* same_as = nullptr;
};

// Whether two stats are of one object of the store: device, inode number and kind.
inline bool SameObject(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
         (a.st_mode & S_IFMT) == (b.st_mode & S_IFMT);
}

// An open directory of the backing store, or a handle on any other object of it (OpenObject).
// Every name is one entry of the directory (never ".", ".." or with '/'); an empty name, where a
// call takes one, is the object itself, and is all a handle on a non-directory answers to
// (other names: ENOTDIR). No call follows a symbolic link. Errors are the POSIX ones, as
// Status::FromErrno gives them (ENOENT kNotFound, EEXIST kExists, ENOTEMPTY kNotEmpty, ENOTDIR,
// EISDIR, EXDEV, EINVAL with their errno). A directory that was removed stays open and
// answers ENOENT. Implementations: POSIX descriptors and *at calls (the default), and memory
// (tests, and tools without a disk), as for BackingFile.
// Thread-safety: implementations are safe for concurrent access.
class BackingDir {
 public:
  virtual ~BackingDir() = default;

  // Attributes of entry `name` (lstat), or of this directory for an empty name.
  virtual Result<struct stat> Stat(std::string_view name) = 0;
  // Directory `name`, or this one again for an empty name.
  virtual Result<std::unique_ptr<BackingDir>> OpenDir(std::string_view name) = 0;
  // A handle on the object at `path` below this directory ("a/b/c": entry names, none of them a
  // symlink on the way; empty: this object again), whatever its kind. A path of any length:
  // the POSIX store opens one longer than the kernel takes in steps.
  virtual Result<std::unique_ptr<BackingDir>> OpenObject(std::string_view path) = 0;
  // This directory opened for reading its listing as readdir does: List reads one stream of
  // its own, positioned by the cursor, "." and ".." included; with `keep_atime` the access time
  // stays where the store allows (O_NOATIME). Sync makes the directory durable.
  virtual Result<std::unique_ptr<BackingDir>> OpenListing(bool keep_atime) = 0;
  // Regular file `name` (an empty name: this object), opened as `how` says.
  virtual Result<std::unique_ptr<BackingFile>> OpenFile(std::string_view name,
                                                        const FileOpenMode& how) = 0;
  virtual Status MakeDir(std::string_view name, mode_t mode) = 0;
  // A device, FIFO or socket node (`mode` with its S_IFMT type).
  virtual Status MakeNode(std::string_view name, mode_t mode, dev_t rdev) = 0;
  virtual Status MakeSymlink(std::string_view name, std::string_view target) = 0;
  virtual Result<std::string> ReadSymlink(std::string_view name) = 0;  // empty: this symlink
  // A new name `to_name` in `to` (of the same store) for the non-directory `name`.
  virtual Status Link(std::string_view name, BackingDir& to, std::string_view to_name) = 0;
  virtual Status Unlink(std::string_view name) = 0;     // not a directory
  virtual Status RemoveDir(std::string_view name) = 0;  // an empty directory
  // rename(2) of `name` to `to_name` in `to` (of the same store), as renameat2 with kNoReplace
  // (kExists if the target exists) or kExchange (both must exist; they trade places).
  enum RenameFlags : unsigned { kNoReplace = 1, kExchange = 2 };
  virtual Status Rename(std::string_view name, BackingDir& to, std::string_view to_name,
                        unsigned flags = 0) = 0;
  // The entries after cursor `from` (0: from the start; "." and ".." never), in an order that
  // stays put while entries come and go: an entry present for the whole listing is emitted
  // once. Stops when `emit` returns false.
  virtual Status List(uint64_t from, const std::function<bool(const BackingEntry&)>& emit) = 0;

  // Metadata of entry `name` (of this directory for an empty name).
  virtual Status SetMode(std::string_view name, mode_t mode) = 0;  // permission bits
  virtual Status SetOwner(std::string_view name, uid_t uid, gid_t gid) = 0;
  // utimensat's times (UTIME_NOW and UTIME_OMIT included).
  virtual Status SetTimes(std::string_view name, const struct timespec times[2]) = 0;

  // Extended attributes of entry `name` (of this directory for an empty name). Get answers
  // ENODATA for a missing one; Set takes setxattr's XATTR_CREATE or XATTR_REPLACE.
  virtual Result<std::vector<uint8_t>> GetXattr(std::string_view name, std::string_view attr) = 0;
  virtual Status SetXattr(std::string_view name, std::string_view attr, ByteSpan value,
                          int flags = 0) = 0;
  virtual Status RemoveXattr(std::string_view name, std::string_view attr) = 0;
  virtual Result<std::vector<std::string>> ListXattrs(std::string_view name) = 0;

  // The store's persistent handle of entry `name` (empty: this object), as name_to_handle_at
  // gives it: it opens the object again (OpenByHandle), in any process, for as long as the
  // object exists. kNotSupported where the store has none.
  struct ObjectHandle {
    int type = 0;
    std::vector<uint8_t> bytes;
  };
  virtual Result<ObjectHandle> Handle(std::string_view name) = 0;
  // The object `handle` names, wherever it is on this directory's store (ESTALE: gone). The
  // POSIX store needs CAP_DAC_READ_SEARCH for it.
  virtual Result<std::unique_ptr<BackingDir>> OpenByHandle(const ObjectHandle& handle) = 0;
  // The entry names from this directory down to `object` (a handle of the same store) as the
  // store knows its path now: a hint to be checked, which may be stale, or empty (none known
  // below this directory; a file's path may be unknown).
  virtual std::vector<std::string> PathTo(BackingDir& object) = 0;

  virtual Result<struct statvfs> StatFs() = 0;
  virtual Status Sync() = 0;  // makes the directory's entries durable (fsync)
  // Whether an object keeps its inode number for as long as it exists. Stores that number
  // inodes as they come back into the kernel's cache (sshfs and other FUSE stores; SMB without
  // server inode numbers) do not: there a name that leads to an object of the same kind is the
  // only sign that it is the same object.
  virtual bool KeepsInodeNumbers() { return true; }
};

// A directory of the backing store by path, or from a descriptor it takes (closed on
// destruction; any descriptor of the directory, O_PATH included).
Result<std::unique_ptr<BackingDir>> OpenPosixBackingDir(const std::string& path);
std::unique_ptr<BackingDir> NewPosixBackingDir(int fd);
// A view of a directory descriptor the caller keeps open for as long as the view lives.
std::unique_ptr<BackingDir> BorrowPosixBackingDir(int fd);

// The root directory of a new, empty store in memory. Its files are MemoryFileData, read and
// written through NewMemoryBackingFile; it lasts while any of its directories or files is open.
std::unique_ptr<BackingDir> NewMemoryBackingStore();

}  // namespace sigilfs::core
