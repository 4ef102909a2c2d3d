// The PAM user as the module needs it: ids, groups, home, where the mount goes, and the vault.
#pragma once

#include <security/pam_modules.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "log.h"
#include "options.h"

namespace sigilfs::pam {

struct Account {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups, looked up before any fork
  std::string home;           // from the password database
  std::string mount_point;    // the home with its parent's symlinks resolved, as the kernel
                              // lists it in mountinfo
  std::string vault;          // the vault template expanded
};

// The PAM user, or nothing (logged) when there is none, it is unknown, or the vault template
// does not expand.
std::optional<Account> LookUpAccount(pam_handle_t* pamh, const Options& options, const Log& log);

// Whether the account has a vault (its config exists).
bool HasVault(const Account& account);

}  // namespace sigilfs::pam
