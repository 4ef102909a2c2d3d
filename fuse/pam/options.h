// The module's arguments from the PAM configuration line (documented in docs/home.md).
#pragma once

#include <security/pam_modules.h>

#include <string>

namespace sigilfs::pam {

struct Options {
  std::string vault;          // vault=TEMPLATE: %u user name, %h home, %% a percent sign
  std::string sigilfs;        // sigilfs=PATH: the sigilfs binary that mounts and re-wraps
  std::string mount_options;  // mount_options=A,B: added to -o default_permissions
  bool debug = false;         // debug: log each decision at LOG_DEBUG
};

// Parses argv; an unknown or malformed argument is logged and ignored (a typo in a PAM file
// must not lock anyone out).
Options ParseOptions(pam_handle_t* pamh, int argc, const char** argv);

}  // namespace sigilfs::pam
