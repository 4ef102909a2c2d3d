// `sigilfs init`, `sigilfs passwd` and `sigilfs info`: creating and managing a vault's config.
#include <fmt/core.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "mounts.h"
#include "sigilfs/core/format.h"
#include "sigilfs/core/vault.h"

namespace sigilfs::cli {
namespace {

using crypt::Argon2Params;

// "256 MiB", or "8 KiB" for the test preset.
std::string MemoryText(uint64_t bytes) {
  return bytes >= (1u << 20) ? fmt::format("{} MiB", bytes >> 20)
                             : fmt::format("{} KiB", bytes >> 10);
}

struct InitOptions {
  std::string dir;
  bool reverse = false;  // a reverse config in a plain directory
  std::string cipher = "aes-256-gcm";
  KdfOptions kdf;
  fuse::PassphraseSource pass;
};

int RunInit(const InitOptions& o) {
  auto kdf = ResolveKdf(o.kdf);
  if (!kdf.ok()) return Fail(kdf.status());
  auto cipher = crypt::ParseAeadAlgorithm(o.cipher);
  if (!cipher.ok()) return Fail(cipher.status());
  auto pass = fuse::ReadPassphrase(o.pass, "New passphrase", fuse::PromptMode::kNew);
  if (!pass.ok()) return Fail(pass.status());
  core::VaultCreateOptions opts;
  opts.cipher = *cipher;
  opts.kdf = *kdf;
  if (o.reverse) {
    if (Status s = core::Vault::CreateReverse(o.dir, pass->span(), opts); !s.ok()) return Fail(s);
    fmt::print("Made {} ready for encrypted backups ({}, Argon2id {} / {}): its config is {}/{}.\n",
               o.dir, o.cipher, Counted(kdf->opslimit, "pass", "passes"), MemoryText(kdf->memlimit),
               o.dir, core::kReverseConfigFileName);
    fmt::print("'sigilfs reverse {} MOUNTPOINT' shows its encrypted view.\n", o.dir);
    fmt::print("Keep the passphrase safe: without it a backup cannot be restored.\n");
    return 0;
  }
  if (Status s = core::Vault::Create(o.dir, pass->span(), opts); !s.ok()) return Fail(s);
  fmt::print("Created a sigilfs vault in {} ({}, Argon2id {} / {}).\n", o.dir, o.cipher,
             Counted(kdf->opslimit, "pass", "passes"), MemoryText(kdf->memlimit));
  fmt::print("Keep the passphrase safe: without it the data cannot be recovered.\n");
  return 0;
}

// The config file of `dir`: a vault's, or, in a plain directory made ready for backups
// (init --reverse) that holds no vault config, the reverse one.
std::string ConfigNameOf(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(dir) / core::kConfigFileName, ec) &&
      std::filesystem::exists(std::filesystem::path(dir) / core::kReverseConfigFileName, ec))
    return core::kReverseConfigFileName;
  return core::kConfigFileName;
}

struct PasswdOptions {
  std::string dir;
  KdfOptions kdf;
  bool change_kdf = false;
  fuse::PassphraseSource old_pass;
  fuse::PassphraseSource new_pass;
};

int RunPasswd(const PasswdOptions& o) {
  std::optional<Argon2Params> kdf;
  if (o.change_kdf) {
    auto k = ResolveKdf(o.kdf);
    if (!k.ok()) return Fail(k.status());
    kdf = *k;
  }
  // Check the config before asking anything, so a typo in the path fails fast.
  const std::string config_name = ConfigNameOf(o.dir);
  if (auto config = core::Vault::LoadConfig(o.dir, config_name); !config.ok())
    return Fail(config.status());
  auto old_pass =
      fuse::ReadPassphrase(o.old_pass, "Current passphrase", fuse::PromptMode::kExisting);
  if (!old_pass.ok()) return Fail(old_pass.status());
  auto new_pass = fuse::ReadPassphrase(o.new_pass, "New passphrase", fuse::PromptMode::kNew);
  if (!new_pass.ok()) return Fail(new_pass.status());
  if (Status s = core::Vault::ChangePassphrase(o.dir, old_pass->span(), new_pass->span(), kdf,
                                               config_name);
      !s.ok())
    return Fail(s);
  fmt::print("Passphrase changed; the data was not touched.\n");
  return 0;
}

struct InfoOptions {
  std::string dir;
  fuse::PassphraseSource pass;  // given: the passphrase is checked too
};

int RunInfo(const InfoOptions& o) {
  const std::string& dir = o.dir;
  const std::string config_name = ConfigNameOf(dir);
  auto c = core::Vault::LoadConfig(dir, config_name);
  if (!c.ok()) return Fail(c.status());
  const size_t nonce = crypt::AeadNonceSize(c->cipher);
  if (config_name == core::kReverseConfigFileName)
    fmt::print("plain tree:   {} (its encrypted view: sigilfs reverse)\n", dir);
  else
    fmt::print("vault:        {}\n", dir);
  fmt::print("format:       sigilfs vault version {}, file format version {}\n", c->version,
             core::kFileFormatVersion);
  fmt::print("contents:     {}, {}-byte pages, {}-byte nonce + {}-byte tag per page\n",
             crypt::AeadAlgorithmName(c->cipher), c->page_size, nonce, crypt::kAeadTagSize);
  fmt::print("names:        aes-256-siv, unpadded base64url\n");
  fmt::print("key wrap:     aes-256-gcm under Argon2id({}, {})\n",
             Counted(c->kdf.opslimit, "pass", "passes"), MemoryText(c->kdf.memlimit));
  if (config_name == core::kConfigFileName) {
    const std::vector<std::string> mounts = MountsOfVault(dir);
    fmt::print("mounted:      {}\n", mounts.empty() ? "no" : mounts.front());
    for (size_t i = 1; i < mounts.size(); ++i) fmt::print("              {}\n", mounts[i]);
  }
  // A passphrase given is checked (before a mount from /etc/fstab, say); without one nothing is
  // asked: the rest needs none.
  if (o.pass.passfile.empty() && o.pass.extpass.empty()) return 0;
  std::fflush(stdout);
  auto pass = fuse::ReadPassphrase(o.pass, "Passphrase", fuse::PromptMode::kExisting);
  if (!pass.ok()) return Fail(pass.status());
  if (auto vault = core::Vault::Unlock(dir, pass->span(), config_name); !vault.ok())
    return Fail(vault.status());
  fmt::print("passphrase:   unlocks the vault\n");
  return 0;
}

}  // namespace

void RegisterVaultCommands(CLI::App& app, Action& action) {
  {
    auto o = std::make_shared<InitOptions>();
    auto* cmd = app.add_subcommand("init", "Create a new vault in an empty (or new) directory");
    cmd->add_option("CIPHERDIR", o->dir,
                    "Directory that will hold the encrypted files (with --reverse: the plain "
                    "directory to back up)")
        ->required();
    cmd->add_flag("--reverse", o->reverse,
                  "Make a plain directory ready for encrypted backups: writes its config "
                  "(.sigilfs-reverse.conf) there, for 'sigilfs reverse'");
    cmd->add_option("--cipher", o->cipher, "Page cipher: aes-256-gcm or xchacha20-poly1305")
        ->capture_default_str();
    AddKdfOptions(*cmd, o->kdf, "moderate");
    AddPassphraseOptions(*cmd, o->pass, "", "passphrase");
    cmd->callback([&action, o] { action = [o] { return RunInit(*o); }; });
  }
  {
    auto o = std::make_shared<PasswdOptions>();
    auto* cmd = app.add_subcommand("passwd", "Change a vault's passphrase (data is not rewritten)");
    cmd->add_option("CIPHERDIR", o->dir, "The vault's cipher directory")->required();
    AddKdfOptions(*cmd, o->kdf, "moderate");
    AddPassphraseOptions(*cmd, o->old_pass, "", "current passphrase");
    AddPassphraseOptions(*cmd, o->new_pass, "new-", "new passphrase");
    cmd->callback([&action, o, cmd] {
      o->change_kdf =
          cmd->count("--kdf") + cmd->count("--kdf-opslimit") + cmd->count("--kdf-memlimit-mib") > 0;
      action = [o] { return RunPasswd(*o); };
    });
  }
  {
    auto o = std::make_shared<InfoOptions>();
    auto* cmd = app.add_subcommand("info", "Show a vault's parameters (never key material)");
    cmd->add_option("CIPHERDIR", o->dir, "The vault's cipher directory")->required();
    AddPassphraseOptions(*cmd, o->pass, "", "passphrase to check");
    cmd->footer(
        "Needs no passphrase. Given one (--passfile, --extpass), also checks that it unlocks the\n"
        "vault: exit 1 if it does not.");
    cmd->callback([&action, o] { action = [o] { return RunInfo(*o); }; });
  }
}

}  // namespace sigilfs::cli
