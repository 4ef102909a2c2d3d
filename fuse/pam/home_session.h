// open_session/close_session: mount the home for the first session, unmount after the last.
#pragma once

#include <security/pam_modules.h>

#include "log.h"
#include "options.h"

namespace sigilfs::pam {

// PAM_IGNORE for users without a vault, PAM_SUCCESS otherwise, whatever happened to the mount.
int OpenHomeSession(pam_handle_t* pamh, const Options& options, const Log& log);
int CloseHomeSession(pam_handle_t* pamh, const Options& options, const Log& log);

}  // namespace sigilfs::pam
