// `sigilfs verity enable|measure|verify`: sealing files of an unmounted vault and checking them.
#include <fmt/core.h>
#include <sys/stat.h>

#include <cerrno>
#include <memory>

#include "commands.h"
#include "progress.h"
#include "sigilfs/core/tree.h"
#include "sigilfs/core/verity.h"
#include "sigilfs/crypt/encoding.h"

namespace sigilfs::cli {
namespace {

struct VerityOptions {
  std::string dir;
  std::string path;  // plaintext path inside the vault
  std::string salt;  // hex, `enable` only
  bool quiet = false;
  fuse::PassphraseSource pass;
};

// The salt as `fsverity digest --salt` takes it: hex, at most 32 bytes.
Result<std::vector<uint8_t>> ParseSalt(const std::string& hex) {
  auto salt = crypt::HexDecode(hex);
  if (!salt.ok()) return Status(Code::kInvalidArgument, "--salt is not hex: " + hex);
  if (salt->size() > core::verity::kMaxSaltSize)
    return Status(Code::kInvalidArgument, fmt::format("--salt is {} bytes; at most {} are allowed",
                                                      salt->size(), core::verity::kMaxSaltSize));
  return salt;
}

// The contents of regular file `path` of the vault, for writing (sealing) or not.
Result<std::unique_ptr<core::FileContents>> OpenVaultFile(core::Volume& volume,
                                                          const std::string& path, bool write) {
  SIGILFS_ASSIGN_OR_RETURN(auto tree, core::Tree::Open(volume));
  SIGILFS_ASSIGN_OR_RETURN(core::Tree::Located at, tree->Locate(path));
  // Checked before opening, so a directory or a FIFO gets a clear message and is never opened.
  SIGILFS_ASSIGN_OR_RETURN(struct stat st, tree->Stat(*at.dir, at.name));
  if (at.name.empty() || !S_ISREG(st.st_mode))
    return Status(Code::kInvalidArgument, path + " is not a regular file");
  auto file = tree->OpenFile(*at.dir, at.name, write, &st);
  // The entry may have been replaced between the check and the open.
  if (!file.ok() && file.status().sys_errno() == ESTALE)
    return Status(Code::kInvalidArgument, path + " is not a regular file");
  return file;
}

Status NotSealed(const std::string& path) {
  return Status(Code::kNotFound, path + " is not sealed (no verity digest)", ENODATA);
}

// "sha256:<hex>", as `fsverity measure` prints a digest.
Result<std::string> DigestText(const core::FileContents& file) {
  if (!file.sealed()) return NotSealed(file.label());
  SIGILFS_ASSIGN_OR_RETURN(core::verity::Descriptor descriptor, file.VerityDescriptor());
  return "sha256:" + crypt::HexEncode(core::verity::FileDigest(descriptor));
}

int RunEnable(const VerityOptions& o) {
  // A bad salt is refused before the passphrase is asked for.
  auto salt = ParseSalt(o.salt);
  if (!salt.ok()) return Fail(salt.status());
  auto volume = OpenVolume(o.dir, o.pass, VaultAccess::kWrite);
  if (!volume.ok()) return Fail(volume.status());
  auto file = OpenVaultFile(**volume, o.path, /*write=*/true);
  if (!file.ok()) return Fail(file.status());
  if ((*file)->sealed()) return Fail(Status(Code::kExists, o.path + " is already sealed", EEXIST));
  ProgressLine line("sealing " + o.path, (*file)->size(), 0, o.quiet);
  auto digest = (*file)->EnableVerity(*salt, line.Bytes());
  line.Clear();
  if (!digest.ok()) return Fail(digest.status());
  fmt::print("sha256:{} {}\n", crypt::HexEncode(*digest), o.path);
  return 0;
}

// measure prints what `fsverity measure` prints; verify first reads and checks every tree block
// and page, then prints "PATH: OK <digest>".
int RunMeasureOrVerify(const VerityOptions& o, bool verify) {
  auto volume = OpenVolume(o.dir, o.pass, VaultAccess::kRead);
  if (!volume.ok()) return Fail(volume.status());
  auto file = OpenVaultFile(**volume, o.path, /*write=*/false);
  if (!file.ok()) return Fail(file.status());
  auto digest = DigestText(**file);
  if (!digest.ok()) return Fail(digest.status());
  if (!verify) {
    fmt::print("{} {}\n", *digest, o.path);
    return 0;
  }
  ProgressLine line("verifying " + o.path, (*file)->size(), 0, o.quiet);
  Status s = (*file)->VerifyAll(line.Bytes());
  line.Clear();
  if (!s.ok()) return Fail(s);
  fmt::print("{}: OK {}\n", o.path, *digest);
  return 0;
}

int RunMeasure(const VerityOptions& o) { return RunMeasureOrVerify(o, false); }
int RunVerify(const VerityOptions& o) { return RunMeasureOrVerify(o, true); }

}  // namespace

void RegisterVerityCommands(CLI::App& app, Action& action) {
  auto* verity = app.add_subcommand(
      "verity", "Seal files with fs-verity and check them (on an unmounted vault)");
  verity->require_subcommand(1);
  struct Spec {
    const char* name;
    const char* help;
    int (*run)(const VerityOptions&);
  };
  const Spec specs[] = {
      {"enable", "Seal a file (read-only from then on, every read checked); print its digest",
       RunEnable},
      {"measure", "Print a sealed file's digest (as `fsverity measure` does)", RunMeasure},
      {"verify", "Read and check every page and tree block of a sealed file", RunVerify},
  };
  for (const Spec& spec : specs) {
    auto o = std::make_shared<VerityOptions>();
    auto* cmd = verity->add_subcommand(spec.name, spec.help);
    cmd->add_option("CIPHERDIR", o->dir, "The vault's cipher directory")->required();
    cmd->add_option("PATH", o->path, "The file's path inside the vault, e.g. docs/report.pdf")
        ->required();
    if (spec.run == RunEnable)
      cmd->add_option("--salt", o->salt, "Salt for the Merkle tree, in hex (at most 32 bytes)");
    if (spec.run != RunMeasure)
      cmd->add_flag("-q,--quiet", o->quiet, "No progress line (shown only on a terminal)");
    AddPassphraseOptions(*cmd, o->pass, "", "passphrase");
    cmd->callback([&action, o, run = spec.run] { action = [o, run] { return run(*o); }; });
  }
}

}  // namespace sigilfs::cli
