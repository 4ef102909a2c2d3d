// Helpers shared by the subcommands: error reporting, passphrase and KDF options, unlocking a
// vault.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <vector>

#include "commands.h"
#include "sigilfs/core/vault.h"

namespace sigilfs::cli {

std::string Counted(uint64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

int Fail(const Status& status) {
  // A wrong passphrase is not a malfunction, nor is a vault in use: say exactly that and nothing
  // more.
  const bool plain = status.code() == Code::kWrongPassphrase || status.sys_errno() == EBUSY;
  const std::string text = plain ? status.message() : status.ToString();
  std::fprintf(stderr, "sigilfs: %s\n", text.c_str());
  return 1;
}

std::string ProblemLine(const std::string& path, const Status& status) {
  std::string message = status.message();
  if (message.rfind(path + ": ", 0) == 0) message.erase(0, path.size() + 2);
  return path + ": " + Status(status.code(), std::move(message), status.sys_errno()).ToString();
}

int FailUsage(const Status& status) {
  (void)Fail(status);
  return 2;
}

void AddPassphraseOptions(CLI::App& cmd, fuse::PassphraseSource& source, const std::string& prefix,
                          const std::string& what) {
  auto* file = cmd.add_option("--" + prefix + "passfile", source.passfile,
                              "Read the " + what + " from the first line of this file");
  auto* ext = cmd.add_option("--" + prefix + "extpass", source.extpass,
                             "Run this command and read the " + what + " from its output");
  file->excludes(ext);
}

void AddKdfOptions(CLI::App& cmd, KdfOptions& o, const std::string& default_preset) {
  o.preset = default_preset;
  // The cheapest cost (one pass over 8 KiB) is for test suites only: offered where
  // SIGILFS_TEST_KDF=1 is set, an unknown choice elsewhere.
  std::vector<std::string> presets = {"interactive", "moderate", "sensitive"};
  const char* test_kdf = std::getenv("SIGILFS_TEST_KDF");  // NOLINT(concurrency-mt-unsafe)
  if (test_kdf != nullptr && std::string_view(test_kdf) == "1") presets.push_back("test");
  std::string list;
  for (const std::string& p : presets) list += (list.empty() ? "" : ", ") + p;
  cmd.add_option("--kdf", o.preset, "Argon2id cost preset: " + list)
      ->capture_default_str()
      ->check(CLI::IsMember(presets));
  cmd.add_option("--kdf-opslimit", o.opslimit, "Argon2id passes (overrides the preset)");
  cmd.add_option("--kdf-memlimit-mib", o.memlimit_mib,
                 "Argon2id memory in MiB (overrides the preset)");
}

Result<crypt::Argon2Params> ResolveKdf(const KdfOptions& o) {
  SIGILFS_ASSIGN_OR_RETURN(crypt::KdfPreset preset, crypt::ParseKdfPreset(o.preset));
  crypt::Argon2Params p = crypt::Argon2ParamsFor(preset);
  if (o.opslimit != 0) p.opslimit = o.opslimit;
  if (o.memlimit_mib != 0) p.memlimit = o.memlimit_mib << 20;
  SIGILFS_RETURN_IF_ERROR(crypt::ValidateArgon2Params(p));
  return p;
}

Result<core::VaultLock> LockVault(const std::string& dir, VaultAccess access) {
  const bool write = access != VaultAccess::kRead;
  auto lock =
      core::VaultLock::Acquire(dir, access == VaultAccess::kWrite ? core::LockMode::kExclusive
                                    : write                       ? core::LockMode::kSharedMount
                                                                  : core::LockMode::kShared);
  if (!lock.ok()) {
    if (write) return lock.status();
    if (lock.status().sys_errno() == EBUSY)
      std::fprintf(stderr, "sigilfs: warning: %s: what this reads may be stale\n",
                   lock.status().message().c_str());
    return core::VaultLock();
  }
  if (write && !lock->why_not().empty())
    std::fprintf(stderr,
                 "sigilfs: warning: the vault cannot be locked (%s): a mount of it at the same "
                 "time would not be noticed\n",
                 lock->why_not().c_str());
  return lock;
}

Result<std::unique_ptr<core::Volume>> OpenVolume(const std::string& dir,
                                                 const fuse::PassphraseSource& source,
                                                 VaultAccess access) {
  SIGILFS_RETURN_IF_ERROR(core::Vault::LoadConfig(dir).status());
  // Taken before the passphrase is asked for, so that a vault in use is refused at once.
  SIGILFS_ASSIGN_OR_RETURN(core::VaultLock lock, LockVault(dir, access));
  SIGILFS_ASSIGN_OR_RETURN(crypt::SecureBytes pass,
                           fuse::ReadPassphrase(source, "Passphrase", fuse::PromptMode::kExisting));
  SIGILFS_ASSIGN_OR_RETURN(std::unique_ptr<core::Vault> vault,
                           core::Vault::Unlock(dir, pass.span()));
  core::VolumeOptions options;
  options.lock = std::move(lock);
  return core::Volume::Open(std::move(vault), std::move(options));
}

Status CheckMountPoint(const std::string& mountpoint) {
  struct stat st;
  if (::stat(mountpoint.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return Status(Code::kNotFound, "the mount point " + mountpoint + " does not exist", ENOENT);
    // A mount whose daemon has ended (killed, crashed) stays until it is unmounted.
    if (errno == ENOTCONN)
      return Status(
          Code::kIoError,
          "the mount point " + mountpoint + " is left by a mount whose daemon has ended (" +
              ::strerrordesc_np(ENOTCONN) + "): 'sigilfs unmount " + mountpoint + "' clears it",
          ENOTCONN);
    return Status::FromErrno(errno, "the mount point " + mountpoint);
  }
  if (!S_ISDIR(st.st_mode))
    return Status(Code::kInvalidArgument, "the mount point " + mountpoint + " is not a directory",
                  ENOTDIR);
  return Status::Ok();
}

Status CheckNothingHidden(const std::string& mountpoint, bool nonempty, const char* what) {
  if (nonempty) return Status::Ok();
  if (std::string held = EntriesOf(mountpoint); !held.empty())
    return Status(Code::kInvalidArgument,
                  "the mount point " + mountpoint + " is not empty (" + held + "): the " + what +
                      " would hide that; -o nonempty mounts anyway",
                  ENOTEMPTY);
  return Status::Ok();
}

std::string EntriesOf(const std::string& dir) {
  std::vector<std::string> names;
  size_t count = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (++count <= 3) names.push_back(it->path().filename().string());
  }
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() && count == names.size() ? " and " : ", ";
    out += "'" + names[i] + "'";
  }
  if (count > names.size()) out += " and " + std::to_string(count - names.size()) + " more";
  return out;
}

}  // namespace sigilfs::cli
