// `sigilfs fsck`: reads a whole unmounted vault and reports everything that does not decrypt;
// with --repair, first puts back the root directory's IV.
#include <fmt/core.h>

#include <memory>
#include <string>

#include "commands.h"
#include "progress.h"
#include "sigilfs/core/check.h"
#include "sigilfs/core/repair.h"
#include "sigilfs/core/tree.h"

namespace sigilfs::cli {
namespace {

constexpr int kExitClean = 0;
constexpr int kExitProblems = 1;
constexpr int kExitUsage = 2;

struct FsckOptions {
  std::string dir;
  bool quiet = false;
  bool repair = false;
  fuse::PassphraseSource pass;
};

// --repair: the root's IV put back and its unreadable entries named, one line each; false if
// the repair failed (said on stderr).
bool Repair(core::Volume& volume) {
  auto repair = core::RepairRoot(volume);
  if (!repair.ok()) {
    (void)Fail(repair.status().WithContext("repair"));
    return false;
  }
  if (repair->iv_file_restored)
    fmt::print("repaired: the root directory's IV file, from the copy in its attribute\n");
  if (repair->new_iv)
    fmt::print(
        "repaired: the root directory's IV was lost with every copy: it has a new one (the names "
        "sealed under the old one cannot be read again)\n");
  for (const std::string& name : repair->recovered)
    fmt::print("repaired: {}: an entry of the root whose name could not be read\n", name);
  return true;
}

// One problem, on standard output: the report.
void PrintProblem(const std::string& path, const Status& s) {
  fmt::print("{}\n", ProblemLine(path, s));
}

int RunFsck(const FsckOptions& o) {
  auto volume = OpenVolume(o.dir, o.pass, o.repair ? VaultAccess::kWrite : VaultAccess::kRead);
  if (!volume.ok()) {
    (void)Fail(volume.status());  // its one line on stderr; the exit status tells it apart
    return kExitUsage;
  }
  if (o.repair && !Repair(**volume)) return kExitProblems;
  core::CheckSummary summary;
  if (auto tree = core::Tree::Open(**volume); tree.ok()) {
    Totals totals;
    if (auto root = (*tree)->Root(); root.ok() && ProgressLine::WouldShow(o.quiet))
      totals = MeasureVault(**volume, (*root)->backing());
    ProgressLine line("fsck", totals.bytes, 0, o.quiet);
    summary = core::CheckTree(
        **tree,
        [&line](const std::string& path, const Status& s) {
          line.Clear();
          PrintProblem(path, s);
        },
        16, line.Bytes());
    line.Clear();
  } else {  // the root's IV: nothing in the vault can be named
    PrintProblem(".", tree.status());
    summary.directories = summary.problems = 1;
  }
  if (!o.quiet)
    fmt::print("{}, {} ({} sealed), {} checked; {}\n",
               Counted(summary.directories, "directory", "directories"),
               Counted(summary.files, "file", "files"), summary.sealed,
               Counted(summary.symlinks, "symlink", "symlinks"),
               Counted(summary.problems, "problem", "problems"));
  return summary.problems == 0 ? kExitClean : kExitProblems;
}

}  // namespace

void RegisterFsckCommand(CLI::App& app, Action& action) {
  auto o = std::make_shared<FsckOptions>();
  auto* cmd = app.add_subcommand(
      "fsck", "Check an unmounted vault: every name, file page, verity tree and symlink target");
  cmd->add_option("CIPHERDIR", o->dir, "The vault's cipher directory")->required();
  cmd->add_flag("-q,--quiet", o->quiet,
                "Print only the problems: no summary line, no progress line (shown only on a "
                "terminal)");
  cmd->add_flag("--repair", o->repair,
                "First put back the root directory's IV, without which no name can be read: from "
                "the copy in its attribute, or a new one; entries of the root whose names cannot "
                "be read are named recovered-1, recovered-2, ... (refused while mounted)");
  AddPassphraseOptions(*cmd, o->pass, "", "passphrase");
  cmd->footer(
      "Reads everything; without --repair, changes nothing. Prints one line per repair and per\n"
      "problem, then a summary. A vault that is mounted gets a warning: the mount may not have\n"
      "written back yet.\n"
      "Exit status: 0 no problems (left), 1 problems found, 2 usage error or the vault did not\n"
      "unlock.");
  cmd->callback([&action, o] { action = [o] { return RunFsck(*o); }; });
}

}  // namespace sigilfs::cli
