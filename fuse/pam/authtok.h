// Keeps the login password from `auth` to `open_session`, in locked memory wiped after use.
#pragma once

#include <security/pam_modules.h>

#include <string_view>

#include "log.h"

namespace sigilfs::pam {

// Keeps a copy of `password` under the module's data name (replacing, and wiping, an older one).
void KeepPassword(pam_handle_t* pamh, std::string_view password, const Log& log);

// The kept password, or an empty view when there is none. Valid until DropPassword or pam_end.
std::string_view KeptPassword(pam_handle_t* pamh);

// Wipes and forgets the kept password: once the mount has used it, nothing needs it.
void DropPassword(pam_handle_t* pamh);

}  // namespace sigilfs::pam
