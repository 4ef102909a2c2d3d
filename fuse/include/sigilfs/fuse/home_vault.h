// Where a user's home vault lives: the one template `sigilfs home` and pam_sigilfs.so both expand.
// Header-only and standard library only, so the PAM module shares it without linking the layers.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sigilfs::fuse {

// Beside the home directories rather than inside the home: the mount hides the home's own
// contents, so a vault inside it would be unreachable once mounted. One root-owned directory
// (/home/.sigilfs, mode 0711) holds one vault per user, each owned by its user.
inline constexpr std::string_view kDefaultHomeVaultTemplate = "/home/.sigilfs/%u";

// `tmpl` with %u replaced by the user name, %h by the home directory and %% by %; nothing if
// the template has another % sequence or the result is not an absolute path.
inline std::optional<std::string> ExpandHomeVault(std::string_view tmpl, std::string_view user,
                                                  std::string_view home) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] != '%') {
      out += tmpl[i];
      continue;
    }
    if (++i == tmpl.size()) return std::nullopt;
    switch (tmpl[i]) {
      case 'u':
        out += user;
        break;
      case 'h':
        out += home;
        break;
      case '%':
        out += '%';
        break;
      default:
        return std::nullopt;
    }
  }
  if (out.empty() || out[0] != '/') return std::nullopt;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace sigilfs::fuse
