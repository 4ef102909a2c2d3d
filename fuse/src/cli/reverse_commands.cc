// `sigilfs reverse` (a plain directory's encrypted, read-only view for backups) and
// `sigilfs verify-backup` (a copy of that view checked against the plain tree, or on its own).
#include <fmt/core.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "../daemon/options.h"
#include "../daemon/process.h"
#include "../reverse/view_server.h"
#include "commands.h"
#include "progress.h"
#include "sigilfs/core/check.h"
#include "sigilfs/core/exclude.h"
#include "sigilfs/core/reverse.h"
#include "sigilfs/core/transfer.h"
#include "sigilfs/core/tree.h"

namespace sigilfs::cli {
namespace {

// The exclusion rules of --exclude patterns and --exclude-from files, in the order given
// (the patterns first).
Result<core::ExcludeRules> LoadExcludes(const std::vector<std::string>& patterns,
                                        const std::vector<std::string>& files) {
  std::vector<std::string> lines = patterns;
  for (const std::string& file : files) {
    std::ifstream in(file);
    if (!in) return Status::FromErrno(errno, "exclude file " + file);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(std::move(line));
    }
    if (in.bad()) return Status::FromErrno(EIO, "exclude file " + file);
  }
  return core::ExcludeRules::Parse(lines);
}

void AddExcludeOptions(CLI::App& cmd, std::vector<std::string>& patterns,
                       std::vector<std::string>& files) {
  cmd.add_option("--exclude", patterns,
                 "Leave out entries matching this .gitignore-style pattern (repeatable)");
  cmd.add_option("--exclude-from", files,
                 "Leave out entries matching the patterns in this file, one per line as in "
                 ".gitignore (repeatable)");
}

struct VerifyOptions {
  std::string copy;
  std::string plain;
  std::vector<std::string> exclude, exclude_from;
  bool quiet = false;
  fuse::PassphraseSource pass;
};

// Exit statuses: 1 is the backup's (a difference, a unit that does not open); 2 is a check
// that could not be made (the copy does not open, PLAINDIR or the rules are wrong).
constexpr int kExitDifferences = 1;
constexpr int kExitCannotCheck = 2;

int CannotCheck(const Status& s) {
  (void)Fail(s);
  return kExitCannotCheck;
}

// A directory without a vault config is no copy of a view (the config's load would suggest
// making a vault there); one with a reverse config is the plain tree, given in the copy's place.
Status CheckIsCopy(const std::string& copy) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(copy, ec) || fs::exists(fs::path(copy) / core::kConfigFileName, ec))
    return Status::Ok();  // the config's load says what is wrong, if anything
  if (fs::exists(fs::path(copy) / core::kReverseConfigFileName, ec))
    return Status(Code::kInvalidArgument,
                  copy +
                      " is a plain tree made ready for backups, not a copy of its view "
                      "(sigilfs verify-backup COPY " +
                      copy + ")");
  return Status(Code::kInvalidArgument,
                copy + " is not a copy of an encrypted view: it has no " + core::kConfigFileName);
}

int RunVerifyBackup(const VerifyOptions& o) {
  if (o.plain.empty() && (!o.exclude.empty() || !o.exclude_from.empty()))
    return CannotCheck(Status(Code::kInvalidArgument,
                              "--exclude and --exclude-from need PLAINDIR to compare with"));
  auto excludes = LoadExcludes(o.exclude, o.exclude_from);
  if (!excludes.ok()) return CannotCheck(excludes.status());
  std::unique_ptr<core::BackingDir> plain;
  struct stat plain_root {};
  if (!o.plain.empty()) {
    auto opened = core::OpenPosixBackingDir(o.plain);
    if (!opened.ok()) return CannotCheck(opened.status());
    plain = std::move(opened).value();
    auto st = plain->Stat("");
    if (!st.ok()) return CannotCheck(st.status().WithContext(o.plain));
    plain_root = *st;
  }
  if (Status s = CheckIsCopy(o.copy); !s.ok()) return CannotCheck(s);
  auto volume = OpenVolume(o.copy, o.pass, VaultAccess::kRead);
  if (!volume.ok()) return CannotCheck(volume.status());
  auto tree = core::Tree::Open(**volume);
  if (!tree.ok()) return CannotCheck(tree.status().WithContext(o.copy));
  auto root = (*tree)->Root();
  if (!root.ok()) return CannotCheck(root.status().WithContext(o.copy));
  uint64_t problems = 0;
  if (o.plain.empty()) {
    // Without the plain tree: every name, page and target of the copy must open.
    Totals totals;
    if (ProgressLine::WouldShow(o.quiet)) totals = MeasureVault(**volume, (*root)->backing());
    ProgressLine line("verify-backup", totals.bytes, 0, o.quiet);
    const core::CheckSummary summary = core::CheckTree(
        **tree,
        [&line](const std::string& path, const Status& s) {
          line.Clear();
          fmt::print("{}\n", ProblemLine(path, s));
        },
        16, line.Bytes());
    line.Clear();
    problems = summary.problems;
    if (!o.quiet)
      fmt::print("{}, {} checked: {}\n", Counted(summary.files, "file", "files"),
                 Counted(summary.directories, "directory", "directories"),
                 problems == 0 ? "every unit opens" : Counted(problems, "problem", "problems"));
    return problems == 0 ? 0 : kExitDifferences;
  }
  Totals totals;
  if (ProgressLine::WouldShow(o.quiet))
    totals = MeasureStore(*plain, [](core::BackingDir&, const std::string&, const struct stat& st) {
      return static_cast<uint64_t>(st.st_size);
    });
  ProgressLine line("verify-backup", totals.bytes, totals.files, o.quiet);
  core::CompareOptions compare;
  // The reverse config is the copy's sigilfs.conf, not an entry of the tree.
  // What the view leaves out is no difference: its config, excluded entries, other file
  // systems, symlinks too long to keep inline.
  compare.skip = [&excludes, &plain_root](const std::string& path, const struct stat& st) {
    return path == core::kReverseConfigFileName || excludes->Excluded(path, S_ISDIR(st.st_mode)) ||
           st.st_dev != plain_root.st_dev ||
           (S_ISLNK(st.st_mode) &&
            static_cast<size_t>(st.st_size) > core::Volume::kMaxInlineTarget);
  };
  compare.root_times = false;  // the copy's root holds its lock file too
  compare.difference = [&](const Status& s) {
    line.Clear();
    fmt::print("{}\n", s.message());
    ++problems;
  };
  compare.seen = [&line](const std::string&, const struct stat& st) {
    if (!S_ISDIR(st.st_mode)) line.AddFile();
  };
  compare.compared = line.Bytes();
  auto compared = core::CompareWithPlain(**tree, **root, *plain, o.plain, compare);
  line.Clear();
  if (!compared.ok()) return CannotCheck(compared.status());
  if (!o.quiet)
    fmt::print("{} compared with {}: {}\n", Counted(*compared, "entry", "entries"), o.plain,
               problems == 0 ? "the backup holds the plain tree"
                             : Counted(problems, "difference", "differences"));
  return problems == 0 ? 0 : kExitDifferences;
}

}  // namespace

int RunReverse(const ReverseArgs& a) {
  std::error_code ec;
  fuse::ViewServerOptions v;
  v.mountpoint = std::filesystem::absolute(a.mountpoint, ec).lexically_normal().string();
  if (ec) return Fail(Status::FromErrno(ec.value(), "mount point " + a.mountpoint));
  v.foreground = a.foreground;
  v.max_open_dirs = a.max_open_dirs;
  fuse::PassphraseSource pass = a.pass;
  std::vector<std::string> exclude_from = a.exclude_from;
  const auto given = fuse::GivenOptions::Parse(fuse::OptionsFor::kView, a.options);
  if (auto passfile = given.Value("passfile")) pass.passfile = *passfile;
  for (std::string& file : given.Values("exclude_from")) exclude_from.push_back(std::move(file));
  v.fuse_options = given.kernel();
  if (std::string refusal = given.Refusal(); !refusal.empty()) {
    std::fprintf(stderr, "sigilfs: %s\n", refusal.c_str());
    return 2;
  }
  if (Status s = CheckMountPoint(a.mountpoint); !s.ok()) return Fail(s);
  if (Status s = CheckNothingHidden(a.mountpoint, given.Has("nonempty"), "view"); !s.ok())
    return Fail(s);
  const std::string plain = std::filesystem::canonical(a.dir, ec).string();
  if (ec) return Fail(Status::FromErrno(ec.value(), "the plain directory " + a.dir));
  if (auto config = core::Vault::LoadConfig(plain, core::kReverseConfigFileName); !config.ok())
    return Fail(config.status());
  core::ReverseOptions view_options;
  auto excludes = LoadExcludes(a.exclude, exclude_from);
  if (!excludes.ok()) return Fail(excludes.status());
  view_options.exclude = std::move(excludes).value();
  v.source = plain;
  fuse::KeepSecretsOutOfDumps();  // before the passphrase is read
  auto secret = fuse::ReadPassphrase(pass, "Passphrase", fuse::PromptMode::kExisting);
  if (!secret.ok()) return Fail(secret.status());
  auto vault = core::Vault::Unlock(plain, secret->span(), core::kReverseConfigFileName);
  if (!vault.ok()) return Fail(vault.status());
  auto root = core::OpenPosixBackingDir(plain);
  if (!root.ok()) return Fail(root.status());
  auto view = core::OpenReverseView(**vault, std::move(root).value(), view_options);
  if (!view.ok()) return Fail(view.status());
  vault->reset();  // the view holds the keys it needs
  return fuse::ServeView(std::move(view).value(), v);
}

void RegisterReverseCommands(CLI::App& app, Action& action) {
  {
    auto a = std::make_shared<ReverseArgs>();
    auto* cmd = app.add_subcommand(
        "reverse", "Mount a plain directory's encrypted view, read only, for backups");
    cmd->add_option("PLAINDIR", a->dir, "The plain directory (made ready by 'init --reverse')")
        ->required();
    cmd->add_option("MOUNTPOINT", a->mountpoint, "Where the encrypted view appears")->required();
    cmd->add_flag("-f,--foreground", a->foreground, "Stay in the foreground (log to stderr)");
    cmd->add_option("-o", a->options,
                    "Mount options: allow_other, allow_root, nonempty (mount over a directory "
                    "that holds entries), passfile=FILE, exclude_from=FILE, and the mount table's "
                    "access options");
    AddExcludeOptions(*cmd, a->exclude, a->exclude_from);
    cmd->add_option("--max-open-dirs", a->max_open_dirs,
                    "Directories kept open at most, a descriptor each (default: a quarter of the "
                    "descriptor limit); others are opened again when needed")
        ->check(CLI::Range(size_t{1}, size_t{1} << 24));
    AddPassphraseOptions(*cmd, a->pass, "", "passphrase");
    cmd->footer(
        "A copy of the view (rsync -aHX, restic, tar) is a vault: 'sigilfs mount COPY MNT' shows\n"
        "the plain tree. The same tree gives the same view at every mount, so backups stay\n"
        "incremental. From /etc/fstab:\n"
        "  PLAINDIR MOUNTPOINT fuse.sigilfs reverse,passfile=FILE[,exclude_from=FILE] 0 0\n"
        "Unmount with 'sigilfs unmount MOUNTPOINT'.");
    cmd->callback([&action, a] { action = [a] { return RunReverse(*a); }; });
  }
  {
    auto o = std::make_shared<VerifyOptions>();
    auto* cmd = app.add_subcommand(
        "verify-backup", "Check a copy of an encrypted view against its plain tree, or on its own");
    cmd->add_option("COPY", o->copy, "The backup: a copy of the view (a vault)")->required();
    cmd->add_option(
        "PLAINDIR", o->plain,
        "The plain tree to compare with (without it: every unit of the copy must open)");
    cmd->add_flag("-q,--quiet", o->quiet, "Print only the differences");
    AddExcludeOptions(*cmd, o->exclude, o->exclude_from);
    AddPassphraseOptions(*cmd, o->pass, "", "passphrase");
    cmd->footer(
        "Reads the whole copy through the vault's own code. Prints one line per difference and\n"
        "exits 1 if there is any (2 if the copy cannot be opened).");
    cmd->callback([&action, o] { action = [o] { return RunVerifyBackup(*o); }; });
  }
}

}  // namespace sigilfs::cli
