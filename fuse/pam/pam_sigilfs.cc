// The module's PAM entry points, each a guarded call of one function: none ever refuses a login.

// First of all includes: the library is built with hidden visibility, and only the functions
// declared here are its interface.
#pragma GCC visibility push(default)
#include <security/pam_modules.h>
#pragma GCC visibility pop

#include <security/pam_ext.h>
#include <syslog.h>

#include <string_view>

#include "account.h"
#include "authtok.h"
#include "home_session.h"
#include "log.h"
#include "options.h"
#include "passwd_sync.h"

namespace {

using sigilfs::pam::Log;
using sigilfs::pam::Options;

// Runs `body`; an exception (out of memory, in practice) is logged and turns into `fallback`.
template <typename Body>
int Guarded(pam_handle_t* pamh, int fallback, Body body) {
  try {
    return body();
  } catch (...) {
    pam_syslog(pamh, LOG_ERR, "internal error: the home is left as it is");
    return fallback;
  }
}

// `auth`: keeps the password the modules above (pam_unix) read, for open_session. It never
// prompts (a key or token login has no password to give, and a second question would be
// wrong) and never decides anything: the result is PAM_IGNORE, so that even a line
// misconfigured as `sufficient` cannot let anyone in.
int KeepPasswordForSession(pam_handle_t* pamh, const Options& options, const Log& log) {
  const void* item = nullptr;
  if (pam_get_item(pamh, PAM_AUTHTOK, &item) != PAM_SUCCESS || item == nullptr ||
      static_cast<const char*>(item)[0] == '\0') {
    log.Debug("no password to keep (is pam_sigilfs after pam_unix in the auth stack?)");
    return PAM_IGNORE;
  }
  const auto account = sigilfs::pam::LookUpAccount(pamh, options, log);
  // Only users with a vault have their password kept, and only until open_session.
  if (account && sigilfs::pam::HasVault(*account))
    sigilfs::pam::KeepPassword(pamh, static_cast<const char*>(item), account->uid, log);
  return PAM_IGNORE;
}

}  // namespace

extern "C" {

int pam_sm_authenticate(pam_handle_t* pamh, int /*flags*/, int argc, const char** argv) {
  return Guarded(pamh, PAM_IGNORE, [&] {
    const Options options = sigilfs::pam::ParseOptions(pamh, argc, argv);
    return KeepPasswordForSession(pamh, options, Log(pamh, options.debug));
  });
}

int pam_sm_setcred(pam_handle_t* /*pamh*/, int /*flags*/, int /*argc*/, const char** /*argv*/) {
  return PAM_IGNORE;
}

int pam_sm_open_session(pam_handle_t* pamh, int /*flags*/, int argc, const char** argv) {
  return Guarded(pamh, PAM_SUCCESS, [&] {
    const Options options = sigilfs::pam::ParseOptions(pamh, argc, argv);
    return sigilfs::pam::OpenHomeSession(pamh, options, Log(pamh, options.debug));
  });
}

int pam_sm_close_session(pam_handle_t* pamh, int /*flags*/, int argc, const char** argv) {
  return Guarded(pamh, PAM_SUCCESS, [&] {
    const Options options = sigilfs::pam::ParseOptions(pamh, argc, argv);
    return sigilfs::pam::CloseHomeSession(pamh, options, Log(pamh, options.debug));
  });
}

int pam_sm_chauthtok(pam_handle_t* pamh, int flags, int argc, const char** argv) {
  return Guarded(pamh, PAM_IGNORE, [&] {
    const Options options = sigilfs::pam::ParseOptions(pamh, argc, argv);
    return sigilfs::pam::SyncVaultPassword(pamh, flags, options, Log(pamh, options.debug));
  });
}

// `account` has nothing to check: a vault never decides who may log in.
int pam_sm_acct_mgmt(pam_handle_t* /*pamh*/, int /*flags*/, int /*argc*/, const char** /*argv*/) {
  return PAM_IGNORE;
}

}  // extern "C"
