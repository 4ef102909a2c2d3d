// The sigilfs subcommands: each file registers its own with the command-line parser.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sigilfs/core/vault_lock.h"
#include "sigilfs/core/volume.h"
#include "sigilfs/crypt/kdf.h"
#include "sigilfs/fuse/passphrase.h"
#include "sigilfs/status.h"

namespace sigilfs::cli {

// The action chosen by parsing; returns the process exit code.
using Action = std::function<int()>;

void RegisterVaultCommands(CLI::App& app, Action& action);     // init, passwd, info
void RegisterDemoCommand(CLI::App& app, Action& action);       // demo
void RegisterMountCommands(CLI::App& app, Action& action);     // mount, unmount
void RegisterStatsCommand(CLI::App& app, Action& action);      // stats
void RegisterVerityCommands(CLI::App& app, Action& action);    // verity enable, measure, verify
void RegisterFsckCommand(CLI::App& app, Action& action);       // fsck
void RegisterTransferCommands(CLI::App& app, Action& action);  // export, import
void RegisterHomeCommands(CLI::App& app, Action& action);      // home setup, home undo
void RegisterReverseCommands(CLI::App& app, Action& action);   // reverse, verify-backup

// `sigilfs reverse PLAINDIR MOUNTPOINT`, also reached from /etc/fstab through the mount
// helper's form with -o reverse.
struct ReverseArgs {
  std::string dir;
  std::string mountpoint;
  bool foreground = false;
  std::vector<std::string> options;
  std::vector<std::string> exclude;       // .gitignore-style patterns
  std::vector<std::string> exclude_from;  // files of them
  size_t max_open_dirs = 0;               // 0: the daemon's default
  fuse::PassphraseSource pass;
};
int RunReverse(const ReverseArgs& args);

// "'a', 'b' and 3 more": the first entries of directory `dir`, for a message; empty if it has
// none (or cannot be listed: then the mount itself will say why).
std::string EntriesOf(const std::string& dir);

// That `mountpoint` is a directory (kInvalidArgument/ENOTDIR, or its stat's error, naming it).
Status CheckMountPoint(const std::string& mountpoint);

// FUSE 3 mounts over anything; what was there would vanish from sight until the unmount, which
// looks like lost files. So a mount point that holds entries is refused, naming them, unless
// asked (-o nonempty), as FUSE 2 did. `what` is what would hide them ("mount", "view").
Status CheckNothingHidden(const std::string& mountpoint, bool nonempty, const char* what);

// Prints "sigilfs: <problem>" on stderr and returns exit code 1.
int Fail(const Status& status);

// The same for a usage error (a value an option cannot take): exit code 2.
int FailUsage(const Status& status);

// "<path>: <problem>": one entry's problem, as fsck, export and verify-backup report it, the
// path named once where the message names it already (the page layer names the file it reads)
// and the code's name where the message does not say it.
std::string ProblemLine(const std::string& path, const Status& status);
// "1 file", "0 files", "2 directories": `n` with the word that goes with it.
std::string Counted(uint64_t n, std::string_view one, std::string_view many);

// What an offline command does to the cipher directory, and so which lock it takes
// (docs/design/mount.md, "One mount per vault").
enum class VaultAccess {
  kRead,         // fsck, export, verity measure/verify: a shared lock
  kWrite,        // import, verity enable, home undo: the exclusive lock
  kSharedMount,  // mount --shared: beside other shared mounts (LockMode::kSharedMount)
};

// Takes the vault's lock for an offline command. kWrite: a vault that is mounted or in use is
// refused (EBUSY; the message names the mount point). kRead: such a vault gets a warning on
// stderr (what is read may be stale) and the command goes on without the lock, as it does when
// the lock cannot be had at all (a reader never fails for the lock: fsck must read a damaged
// vault). A lock that cannot be had at all (a read-only cipher directory) is no lock, with a
// warning for kWrite.
Result<core::VaultLock> LockVault(const std::string& dir, VaultAccess access);

// Adds --passfile/--extpass (with `prefix`, e.g. "new-") to a subcommand.
void AddPassphraseOptions(CLI::App& cmd, fuse::PassphraseSource& source, const std::string& prefix,
                          const std::string& what);

// The Argon2id cost a new wrap uses: a preset, optionally overridden (--kdf, --kdf-opslimit,
// --kdf-memlimit-mib).
struct KdfOptions {
  std::string preset;
  uint64_t opslimit = 0;
  uint64_t memlimit_mib = 0;
};
void AddKdfOptions(CLI::App& cmd, KdfOptions& o, const std::string& default_preset);
Result<crypt::Argon2Params> ResolveKdf(const KdfOptions& o);

// Unlocks the vault in `dir` for an offline command: checks its config first (so a wrong path
// fails before the prompt), takes its lock (LockVault), then asks for the passphrase and opens
// the cipher directory; the volume holds the lock for its life.
Result<std::unique_ptr<core::Volume>> OpenVolume(const std::string& dir,
                                                 const fuse::PassphraseSource& source,
                                                 VaultAccess access);

}  // namespace sigilfs::cli
