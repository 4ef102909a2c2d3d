// Entry point of the sigilfs command: parses the command line and runs one subcommand.
#include <cstdio>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"sigilfs: an encrypted stacked filesystem with encrypted verity", "sigilfs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "sigilfs 0.1.0");
  sigilfs::cli::Action action;
  sigilfs::cli::RegisterVaultCommands(app, action);
  sigilfs::cli::RegisterMountCommands(app, action);
  sigilfs::cli::RegisterDemoCommand(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; real usage errors exit 2.
    return app.exit(e) == 0 ? 0 : 2;
  }
  return action ? action() : 2;
}
