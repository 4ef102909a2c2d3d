// Keeps the login password from `auth` to `open_session`, in locked memory wiped after use.
#pragma once

#include <security/pam_modules.h>
#include <sys/types.h>

#include <string_view>

#include "log.h"

namespace sigilfs::pam {

// Keeps a copy of `password`, typed by the account `uid`, under the module's data name
// (replacing, and wiping, an older one).
void KeepPassword(pam_handle_t* pamh, std::string_view password, uid_t uid, const Log& log);

// The password kept for the account `uid`, or an empty view when there is none. A password kept
// for another account is never given out: `sudo -u bob` authenticates alice and then opens a
// session for bob, and alice's password must not reach a process of bob's. Valid until
// DropPassword or pam_end.
std::string_view KeptPassword(pam_handle_t* pamh, uid_t uid);

// Wipes and forgets the kept password: once the mount has used it, nothing needs it.
void DropPassword(pam_handle_t* pamh);

}  // namespace sigilfs::pam
