// Proof that a plain tree and a vault hold the same thing, read back through the vault's own
// code (core::CompareWithPlain): nothing plain is removed without it.
#include <sys/stat.h>

#include "home.h"
#include "sigilfs/core/transfer.h"
#include "sigilfs/core/tree.h"

namespace sigilfs::cli::home {

Result<uint64_t> CompareWithVault(core::Volume& volume, const std::string& plain,
                                  VerifiedTree* verified) {
  SIGILFS_ASSIGN_OR_RETURN(auto tree, core::Tree::Open(volume));
  SIGILFS_ASSIGN_OR_RETURN(auto root, tree->Root());
  auto dir = core::OpenPosixBackingDir(plain);
  if (!dir.ok()) return dir.status().WithContext(plain);
  if (verified != nullptr) verified->clear();
  return core::CompareWithPlain(
      *tree, *root, **dir, plain, [&](const std::string& path, const struct stat& p) {
        if (verified != nullptr)
          verified->insert_or_assign(
              path, VerifiedEntry{p.st_dev, p.st_ino, p.st_mode & S_IFMT, p.st_size, p.st_mtim});
      });
}

}  // namespace sigilfs::cli::home
