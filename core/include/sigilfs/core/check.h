// Check: reads a whole vault tree as a mount would and reports everything that does not open
// (names, directory IVs, file pages, verity trees, symlink targets), changing nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "sigilfs/core/progress.h"
#include "sigilfs/core/tree.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

struct CheckSummary {
  uint64_t directories = 0;
  uint64_t files = 0;  // regular files, each once however many names it has
  uint64_t sealed = 0;
  uint64_t symlinks = 0;
  uint64_t problems = 0;
};

// Walks `tree` depth first, entries in name order (a stable report), and calls `problem` with
// the vault path and status of each damage found: a directory whose IV is missing, torn or
// differs between its two copies, a stored name that does not open, a damaged file page
// (every one up to `max_pages_listed` per file, then their count), a sealed file's tree block
// or a flagless seal, a symlink target that does not open. Reads everything, writes nothing.
// `progress` hears of the file data as it is read.
CheckSummary CheckTree(Tree& tree,
                       const std::function<void(const std::string& path, const Status&)>& problem,
                       uint64_t max_pages_listed = 16, const ByteProgress& progress = {});

}  // namespace sigilfs::core
