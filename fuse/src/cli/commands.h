// The sigilfs subcommands: each file registers its own with the command-line parser.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "sigilfs/fuse/passphrase.h"
#include "sigilfs/status.h"

namespace sigilfs::cli {

// The action chosen by parsing; returns the process exit code.
using Action = std::function<int()>;

void RegisterVaultCommands(CLI::App& app, Action& action);  // init, passwd, info
void RegisterDemoCommand(CLI::App& app, Action& action);    // demo
void RegisterMountCommands(CLI::App& app, Action& action);  // mount, unmount

// Prints "sigilfs: <problem>" on stderr and returns exit code 1.
int Fail(const Status& status);

// Adds --passfile/--extpass (with `prefix`, e.g. "new-") to a subcommand.
void AddPassphraseOptions(CLI::App& cmd, fuse::PassphraseSource& source, const std::string& prefix,
                          const std::string& what);

}  // namespace sigilfs::cli
