// Module arguments: key=value pairs and flags, defaults from the build (the installed sigilfs).
#include "options.h"

#include <security/pam_ext.h>
#include <syslog.h>

#include <string_view>

#include "sigilfs/fuse/home_vault.h"

namespace sigilfs::pam {

Options ParseOptions(pam_handle_t* pamh, int argc, const char** argv) {
  Options o;
  o.vault = std::string(fuse::kDefaultHomeVaultTemplate);
  o.sigilfs = SIGILFS_DEFAULT_BINARY;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string_view key = arg.substr(0, eq);
    const std::string value(eq == std::string_view::npos ? "" : arg.substr(eq + 1));
    if (arg == "debug") {
      o.debug = true;
    } else if (key == "vault" && !value.empty()) {
      o.vault = value;
    } else if (key == "sigilfs" && !value.empty() && value[0] == '/') {
      o.sigilfs = value;
    } else if (key == "mount_options" && eq != std::string_view::npos) {
      o.mount_options = value;
    } else {
      pam_syslog(pamh, LOG_ERR, "ignoring unknown or malformed option '%s'", argv[i]);
    }
  }
  return o;
}

}  // namespace sigilfs::pam
