// chauthtok: when the login password changes, re-wrap the vault's key with the new one.
#pragma once

#include <security/pam_modules.h>

#include "log.h"
#include "options.h"

namespace sigilfs::pam {

// Runs `sigilfs passwd` as the user in the PAM_UPDATE_AUTHTOK pass. Never fails the password
// change: whatever goes wrong is logged and the vault keeps its old passphrase.
int SyncVaultPassword(pam_handle_t* pamh, int flags, const Options& options, const Log& log);

}  // namespace sigilfs::pam
