// The imports into a vault that were cut short (interrupted, killed, a full disk), recorded in
// its cipher directory, so that running the same import again finishes it (docs/format.md,
// "sigilfs.imports").
#pragma once

#include <string>

#include "sigilfs/core/volume.h"
#include "sigilfs/status.h"

namespace sigilfs::cli {

// One line per unfinished import: an HMAC of what it imports and where, under a key of the
// vault's, so that the file tells nothing of either to whoever reads the cipher directory.
// The vault's exclusive lock (an import's) orders its changes.
class UnfinishedImports {
 public:
  explicit UnfinishedImports(const core::Volume& volume) : volume_(volume) {}

  // The line of an import of plain `source` (its absolute path) to vault path `target`;
  // `contents`: the source directory's contents (SOURCE/.), merged into `target`.
  Result<std::string> LineOf(const std::string& source, const std::string& target,
                             bool contents) const;
  bool Has(const std::string& line) const;
  // Recorded before the import writes anything; removed once it is complete.
  Status Add(const std::string& line) const;
  Status Remove(const std::string& line) const;

 private:
  std::string Path() const;
  Result<std::string> Read() const;
  Status Write(const std::string& text) const;

  const core::Volume& volume_;
};

}  // namespace sigilfs::cli
