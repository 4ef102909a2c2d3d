// Entry point of the sigilfs command: parses the command line and runs one subcommand.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"

namespace {

int Run(int argc, char** argv) {
  CLI::App app{"sigilfs: an encrypted stacked filesystem with encrypted verity", "sigilfs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "sigilfs 0.1.0");
  sigilfs::cli::Action action;
  sigilfs::cli::RegisterVaultCommands(app, action);
  sigilfs::cli::RegisterMountCommands(app, action);
  sigilfs::cli::RegisterStatsCommand(app, action);
  sigilfs::cli::RegisterVerityCommands(app, action);
  sigilfs::cli::RegisterFsckCommand(app, action);
  sigilfs::cli::RegisterTransferCommands(app, action);
  sigilfs::cli::RegisterHomeCommands(app, action);
  sigilfs::cli::RegisterReverseCommands(app, action);
  sigilfs::cli::RegisterDemoCommand(app, action);
  // mount.fuse3 (a `fuse.sigilfs` line in /etc/fstab, or mount -t fuse.sigilfs) runs
  // "sigilfs CIPHERDIR MOUNTPOINT -o OPTIONS": without a command name, that means mount.
  std::vector<char*> args(argv, argv + argc);
  static char mount_word[] = "mount";
  auto is_command = [&app](const std::string& word) {
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->check_name(word)) return true;
    return false;
  };
  if (argc >= 3 && argv[1][0] != '-' && !is_command(argv[1]))
    args.insert(args.begin() + 1, mount_word);
  if (argc == 2 && argv[1][0] != '-' && !is_command(argv[1])) {
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({}))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    std::fprintf(stderr, "sigilfs: unknown command '%s' (the commands: %s; sigilfs --help)\n",
                 argv[1], names.c_str());
    return 2;
  }
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; real usage errors exit 2.
    return app.exit(e) == 0 ? 0 : 2;
  }
  return action ? action() : 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {  // out of memory and the like: one line, not a crash
    std::fprintf(stderr, "sigilfs: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "sigilfs: unexpected error\n");
    return 1;
  }
}
