// Session logic: count under the lock; `sigilfs mount` / `fusermount3 -u`, run as the user.
#include "home_session.h"

#include <string.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "account.h"
#include "authtok.h"
#include "mount_table.h"
#include "run_as_user.h"
#include "session_count.h"

namespace sigilfs::pam {
namespace {

// Argon2id with the "sensitive" preset takes a few seconds; a mount that needs a minute is hung.
constexpr std::chrono::seconds kMountLimit{60};
constexpr std::chrono::seconds kUnmountLimit{30};

std::string Fusermount() {
  for (const char* path : {"/usr/bin/fusermount3", "/bin/fusermount3"})
    if (::access(path, X_OK) == 0) return path;
  return "/usr/bin/fusermount3";
}

// Mounts the vault with the password kept by `auth`; logs why not when it does not.
void Mount(pam_handle_t* pamh, const Account& a, const Options& options, const Log& log) {
  const std::string_view password = KeptPassword(pamh, a.uid);
  if (password.empty()) {
    log.Warning(
        "no password from this login for this account (a key or token, another account's "
        "authentication as with sudo -u, or pam_sigilfs is not in the auth stack after "
        "pam_unix): %s stays unmounted",
        a.home.c_str());
    return;
  }
  if (password.find('\n') != std::string_view::npos) {
    log.Warning("the password holds a newline, which sigilfs cannot read: %s stays unmounted",
                a.home.c_str());
    return;
  }
  // nonempty: a home that gained entries while unmounted (made by hand, or left by a partial
  // migration, which `home setup` reports) still gets its vault at login.
  std::string mount_options = "default_permissions,nonempty";
  if (!options.mount_options.empty()) mount_options += "," + options.mount_options;
  const std::vector<std::string> argv = {options.sigilfs, "mount", a.vault,
                                         a.home,          "-o",    mount_options};
  // The password and its newline go through the pipe; the copy for it is wiped right after.
  std::string input;
  input.reserve(password.size() + 1);
  input.append(password).push_back('\n');
  const CommandResult r = RunAsUser(a, argv, input, kMountLimit, log);
  ::explicit_bzero(input.data(), input.size());
  if (r.finished && r.exit_code == 0) {
    log.Info("mounted %s on %s", a.vault.c_str(), a.home.c_str());
  } else if (r.finished) {
    log.Warning("%s not mounted (exit %d): %s", a.home.c_str(), r.exit_code,
                r.errors.empty() ? "no message" : r.errors.c_str());
  } else {
    log.Warning("%s not mounted: %s could not be run", a.home.c_str(), options.sigilfs.c_str());
  }
}

// Unmounts as the user; a home still in use (a process left behind by the session) is detached
// lazily: it disappears from the namespace now and the daemon writes back and exits once the
// last file is closed.
void Unmount(const Account& a, const Log& log) {
  const std::string fusermount = Fusermount();
  CommandResult r = RunAsUser(a, {fusermount, "-u", a.home}, "", kUnmountLimit, log);
  if (r.finished && r.exit_code == 0) {
    log.Info("unmounted %s", a.home.c_str());
    return;
  }
  r = RunAsUser(a, {fusermount, "-u", "-z", a.home}, "", kUnmountLimit, log);
  if (r.finished && r.exit_code == 0)
    log.Info("%s was busy: detached it (the daemon exits when its last file is closed)",
             a.home.c_str());
  else
    log.Warning("cannot unmount %s: %s", a.home.c_str(),
                r.errors.empty() ? "fusermount3 failed" : r.errors.c_str());
}

}  // namespace

int OpenHomeSession(pam_handle_t* pamh, const Options& options, const Log& log) {
  const auto account = LookUpAccount(pamh, options, log);
  if (!account || !HasVault(*account)) {
    DropPassword(pamh);
    return PAM_IGNORE;
  }
  const Account& a = *account;
  if (::geteuid() != 0) {
    log.Warning("not running as root: cannot mount %s for %s", a.home.c_str(), a.name.c_str());
    DropPassword(pamh);
    return PAM_SUCCESS;
  }
  auto count = SessionCount::Lock(a.uid, log);
  if (!count) {
    log.Warning("%s not mounted: no session count", a.home.c_str());
    DropPassword(pamh);
    return PAM_SUCCESS;
  }
  if (IsSigilfsMounted(a.mount_point)) {
    log.Debug("%s is already mounted", a.home.c_str());
  } else {
    Mount(pamh, a, options, log);
  }
  // Every session counts, mounted or not: otherwise a session that logged in while the vault did
  // not open would unmount, at its close, the home of a later session that did open it.
  count->Set(count->value() + 1, log);
  log.Debug("%s has %d session(s)", a.name.c_str(), count->value());
  DropPassword(pamh);
  return PAM_SUCCESS;
}

int CloseHomeSession(pam_handle_t* pamh, const Options& options, const Log& log) {
  const auto account = LookUpAccount(pamh, options, log);
  if (!account || !HasVault(*account)) return PAM_IGNORE;
  const Account& a = *account;
  if (::geteuid() != 0) {
    log.Warning("not running as root: cannot unmount %s", a.home.c_str());
    return PAM_SUCCESS;
  }
  auto count = SessionCount::Lock(a.uid, log);
  if (!count) return PAM_SUCCESS;
  if (count->value() == 0) {
    // A close without an open (the counter was lost): whoever mounted it keeps it.
    log.Debug("no open session counted for %s: nothing to unmount", a.name.c_str());
    return PAM_SUCCESS;
  }
  count->Set(count->value() - 1, log);
  log.Debug("%s has %d session(s) left", a.name.c_str(), count->value());
  if (count->value() == 0 && IsSigilfsMounted(a.mount_point)) Unmount(a, log);
  return PAM_SUCCESS;
}

}  // namespace sigilfs::pam
