// Repair: what `sigilfs fsck --repair` puts back of a vault whose root directory lost its IV,
// without which no name in the vault can be read (docs/design/crash-and-space.md, "Repair").
#pragma once

#include <string>
#include <vector>

#include "sigilfs/core/volume.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

struct RootRepair {
  bool iv_file_restored = false;  // the IV file written again from the attribute copy
  bool new_iv = false;            // no copy was left: the root has a new IV
  // The names given to entries of the root whose names did not open (sealed under a lost IV):
  // "recovered-1", "recovered-2", ... in the order of their stored names.
  std::vector<std::string> recovered;
};

// Puts the root's IV back where it is missing or torn: from its copy in the root's attribute,
// or, with none left, a new IV (both copies written). Then each entry of the root whose name
// does not open under the root's IV gets a name of its own, recovered-N (the first N free): its
// contents, subtree, attributes and links are kept; only its name was sealed under the IV. A
// root whose IV and names all read is left as it is. The caller holds the vault exclusively.
Result<RootRepair> RepairRoot(Volume& volume);

}  // namespace sigilfs::core
