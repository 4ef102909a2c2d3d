// Transfer: plain trees into and out of a vault without a mount (import, export, the home
// migration, backup and restore tools), with permissions, times, `user.*` attributes, POSIX
// ACLs (access and default), hard links and, on request, owners.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/progress.h"
#include "sigilfs/core/tree.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

struct ImportOptions {
  // Existing entries are replaced (a file in one rename: a reader sees the old one or the new
  // one) and directories merged into; without it an existing entry is kExists.
  bool replace = false;
  bool owner = false;  // owners copied too (needs the privilege to chown)
  // POSIX ACLs copied, exactly (and, on a directory merged into, one the source lacks removed);
  // without it the vault's entries get none.
  bool acls = true;
  // Finishing an import that was cut short (interrupted, killed, a full disk): an existing
  // directory is merged into, and an existing entry that is already what the source's would be
  // is left as it is: the same kind, permission bits and (with `owner`) owner, and for a regular
  // file the same size and modification time (the quick check rsync makes: an import gives each
  // file its source's time, and a file is only ever in place whole), a symlink's target, a
  // device's number. Other existing entries are replaced with `replace`, else kExists. Entries
  // left staged by an import that was killed are removed from the directories it goes through.
  bool resume = false;
  // Asked before each entry and between the steps of a file's copy: true ends the import there,
  // with kIoError and EINTR ("interrupted"). The entry being made is dropped; those in place stay,
  // each whole, and directories made have their attributes only once filled.
  std::function<bool()> stop;
  // Called after each non-directory entry: its vault path and, for a regular file, its size.
  std::function<void(const std::string& path, uint64_t bytes)> progress;
  // With `resume`, instead of `progress` for each non-directory entry found in place.
  std::function<void(const std::string& path, uint64_t bytes)> skipped;
  ByteProgress copied;  // told of file data as it is copied, a step at a time
};

// Plain entry `name` of directory `from` (an empty name: `from` itself) into directory `to` of
// the vault as `to_name`; a directory is made, or merged into with `replace`, then filled, and
// its attributes set last. `shown` names the plain entry in messages. Each entry appears whole
// under its name or not at all; the first failure ends the import.
Status ImportEntry(Tree& tree, BackingDir& from, std::string_view name, const std::string& shown,
                   const Tree::Dir& to, std::string_view to_name, const ImportOptions& options);
// The entries of plain directory `from` into `to`, then `from`'s attributes onto `to`.
Status ImportInto(Tree& tree, BackingDir& from, const std::string& shown, const Tree::Dir& to,
                  const ImportOptions& options);

struct ExportOptions {
  bool replace = false;  // existing entries replaced and directories merged into (kExists else)
  bool owner = false;    // owners restored too
  // POSIX ACLs restored exactly: each plain entry has the vault entry's ACLs and no other (one
  // inherited from a default ACL of the destination is removed). Without it none is written.
  bool acls = true;
  // Each damaged entry of the vault (a page, name, IV, target or attribute that does not open):
  // reported here and left out, the rest exported. A damaged file is not created at all. An ACL
  // the destination refuses (a file system without ACLs) is reported here too; the entry is
  // exported without it.
  std::function<void(const std::string& path, const Status&)> problem;
  // Called after each non-directory entry exported: its vault path and, for a regular file, its
  // size.
  std::function<void(const std::string& path, uint64_t bytes)> progress;
  ByteProgress copied;  // told of file data as it is copied, a step at a time
};

// Vault entry `name` of `from` (an empty name: `from` itself) to `to_name` in plain directory
// `to`, whose path `shown` names it in messages. The result is the number of damaged entries
// left out; a failure to write the destination ends the export and is the status.
Result<uint64_t> ExportEntry(Tree& tree, const Tree::Dir& from, std::string_view name,
                             BackingDir& to, std::string_view to_name, const std::string& shown,
                             const ExportOptions& options);

// What CompareWithPlain leaves out and how it reports.
struct CompareOptions {
  // Plain entries not compared (by vault path and plain stat): a reverse view's config, entries
  // a backup excludes. The vault may not hold them either.
  std::function<bool(const std::string& path, const struct stat& plain)> skip;
  // Each difference (kCorrupt naming the vault path, or the error that stopped the comparison
  // of an entry), after which the comparison goes on. Without it the first difference ends it.
  std::function<void(const Status&)> difference;
  // Whether the two directories' own modification times are compared. A backup's root also
  // holds the vault's lock file, whose making moves the root's time after the copy was made.
  bool root_times = true;
  // Called with each entry's vault path and plain stat as first looked at.
  std::function<void(const std::string& path, const struct stat& plain)> seen;
  ByteProgress compared;  // told of file data as it is compared
};

// Proof that plain directory `plain` (`shown` in messages) and vault directory `vault` hold the
// same tree, read back through the vault's own code: names, types, contents, sizes, modes,
// owners, modification times (access times are not compared: reading a symlink's target moves
// it), device numbers, symlink targets, hard-link identity, `user.*` attributes and POSIX ACLs
// (compared as ACLs: the ids of unnamed entries do not count), the two
// directories' own included. The first difference is kCorrupt with its vault path (with
// `options.difference`: each is reported there and the result is the count compared all the
// same); on success, the number of entries compared.
Result<uint64_t> CompareWithPlain(Tree& tree, const Tree::Dir& vault, BackingDir& plain,
                                  const std::string& shown, const CompareOptions& options);
Result<uint64_t> CompareWithPlain(
    Tree& tree, const Tree::Dir& vault, BackingDir& plain, const std::string& shown,
    const std::function<void(const std::string& path, const struct stat& plain)>& seen = {});

}  // namespace sigilfs::core
