// Node ids that outlive a front end: made from the store's own file handles, and the object
// such an id names found again inside the vault.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sigilfs/core/backing_dir.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

// The id every front end of the vault gives object `at_name` of `at` (an empty name: `at` is
// the object), whose stat is `st`: made from the store's file handle where that is a 32-bit
// inode number and a 32-bit generation (ext2/3/4, XFS with 32-bit inode numbers), the
// generation's top bit dropped so that ids with the top bit set (a front end's own) never meet
// them. 0 where the store gives none (and never 1, the root's).
uint64_t PersistentId(BackingDir& at, const std::string& at_name, const struct stat& st);

// The object whose file handle made `id`, opened through the store's root `root` (which needs
// CAP_DAC_READ_SEARCH on a POSIX store), with its stat; ESTALE where the store no longer has it
// or it lies on another filesystem. Whether it is inside the vault is for a walk to prove.
struct PersistentObject {
  std::unique_ptr<BackingDir> object;
  struct stat st {};
};
Result<PersistentObject> OpenPersistentId(BackingDir& root, uint64_t id);

// Stored names from `root` down to `object` as the store knows its path (a hint, not checked),
// or none where it knows none inside the vault.
std::vector<std::string> PathInVault(BackingDir& root, BackingDir& object);

// The stored names from `root` down to a non-directory entry with inode number `ino`, found by
// a breadth-first search of the vault by the entries' own inode numbers (no stat, no symlink
// followed) that visits at most `budget` entries, so a forged id costs a bounded search; none
// where it is not found.
constexpr size_t kFindInVaultBudget = 4'000'000;
std::vector<std::string> FindInVault(BackingDir& root, uint64_t ino,
                                     size_t budget = kFindInVaultBudget);

// Whether stored name `stored` may be an entry of the vault's tree: the vault's own files (a
// `.` in the name) are not, but for a long name's entry.
bool IsEntryName(std::string_view stored);

}  // namespace sigilfs::core
