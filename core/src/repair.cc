// The root's IV put back, and names given to the root's entries that can no longer be read.
#include "sigilfs/core/repair.h"

#include <algorithm>
#include <cstring>

#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/names.h"
#include "sigilfs/crypt/random.h"

namespace sigilfs::core {

Result<RootRepair> RepairRoot(Volume& volume) {
  SIGILFS_ASSIGN_OR_RETURN(auto root, OpenPosixBackingDir(volume.vault().dir()));
  RootRepair repair;
  bool from_attribute = false;
  auto read = volume.ReadDirIv(*root, &from_attribute);
  DirIv iv{};
  if (read.ok()) {
    iv = *read;
  } else if (auto attr = root->GetXattr("", kDirIvAttrName);
             attr.ok() && attr->size() == kDirIvSize) {
    // The file is missing (or too long): the attribute still holds the IV.
    std::memcpy(iv.data(), attr->data(), iv.size());
    from_attribute = true;
  } else {
    // Nothing holds it: the names sealed under it are lost, the rest is not.
    crypt::RandomBytes(iv);
    (void)root->SetXattr("", kDirIvAttrName, iv);  // a store without attributes keeps the file
    repair.new_iv = true;
  }
  if (from_attribute || repair.new_iv) {
    SIGILFS_RETURN_IF_ERROR(volume.RestoreDirIvFile(*root, iv));
    repair.iv_file_restored = from_attribute;
  }
  std::vector<std::string> unreadable;
  SIGILFS_RETURN_IF_ERROR(volume.List(
      *root, iv, 0, [](const DirEntry&) { return true; },
      [&unreadable](const std::string& stored, const Status&) { unreadable.push_back(stored); }));
  std::sort(unreadable.begin(), unreadable.end());
  uint64_t n = 0;
  for (const std::string& stored : unreadable) {
    for (;;) {
      // Short: its stored name needs no side file.
      const std::string name = "recovered-" + std::to_string(++n);
      SIGILFS_ASSIGN_OR_RETURN(std::string to, volume.StoredName(iv, name));
      const Status s = root->Rename(stored, *root, to, BackingDir::kNoReplace);
      if (s.code() == Code::kExists) continue;  // the name is taken: the next one
      SIGILFS_RETURN_IF_ERROR(s.WithContext("rename " + stored));
      volume.ReleaseName(*root, stored);  // a long name's side file, now of no entry
      repair.recovered.push_back(name);
      break;
    }
  }
  SIGILFS_RETURN_IF_ERROR(root->Sync());
  return repair;
}

}  // namespace sigilfs::core
