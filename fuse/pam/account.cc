// Looks the PAM user up, with everything a forked child will need, before any fork.
#include "account.h"

#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "sigilfs/core/config.h"
#include "sigilfs/fuse/home_vault.h"

namespace sigilfs::pam {
namespace {

// The home's parent resolved (it may be reached through a symlink, as /home -> /data/home); the
// home itself is not: once mounted, a FUSE mount of the user's answers root's stat with EACCES.
std::string MountPointOf(const std::string& home) {
  const size_t slash = home.find_last_of('/');
  if (slash == std::string::npos) return home;
  const std::string parent = slash == 0 ? "/" : home.substr(0, slash);
  char resolved[PATH_MAX];
  if (::realpath(parent.c_str(), resolved) == nullptr) return home;
  const std::string base = home.substr(slash + 1);
  const std::string dir = resolved;
  return dir == "/" ? "/" + base : dir + "/" + base;
}

}  // namespace

std::optional<Account> LookUpAccount(pam_handle_t* pamh, const Options& options, const Log& log) {
  const char* user = nullptr;
  if (pam_get_user(pamh, &user, nullptr) != PAM_SUCCESS || user == nullptr || user[0] == '\0') {
    log.Debug("no user name");
    return std::nullopt;
  }
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 16384);
  struct passwd pw;
  struct passwd* found = nullptr;
  while (::getpwnam_r(user, &pw, buf.data(), buf.size(), &found) == ERANGE)
    buf.resize(buf.size() * 2);
  if (found == nullptr) {
    log.Debug("user %s is not in the password database", user);
    return std::nullopt;
  }
  Account a;
  a.name = pw.pw_name;
  a.uid = pw.pw_uid;
  a.gid = pw.pw_gid;
  a.home = pw.pw_dir;
  while (a.home.size() > 1 && a.home.back() == '/') a.home.pop_back();
  if (a.home.empty() || a.home[0] != '/' || a.home == "/") {
    log.Debug("%s has no home directory a vault can be mounted on", a.name.c_str());
    return std::nullopt;
  }
  a.mount_point = MountPointOf(a.home);
  auto vault = fuse::ExpandHomeVault(options.vault, a.name, a.home);
  if (!vault) {
    log.Error("vault=%s does not expand to an absolute path", options.vault.c_str());
    return std::nullopt;
  }
  a.vault = *vault;
  // The supplementary groups now, as initgroups() would find them: the forked child of a login
  // program that may have threads must not call into NSS itself.
  int count = 32;
  a.groups.resize(static_cast<size_t>(count));
  while (::getgrouplist(a.name.c_str(), a.gid, a.groups.data(), &count) < 0) {
    // count now holds the number needed
    a.groups.resize(static_cast<size_t>(count));
  }
  a.groups.resize(static_cast<size_t>(count));
  return a;
}

bool HasVault(const Account& account) {
  struct stat st;
  const std::string config = account.vault + "/" + core::kConfigFileName;
  return ::stat(config.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace sigilfs::pam
