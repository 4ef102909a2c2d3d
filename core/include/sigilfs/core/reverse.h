// Reverse mode: a plain directory's encrypted view — the cipher tree a vault of that directory
// would hold, computed on read, deterministic and read only — for backups of a plain tree.
#pragma once

#include <memory>

#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/exclude.h"
#include "sigilfs/core/vault.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

struct ReverseOptions {
  ExcludeRules exclude;  // entries left out of the view (and, a directory, all below it)
};

// The root of the encrypted view of plain directory `plain`, with the keys of `vault` (unlocked
// from the directory's reverse config, Vault::Unlock with kReverseConfigFileName). A store like
// a vault's cipher directory, so that a copy of it is a vault:
// - every entry of the plain tree under its encrypted name (long ones hashed, with their side
//   files), each directory with its sigilfs.diriv (and the same IV as an attribute), the root
//   with the config as sigilfs.conf (the reverse config itself never shows);
// - regular files in the vault's file format, sealed as they are read; symlink targets and
//   `user.*` attributes and POSIX ACLs sealed; modes, owners, times and inode numbers (so hard
//   links) the plain entries' own;
// - every byte derived from the plaintext, its place and the vault's key (ReverseKeys), so the
//   same tree gives the same view at every mount.
// Left out: entries `options.exclude` names, entries on another file system than `plain` (mount
// points below it, as `rsync -x`), and symlinks whose targets exceed Volume::kMaxInlineTarget bytes
// (their sealed text would need a side file of the root). Every call that would change the store is
// EROFS. A file's size is taken once per open: a file that grows while read shows its old length,
// one that shrinks fails the read (EIO) rather than give units that do not authenticate. Each unit
// is sealed from one read of its page, and the last unit a read ended inside is kept, so a
// sequential reader gets whole units even while the file changes.
// Thread-safety: safe for concurrent access, as any BackingDir.
Result<std::unique_ptr<BackingDir>> OpenReverseView(const Vault& vault,
                                                    std::unique_ptr<BackingDir> plain,
                                                    const ReverseOptions& options = {});

}  // namespace sigilfs::core
