// `sigilfs export` and `sigilfs import`: plaintext files and trees out of and into an unmounted
// vault, without FUSE (backups, restores, moving data between vaults), over core's transfer.
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "commands.h"
#include "progress.h"
#include "sigilfs/core/transfer.h"
#include "sigilfs/core/tree.h"
#include "sigilfs/crypt/secure_bytes.h"
#include "transfer.h"
#include "unfinished_imports.h"

namespace sigilfs::cli {
namespace {

namespace fs = std::filesystem;

constexpr size_t kStep = 1 << 20;  // what a file to standard output is read by

struct TransferOptions {
  std::string dir;
  std::string from;  // export: the vault PATH; import: the plain SOURCE
  std::string to;    // export: the plain DEST; import: the vault PATH
  bool force = false;
  bool no_owner = false;
  bool no_acl = false;
  bool quiet = false;
  fuse::PassphraseSource pass;
};

// The totals of the vault tree `dir` (the whole of it when `name` is empty, else its entry
// `name`), for a progress line.
Totals VaultTotals(core::Volume& volume, core::Tree& tree, const core::Tree::Dir& dir,
                   const std::string& name) {
  if (name.empty()) return MeasureVault(volume, dir.backing());
  auto st = tree.Stat(dir, name);
  if (!st.ok()) return {};
  if (!S_ISDIR(st->st_mode))
    return {S_ISREG(st->st_mode) ? static_cast<uint64_t>(st->st_size) : 0, 1};
  auto sub = tree.OpenDir(dir, name);
  return sub.ok() ? MeasureVault(volume, (*sub)->backing()) : Totals{};
}

// Ownership is kept when run as root, unless --no-owner.
bool Owner(const TransferOptions& o) { return ::geteuid() == 0 && !o.no_owner; }

Status Exists(const std::string& path) {
  return Status(Code::kExists, path + " (--force replaces it)", EEXIST);
}

// An entry refused as existing, with the way to replace it.
Status WithHint(Status s) {
  if (s.code() == Code::kExists && s.message().find(" exists and is ") == std::string::npos)
    return Exists(s.message());
  return s;
}

// A vault path as its components ("a//b/./c" is a/b/c; "", "." and "/" are the root).
Result<std::vector<std::string>> SplitVaultPath(const std::string& path) {
  std::vector<std::string> parts;
  for (size_t pos = 0; pos <= path.size();) {
    const size_t slash = std::min(path.find('/', pos), path.size());
    std::string part = path.substr(pos, slash - pos);
    if (part == "..") return Status(Code::kInvalidArgument, "'..' in a vault path: " + path);
    if (!part.empty() && part != ".") parts.push_back(std::move(part));
    pos = slash + 1;
  }
  return parts;
}

std::string JoinParts(const std::vector<std::string>& parts, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) out += (out.empty() ? "" : "/") + parts[i];
  return out.empty() ? "." : out;
}

// True if directory `outer` is `inner` or one of its ancestors (by identity, not by name).
bool Contains(const fs::path& outer, const fs::path& inner) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(inner, ec);
  if (ec) return false;
  for (;;) {
    if (fs::equivalent(p, outer, ec)) return true;
    if (!p.has_relative_path()) return false;
    p = p.parent_path();
  }
}

// "sigilfs: <path>: <problem>" on stderr.
void PrintProblem(const std::string& path, const Status& s) {
  fmt::print(stderr, "sigilfs: {}\n", ProblemLine(path, s));
}

// The tree of an unlocked vault; when run as root, the vault's own files made for an entry (a
// directory's IV, a long name's side file) go to whoever owns the vault, who can then mount it.
Result<std::unique_ptr<core::Tree>> OpenTree(core::Volume& volume) {
  core::TreeOptions options;
  SIGILFS_ASSIGN_OR_RETURN(auto root, core::OpenPosixBackingDir(volume.vault().dir()));
  if (auto st = root->Stat(""); ::geteuid() == 0 && st.ok())
    options.vault_files_owner = std::pair{st->st_uid, st->st_gid};
  return core::Tree::Open(volume, std::move(root), std::move(options));
}

// One file of the vault to standard output; 1 if it was damaged (reported).
Result<int> ExportToStdout(core::Tree& tree, const core::Tree::Dir& dir, const std::string& name,
                           const std::string& path) {
  SIGILFS_ASSIGN_OR_RETURN(struct stat st, tree.Stat(dir, name));
  if (!S_ISREG(st.st_mode))
    return Status(Code::kInvalidArgument,
                  path + " is not a regular file ('-' takes a single file)");
  auto file = tree.OpenFile(dir, name, /*write=*/false);
  if (!file.ok()) {
    PrintProblem(path, file.status());
    return 1;
  }
  std::vector<uint8_t> buffer(kStep);
  Status damage;
  for (uint64_t offset = 0, size = (*file)->size(); offset < size && damage.ok();) {
    auto n = (*file)->Read(offset, buffer);
    if (!n.ok() || *n == 0) {
      damage = n.ok() ? Status(Code::kCorrupt, "ends at " + std::to_string(offset) + " of " +
                                                   std::to_string(size) + " bytes")
                      : n.status();
      break;
    }
    if (std::fwrite(buffer.data(), 1, *n, stdout) != *n) {
      crypt::SecureWipe(buffer);
      return Status::FromErrno(errno, "standard output");
    }
    offset += *n;
  }
  crypt::SecureWipe(buffer);
  if (std::fflush(stdout) != 0) return Status::FromErrno(errno, "standard output");
  if (!damage.ok()) PrintProblem(path, damage);
  return damage.ok() ? 0 : 1;
}

int RunExport(const TransferOptions& o) {
  auto parts = SplitVaultPath(o.from);
  if (!parts.ok()) return Fail(parts.status());
  const std::string path = JoinParts(*parts, parts->size());
  const bool to_stdout = o.to == "-";
  if (to_stdout && parts->empty())
    return Fail(Status(Code::kInvalidArgument, "'-' takes a single file, not the whole vault"));
  // Where it goes, checked before the passphrase is asked for.
  std::string dest = o.to;
  if (dest.empty()) {
    if (parts->empty()) {
      std::fprintf(stderr, "sigilfs: exporting the whole vault needs a DEST directory\n");
      return 2;
    }
    dest = parts->back();
  }
  std::unique_ptr<core::BackingDir> dst_parent;
  std::string dst_name;
  if (!to_stdout) {
    const fs::path abs = fs::absolute(dest).lexically_normal();
    dst_name = abs.filename().string();
    fs::path parent = abs.parent_path();
    if (dst_name.empty()) {  // "dir/" normalizes to "dir/" with an empty file name
      dst_name = parent.filename().string();
      parent = parent.parent_path();
    }
    if (dst_name.empty() || dst_name == "." || dst_name == "..")
      return Fail(Status(Code::kInvalidArgument, "cannot export to " + dest));
    dest = (parent / dst_name).string();
    auto opened = core::OpenPosixBackingDir(parent.string());
    if (!opened.ok()) return Fail(opened.status().WithContext(parent.string()));
    dst_parent = std::move(opened).value();
    if (!o.force && dst_parent->Stat(dst_name).ok()) return Fail(Exists(dest));
    if (Contains(o.dir, parent))
      return Fail(Status(Code::kInvalidArgument, dest + " is inside the vault's cipher directory"));
  }

  auto volume = OpenVolume(o.dir, o.pass, VaultAccess::kRead);
  if (!volume.ok()) return Fail(volume.status());
  auto tree = OpenTree(**volume);
  if (!tree.ok()) return Fail(tree.status());
  // The entry's directory, and its name in it (none: the whole vault).
  auto dir = (*tree)->Walk(JoinParts(*parts, parts->empty() ? 0 : parts->size() - 1));
  if (!dir.ok()) return Fail(dir.status());
  const std::string name = parts->empty() ? std::string() : parts->back();
  if (to_stdout) {
    auto code = ExportToStdout(**tree, **dir, name, path);
    return code.ok() ? *code : Fail(code.status());
  }
  if (!name.empty()) {
    if (auto st = (*tree)->StatStored(**dir, name);
        !st.ok() && st.status().code() == Code::kNotFound)
      return Fail(st.status());  // the tree names the entry by its vault path
  }
  const Totals totals =
      ProgressLine::WouldShow(o.quiet) ? VaultTotals(**volume, **tree, **dir, name) : Totals{};
  ProgressLine line("export", totals.bytes, totals.files, o.quiet);
  core::ExportOptions options{.replace = o.force,
                              .owner = Owner(o),
                              .acls = !o.no_acl,
                              .problem =
                                  [&line](const std::string& at, const Status& s) {
                                    line.Clear();
                                    PrintProblem(at, s);
                                  },
                              .progress = [&line](const std::string&, uint64_t) { line.AddFile(); },
                              .copied = line.Bytes()};
  auto problems = core::ExportEntry(**tree, **dir, name, *dst_parent, dst_name, dest, options);
  if (!problems.ok()) return Fail(WithHint(problems.status()));
  line.Done();
  return *problems == 0 ? 0 : 1;
}

// The signal that interrupted an import (SIGINT, SIGTERM, SIGHUP), or 0: the import stops at
// the next entry or step, and says what it did.
volatile std::sig_atomic_t interrupted_by = 0;  // NOLINT: written by the signal handler

void NoteInterruption(int signal) { interrupted_by = signal; }

void StopImportOnSignals() {
  struct sigaction action {};
  action.sa_handler = NoteInterruption;
  action.sa_flags = SA_RESTART;  // the store's calls go on; the import stops between them
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signal, &action, nullptr);
}

int RunImport(const TransferOptions& o) {
  // The source, checked before the passphrase is asked for.
  std::string source = o.from;
  while (source.size() > 1 && source.back() == '/') source.pop_back();
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(source, ec);
  if (ec || !fs::exists(status)) return Fail(Status::FromErrno(ec ? ec.value() : ENOENT, source));
  const fs::path source_path(source);
  const std::string name = source == "/" ? "" : source_path.filename().string();
  // "dir/." (or ".", or "/"): the directory's contents, merged into the target directory.
  const bool contents = name.empty() || name == "." || name == "..";
  std::string parent = source_path.has_parent_path() ? source_path.parent_path().string() : ".";
  if (contents) parent = source;
  auto src = core::OpenPosixBackingDir(parent);
  if (!src.ok()) return Fail(src.status().WithContext(parent));
  auto parts = SplitVaultPath(o.to);
  if (!parts.ok()) return Fail(parts.status());
  if (fs::is_directory(status) && Contains(source, o.dir))
    return Fail(Status(Code::kInvalidArgument, source + " contains the vault's cipher directory"));

  auto opened = OpenVolume(o.dir, o.pass, VaultAccess::kWrite);
  if (!opened.ok()) return Fail(opened.status());
  auto tree = OpenTree(**opened);
  if (!tree.ok()) return Fail(tree.status());
  core::ImportOptions options;
  options.owner = Owner(o);
  options.acls = !o.no_acl;
  Totals totals;
  if (ProgressLine::WouldShow(o.quiet)) {
    const auto size = [](core::BackingDir&, const std::string&, const struct stat& st) {
      return static_cast<uint64_t>(st.st_size);
    };
    if (contents) {
      totals = MeasureStore(**src, size);
    } else if (fs::is_directory(status)) {
      if (auto top = (*src)->OpenDir(name); top.ok()) totals = MeasureStore(**top, size);
    } else {
      totals = {fs::is_regular_file(status) ? static_cast<uint64_t>(fs::file_size(source, ec)) : 0,
                1};
    }
  }
  ProgressLine line("import", totals.bytes, totals.files, o.quiet);
  uint64_t placed = 0, found = 0;  // entries imported, and found in place (resume)
  options.progress = [&line, &placed](const std::string&, uint64_t) {
    line.AddFile();
    ++placed;
  };
  options.skipped = [&line, &found](const std::string&, uint64_t) {
    line.AddFile();
    ++found;
  };
  options.copied = line.Bytes();

  // The target: PATH itself, or SOURCE's name inside PATH when PATH is a directory.
  std::unique_ptr<core::Tree::Dir> into;  // the directory imported into, if any
  std::unique_ptr<core::Tree::Dir> parent_dir;
  std::string target_name;
  if (parts->empty()) {
    auto root = (*tree)->Root();
    if (!root.ok()) return Fail(root.status());
    into = std::move(root).value();
  } else {
    auto at = (*tree)->Walk(JoinParts(*parts, parts->size() - 1));
    if (!at.ok()) return Fail(at.status());
    parent_dir = std::move(at).value();
    auto existing = (*tree)->StatStored(*parent_dir, parts->back());
    if (existing.ok() && S_ISDIR(existing->st_mode)) {
      auto sub = (*tree)->OpenDir(*parent_dir, parts->back());
      if (!sub.ok()) return Fail(sub.status());
      into = std::move(sub).value();
    } else {
      target_name = parts->back();
    }
  }
  const bool merge = into && contents;  // the source's entries into an existing directory
  // Otherwise a whole entry: its directory and its name there.
  const core::Tree::Dir* entry_dir = into ? into.get() : parent_dir.get();
  const std::string entry_name = into ? name : target_name;
  const std::string target = merge ? into->path() : entry_dir->PathOf(entry_name);

  // An import cut short is recorded, so that the same command finishes it: entries in place
  // already are left as they are, and (for a whole entry, which was not there before it) others
  // replaced.
  const UnfinishedImports unfinished(**opened);
  auto record = unfinished.LineOf(fs::absolute(source).lexically_normal().string(), target, merge);
  if (!record.ok()) return Fail(record.status());
  const bool resume = unfinished.Has(*record);
  // A whole entry in the way is refused before anything is written (or recorded).
  if (!merge && !resume && !o.force && (*tree)->StatStored(*entry_dir, entry_name).ok())
    return Fail(Exists(target));
  if (Status s = unfinished.Add(*record); !s.ok()) return Fail(s);
  options.resume = resume;
  options.replace = o.force || (resume && !merge);
  StopImportOnSignals();
  options.stop = [] { return interrupted_by != 0; };
  // The entry by its name in the source's parent directory (for "dir/.", the directory).
  const Status s = merge ? core::ImportInto(**tree, **src, source, *into, options)
                         : core::ImportEntry(**tree, **src, contents ? "" : name, source,
                                             *entry_dir, entry_name, options);
  if (interrupted_by != 0) {
    line.Clear();
    fmt::print(stderr,
               "sigilfs: import interrupted: {} of {} {} in the vault at {}, the rest is not; run "
               "the same command again to finish it\n",
               Counted(placed + found, "entry", "entries"), source,
               placed + found == 1 ? "is" : "are", target);
    return 128 + interrupted_by;
  }
  if (!s.ok()) {
    line.Clear();
    (void)Fail(WithHint(s));
    if (s.code() != Code::kExists)
      fmt::print(stderr,
                 "sigilfs: the import is not finished: once that is mended, the same command "
                 "finishes it\n");
    return 1;
  }
  if (Status removed = unfinished.Remove(*record); !removed.ok())
    fmt::print(stderr, "sigilfs: warning: {}\n", removed.ToString());
  line.Done();
  if (resume)
    fmt::print("Finished the import of {} into {}: {} in place already, {} imported now.\n", source,
               target, Counted(found, "entry was", "entries were"),
               Counted(placed, "entry", "entries"));
  return 0;
}

}  // namespace

Status ImportContents(core::Volume& volume, const std::string& source, bool owner,
                      ProgressLine& line) {
  if (Contains(source, volume.vault().dir()))
    return Status(Code::kInvalidArgument, source + " contains the vault's cipher directory");
  SIGILFS_ASSIGN_OR_RETURN(auto src, core::OpenPosixBackingDir(source));
  SIGILFS_ASSIGN_OR_RETURN(auto tree, OpenTree(volume));
  SIGILFS_ASSIGN_OR_RETURN(auto root, tree->Root());
  core::ImportOptions options;
  options.owner = owner;
  options.progress = [&line](const std::string&, uint64_t) { line.AddFile(); };
  options.copied = line.Bytes();
  return core::ImportInto(*tree, *src, source, *root, options);
}

Status ExportAll(core::Volume& volume, const std::string& dest, bool owner, uint64_t& problems,
                 ProgressLine& line) {
  const fs::path abs = fs::absolute(dest).lexically_normal();
  const std::string name = abs.filename().string(), parent = abs.parent_path().string();
  if (name.empty() || name == "." || name == "..")
    return Status(Code::kInvalidArgument, "cannot export to " + dest);
  if (Contains(volume.vault().dir(), parent))
    return Status(Code::kInvalidArgument, dest + " is inside the vault's cipher directory");
  SIGILFS_ASSIGN_OR_RETURN(auto dst_parent, core::OpenPosixBackingDir(parent));
  SIGILFS_ASSIGN_OR_RETURN(auto tree, OpenTree(volume));
  SIGILFS_ASSIGN_OR_RETURN(auto root, tree->Root());
  core::ExportOptions options;
  options.replace = true;
  options.owner = owner;
  options.problem = [&line](const std::string& at, const Status& s) {
    line.Clear();
    PrintProblem(at, s);
  };
  options.progress = [&line](const std::string&, uint64_t) { line.AddFile(); };
  options.copied = line.Bytes();
  auto counted = core::ExportEntry(*tree, *root, "", *dst_parent, name, abs.string(), options);
  problems = counted.ok() ? *counted : 0;
  return counted.status();
}

void RegisterTransferCommands(CLI::App& app, Action& action) {
  {
    auto o = std::make_shared<TransferOptions>();
    auto* cmd = app.add_subcommand("export",
                                   "Decrypt a file or tree of an unmounted vault into plain files");
    cmd->add_option("CIPHERDIR", o->dir, "The vault's cipher directory")->required();
    cmd->add_option("PATH", o->from, "What to export: a path inside the vault, '.' for all of it")
        ->required();
    cmd->add_option("DEST", o->to,
                    "Where to (default: PATH's last component in the current directory); "
                    "'-' writes a single file to standard output");
    cmd->add_flag("--force", o->force,
                  "Replace an existing DEST (a directory is merged into, files in it replaced)");
    cmd->add_flag("--no-owner", o->no_owner, "Do not restore ownership (only root restores it)");
    cmd->add_flag("--no-acl", o->no_acl, "Do not restore POSIX ACLs");
    cmd->add_flag("-q,--quiet", o->quiet, "No progress line (shown only on a terminal)");
    AddPassphraseOptions(*cmd, o->pass, "", "passphrase");
    cmd->footer(
        "Recreates directories, files, symlinks, FIFOs and device nodes, hard links, permissions,\n"
        "times, user.* extended attributes, POSIX ACLs, and ownership when run as root. A damaged\n"
        "file, name or attribute, and an ACL DEST cannot keep, is reported (one line each); the\n"
        "rest is exported.\n"
        "Exit status: 0 all exported, 1 something was damaged or failed, 2 usage error.\n"
        "A vault that is mounted gets a warning: the mount may not have written back yet.");
    cmd->callback([&action, o] { action = [o] { return RunExport(*o); }; });
  }
  {
    auto o = std::make_shared<TransferOptions>();
    auto* cmd =
        app.add_subcommand("import", "Encrypt a plain file or tree into an unmounted vault");
    cmd->add_option("CIPHERDIR", o->dir, "The vault's cipher directory")->required();
    cmd->add_option("SOURCE", o->from, "The plain file or directory ('dir/.': its contents)")
        ->required();
    cmd->add_option("PATH", o->to,
                    "Where in the vault (default: SOURCE's name at the root); an existing "
                    "directory is imported into");
    cmd->add_flag("--force", o->force,
                  "Replace existing entries (a file atomically; directories are merged into)");
    cmd->add_flag("--no-owner", o->no_owner, "Do not copy ownership (only root copies it)");
    cmd->add_flag("--no-acl", o->no_acl, "Do not copy POSIX ACLs");
    cmd->add_flag("-q,--quiet", o->quiet, "No progress line (shown only on a terminal)");
    AddPassphraseOptions(*cmd, o->pass, "", "passphrase");
    cmd->footer(
        "Keeps directories, files, symlinks, FIFOs and device nodes, hard links, permissions,\n"
        "times, user.* extended attributes and POSIX ACLs (the vault keeps no other attributes),\n"
        "and ownership when run as root. Each entry appears complete under its name or not at\n"
        "all. Stops at the first failure. An import cut short (Ctrl-C, a kill, a full disk) is\n"
        "finished by the same command: entries in place already (same kind, mode, size and\n"
        "modification time) are left as they are, others replaced. Refused while the vault is\n"
        "mounted (the mount caches names and attributes).");
    cmd->callback([&action, o] { action = [o] { return RunImport(*o); }; });
  }
}

}  // namespace sigilfs::cli
