// The cipher path of a vault entry, through the library: what tests tamper with.
#pragma once

#include <filesystem>
#include <string>

#include "sigilfs/core/tree.h"
#include "sigilfs/core/volume.h"

namespace sigilfs::test {

// Where vault entry `path` (which need not exist) is stored in `volume`'s cipher directory;
// empty if its directory cannot be reached.
inline std::string CipherPathOf(core::Volume& volume, const std::string& path) {
  auto tree = core::Tree::Open(volume);
  if (!tree.ok()) return "";
  auto at = (*tree)->Locate(path);
  auto root = (*tree)->Root();
  if (!at.ok() || !root.ok()) return "";
  auto stored = volume.StoredName(at->dir->iv(), at->name);
  if (!stored.ok()) return "";
  std::filesystem::path cipher = volume.vault().dir();
  for (const std::string& part : (*root)->backing().PathTo(at->dir->backing())) cipher /= part;
  return (cipher / *stored).string();
}

}  // namespace sigilfs::test
