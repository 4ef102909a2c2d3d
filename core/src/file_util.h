// Internal: whole-file reads and crash-safe replacement of small files (the vault config).
#pragma once

#include <string>

#include "sigilfs/status.h"

namespace sigilfs::core {

// Reads a whole regular file of at most `max_size` bytes (kCorrupt if larger).
Result<std::string> ReadSmallFile(const std::string& path, size_t max_size);

// Writes `dir`/`name` via a temporary file, fsync, rename and directory fsync, so a crash
// leaves the old file or the new one. With `exclusive`, fails with kExists if `name` exists.
Status WriteFileAtomic(const std::string& dir, const std::string& name, const std::string& data,
                       bool exclusive);

}  // namespace sigilfs::core
