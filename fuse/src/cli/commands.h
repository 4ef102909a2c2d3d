// The sigilfs subcommands: each file registers its own with the command-line parser.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

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
void RegisterVerityCommands(CLI::App& app, Action& action);    // verity enable, measure, verify
void RegisterFsckCommand(CLI::App& app, Action& action);       // fsck
void RegisterTransferCommands(CLI::App& app, Action& action);  // export, import
void RegisterHomeCommands(CLI::App& app, Action& action);      // home setup, home undo

// Prints "sigilfs: <problem>" on stderr and returns exit code 1.
int Fail(const Status& status);

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
// fails before the prompt), then asks for the passphrase and opens the cipher directory.
Result<std::unique_ptr<core::Volume>> OpenVolume(const std::string& dir,
                                                 const fuse::PassphraseSource& source);

}  // namespace sigilfs::cli
