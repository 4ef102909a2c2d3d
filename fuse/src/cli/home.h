// `sigilfs home`: the account, space and login checks, and the tree comparison behind setting up
// (and undoing) an encrypted home directory. home_command.cc puts them together.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sigilfs/core/volume.h"
#include "sigilfs/crypt/bytes.h"
#include "sigilfs/status.h"

namespace sigilfs::cli::home {

struct Account {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;  // as in the password database
};

// The account `name` from the password database (kNotFound: "no such user").
Result<Account> LookUpUser(const std::string& name);

// Pids of the processes running as `uid` (real, effective, saved or filesystem uid), from /proc;
// zombies are not counted.
std::vector<pid_t> ProcessesOf(uid_t uid);

enum class LoginPassword { kMatches, kDiffers, kUnknown };
// Whether `passphrase` is `user`'s login password in /etc/shadow (kUnknown without a usable
// local hash: no shadow entry, a locked account, or not root).
LoginPassword CheckLoginPassword(const std::string& user, ByteSpan passphrase);

// What a tree holds, and what it takes on disk once copied (`stored_size` maps a regular file's
// size to the bytes its copy takes; hard-linked files count once).
struct TreeSize {
  uint64_t entries = 0;
  uint64_t file_bytes = 0;    // regular files' sizes
  uint64_t needed_bytes = 0;  // copies' blocks, directories and small entries included
};
// Walks directory `dir`; refuses a tree with another filesystem mounted in it (copying and then
// deleting it would empty that filesystem).
Result<TreeSize> MeasureTree(const std::string& dir,
                             const std::function<uint64_t(uint64_t)>& stored_size);

// kNoSpace unless the filesystem holding `dir` has room (blocks and inodes) for `size`.
Status CheckRoom(const std::string& dir, const TreeSize& size, const std::string& what);

// A plain entry as it was when the comparison found it identical to the vault's copy.
struct VerifiedEntry {
  dev_t dev = 0;
  ino_t ino = 0;
  mode_t type = 0;  // st_mode & S_IFMT
  off_t size = 0;
  struct timespec mtime {};
};
// The verified entries of a tree, by path under its root ("docs/report.txt").
using VerifiedTree = std::map<std::string, VerifiedEntry>;

// Compares plain directory `plain` with the vault's root, reading the vault back through
// `volume`: names, types, contents, sizes, modes, owners, modification times, symlink targets,
// hard-link identity and user.* extended attributes. The first difference is kCorrupt with its
// path; on success, the number of entries compared, and in `verified` (if given) the state of
// each one (what RemoveVerified may remove).
Result<uint64_t> CompareWithVault(core::Volume& volume, const std::string& plain,
                                  VerifiedTree* verified = nullptr);

// Removes from plain directory `dir` (`shown` in messages; not `dir` itself) the entries of
// `verified` that are still what was verified: same device, inode and type, and for all but
// directories the same size and modification time. Directories are removed bottom-up, and only
// once empty. Anything else (an entry made or changed since, another filesystem) is left in
// place with its parent directories; kNotEmpty then lists what was left. Never follows
// symlinks.
Status RemoveVerified(core::BackingDir& dir, const std::string& shown,
                      const VerifiedTree& verified);

// A sigilfs mount (type fuse.sigilfs) of one of `vaults`, or one on `mount_point`, in this
// mount namespace (/proc/self/mountinfo): its mount point, or nothing.
std::optional<std::string> FindSigilfsMount(const std::vector<std::string>& vaults,
                                            const std::string& mount_point);

}  // namespace sigilfs::cli::home
