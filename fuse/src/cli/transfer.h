// What `sigilfs import`/`export` share with `sigilfs home`: whole-tree copies into and out of
// an unlocked vault (transfer_commands.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "progress.h"
#include "sigilfs/core/volume.h"
#include "sigilfs/status.h"

namespace sigilfs::cli {

// The contents of plain directory `source` into the vault's root, and its attributes onto the
// root (as `sigilfs import CIPHERDIR SOURCE/.`); ownership too when `owner` (root only). Stops
// at the first failure. `line` shows how far it has come.
Status ImportContents(core::Volume& volume, const std::string& source, bool owner,
                      ProgressLine& line);

// The whole vault into directory `dest`, made if absent and merged into if it exists (as
// `sigilfs export CIPHERDIR . DEST --force`). Damaged entries are reported on stderr, left out
// and counted in `problems`; a failure to write `dest` is the result. `line` shows how far it
// has come.
Status ExportAll(core::Volume& volume, const std::string& dest, bool owner, uint64_t& problems,
                 ProgressLine& line);

}  // namespace sigilfs::cli
