// Re-wraps the vault on chauthtok: old and new password through one pipe to `sigilfs passwd`.
#include "passwd_sync.h"

#include <security/pam_ext.h>
#include <string.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <string_view>

#include "account.h"
#include "run_as_user.h"

namespace sigilfs::pam {
namespace {

// Unwrapping with the old password and wrapping with the new one: two Argon2id runs.
constexpr std::chrono::seconds kPasswdLimit{120};

std::string_view Item(pam_handle_t* pamh, int type) {
  const void* item = nullptr;
  if (pam_get_item(pamh, type, &item) != PAM_SUCCESS || item == nullptr) return {};
  return static_cast<const char*>(item);
}

}  // namespace

int SyncVaultPassword(pam_handle_t* pamh, int flags, const Options& options, const Log& log) {
  // The first pass (PAM_PRELIM_CHECK) only asks whether everyone is ready.
  if ((flags & PAM_UPDATE_AUTHTOK) == 0) return PAM_IGNORE;
  const auto account = LookUpAccount(pamh, options, log);
  if (!account || !HasVault(*account)) return PAM_IGNORE;
  const Account& a = *account;
  const std::string_view old_password = Item(pamh, PAM_OLDAUTHTOK);
  const std::string_view new_password = Item(pamh, PAM_AUTHTOK);
  if (new_password.empty()) {
    log.Warning("no new password from the modules above: the vault %s keeps its passphrase",
                a.vault.c_str());
    return PAM_IGNORE;
  }
  if (old_password.empty()) {
    log.Warning(
        "%s's password was changed without the old one (by root?): the vault %s keeps its "
        "old passphrase; run 'runuser -u %s -- sigilfs passwd %s' to change it",
        a.name.c_str(), a.vault.c_str(), a.name.c_str(), a.vault.c_str());
    return PAM_IGNORE;
  }
  if (old_password == new_password) return PAM_IGNORE;
  if (old_password.find('\n') != std::string_view::npos ||
      new_password.find('\n') != std::string_view::npos) {
    log.Warning(
        "a password holds a newline, which sigilfs cannot read: the vault %s keeps its "
        "old passphrase",
        a.vault.c_str());
    return PAM_IGNORE;
  }
  if (::geteuid() != 0) {
    log.Warning(
        "not running as root: the vault %s keeps its old passphrase; run 'sigilfs passwd "
        "%s' as %s",
        a.vault.c_str(), a.vault.c_str(), a.name.c_str());
    return PAM_IGNORE;
  }
  std::string input;
  input.reserve(old_password.size() + new_password.size() + 2);
  input.append(old_password).push_back('\n');
  input.append(new_password).push_back('\n');
  const CommandResult r =
      RunAsUser(a, {options.sigilfs, "passwd", a.vault}, input, kPasswdLimit, log);
  ::explicit_bzero(input.data(), input.size());
  if (r.finished && r.exit_code == 0) {
    log.Info("the vault %s now opens with %s's new password", a.vault.c_str(), a.name.c_str());
    return PAM_SUCCESS;
  }
  log.Warning(
      "the vault %s keeps its old passphrase (%s); run 'runuser -u %s -- sigilfs passwd %s'",
      a.vault.c_str(), r.errors.empty() ? "sigilfs passwd failed" : r.errors.c_str(),
      a.name.c_str(), a.vault.c_str());
  return PAM_IGNORE;
}

}  // namespace sigilfs::pam
