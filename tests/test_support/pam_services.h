// Test helper: throw-away PAM services in /etc/pam.d around pam_sigilfs.so, for pamtester.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_support/system_user.h"

namespace sigilfs::test {

inline constexpr char kPamtester[] = "/usr/bin/pamtester";

// Empty when logins can be tried here (throw-away accounts, pamtester); else why not.
inline std::string PamSessionsUnavailable() {
  if (std::string why = SystemUser::Unavailable(); !why.empty()) return why;
  if (::access(kPamtester, X_OK) != 0) return "no pamtester (scripts/install-deps.sh installs it)";
  return "";
}

// Two throw-away services in /etc/pam.d, removed when the object goes away. "strict" is a
// normal login (pam_unix decides); "lenient" lets pam_unix fail, so that what pam_sigilfs does
// with a wrong password shows on its own.
class PamServices {
 public:
  PamServices(const std::string& name, const std::string& module_args) : name_(name) {
    const std::string module = std::string(PAM_SIGILFS_MODULE) + " " + module_args;
    Write(strict(),
          "auth     required  pam_unix.so nodelay\n"
          "auth     optional  " +
              module +
              "\n"
              "account  required  pam_permit.so\n"
              "session  required  pam_permit.so\n"
              "session  optional  " +
              module +
              "\n"
              "password required  pam_unix.so nodelay\n"
              "password optional  " +
              module + "\n");
    Write(lenient(),
          "auth     optional  pam_unix.so nodelay\n"
          "auth     optional  " +
              module +
              "\n"
              "auth     required  pam_permit.so\n"
              "session  required  pam_permit.so\n"
              "session  optional  " +
              module + "\n");
  }
  ~PamServices() {
    std::error_code ec;
    std::filesystem::remove("/etc/pam.d/" + strict(), ec);
    std::filesystem::remove("/etc/pam.d/" + lenient(), ec);
  }
  PamServices(const PamServices&) = delete;
  PamServices& operator=(const PamServices&) = delete;

  std::string strict() const { return name_; }
  std::string lenient() const { return name_ + "-lenient"; }

 private:
  static void Write(const std::string& service, const std::string& text) {
    std::ofstream("/etc/pam.d/" + service) << text;
  }
  std::string name_;
};

}  // namespace sigilfs::test
