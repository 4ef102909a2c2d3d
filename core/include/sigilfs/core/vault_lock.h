// One mount per vault: the lock in the cipher directory that a mount daemon holds for its whole
// life and that the offline commands take for theirs (docs/design/mount.md, "One mount per vault").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sigilfs/core/unique_fd.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

// A file in the cipher root: the flock(2) lock on it is what counts; a mount daemon writes its
// process id into it, so that `sigilfs unmount` can wait for that process to end. Its name has
// a '.', so no listing shows it (docs/format.md).
inline constexpr char kLockFileName[] = "sigilfs.lock";

enum class LockMode {
  kShared,     // commands that only read the cipher directory
  kExclusive,  // the mount daemon, and commands that write the cipher directory
  // A mount in shared mode (`mount --shared`): beside other shared mounts and readers, refused
  // by an exclusive holder and refusing one. Makes the lock file, as kExclusive does.
  kSharedMount,
};

// A lock on a vault, held until the object goes (or its process ends: the kernel drops a
// flock lock with the last descriptor of its open file, so a crash leaves none behind). The
// descriptor is close-on-exec, so no program the holder runs keeps it, while a fork (the
// daemon's) shares it.
class VaultLock {
 public:
  VaultLock() = default;  // holds nothing

  // Takes the lock on the vault in `dir` without waiting; kExclusive and kSharedMount make the
  // lock file if it is missing, kShared never does (no file: no holder). A conflicting holder: an
  // error with EBUSY whose message is VaultInUseMessage(dir), saying "is mounted --shared on
  // POINT" where shared holders refuse an exclusive lock, "... on POINT without --shared" where an
  // exclusive holder refuses a shared mount. A lock that cannot be had at all (no
  // lock file for a reader, a cipher directory this process may not write, a filesystem without
  // flock): an unheld lock whose why_not() says why.
  static Result<VaultLock> Acquire(const std::string& dir, LockMode mode);

  bool held() const { return fd_.get() >= 0; }

  // A process, told apart from a later one given the same id by its start time (in clock
  // ticks after boot, field 22 of /proc/PID/stat, which every user may read).
  struct Process {
    pid_t pid = 0;
    uint64_t start = 0;
    bool operator==(const Process&) const = default;
    // True once it has ended: gone, a zombie (its files are closed), or its id reused.
    bool Ended() const;
  };
  // Process `pid` as it runs now (nullopt if it does not, or has ended).
  static std::optional<Process> ProcessOf(pid_t pid);
  // Writes this process (id and start time) into the lock file: a daemon, once it has
  // detached, for HolderOf. Needs an exclusive lock on a file opened for writing.
  Status RecordHolder() const;
  // The process recorded in the lock file of the vault in `dir`, if it is still running (a
  // stale record, or an id since reused, is not taken).
  static std::optional<Process> HolderOf(const std::string& dir);
  const std::string& why_not() const { return why_not_; }

 private:
  UniqueFd fd_;
  std::string why_not_;
};

// The mount points of the sigilfs mounts of the vault in `dir`, from /proc/self/mountinfo:
// `fuse.sigilfs` mounts whose source is "sigilfs:" and that directory.
std::vector<std::string> MountPointsOfVault(const std::string& dir);

// The cipher directory of the sigilfs mount on `mountpoint` (the topmost), if there is one.
std::optional<std::string> VaultMountedOn(const std::string& mountpoint);

// "the vault DIR is mounted on POINT", or, with no such mount in sight (another mount namespace,
// a daemon still writing back after its unmount, an offline command), "the vault DIR is in use
// by another sigilfs process".
std::string VaultInUseMessage(const std::string& dir);

}  // namespace sigilfs::core
