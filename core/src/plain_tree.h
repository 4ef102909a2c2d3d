// Plain-tree helpers of import, export and compare: a plain directory's sorted names and its
// entries' `user.*` attributes and POSIX ACLs, through BackingDir.
#pragma once

#include <algorithm>
#include <cerrno>
#include <string>
#include <string_view>
#include <vector>

#include "sigilfs/core/acl.h"
#include "sigilfs/core/backing_dir.h"
#include "sigilfs/crypt/secure_bytes.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

inline constexpr std::string_view kUserNamespace = "user.";

// The names of plain directory `dir`, sorted.
inline Result<std::vector<std::string>> SortedNames(BackingDir& dir) {
  std::vector<std::string> names;
  SIGILFS_RETURN_IF_ERROR(dir.List(0, [&](const BackingEntry& e) {
    names.push_back(e.name);
    return true;
  }));
  std::sort(names.begin(), names.end());
  return names;
}

struct PlainXattr {
  std::string name;
  std::vector<uint8_t> value;
};

// The `user.*` attributes of plain entry `name` of `dir` and, with `acls`, its POSIX ACLs in
// canonical form (none where the store keeps none).
inline Result<std::vector<PlainXattr>> PlainXattrs(BackingDir& dir, std::string_view name,
                                                   bool acls) {
  auto names = dir.ListXattrs(name);
  if (!names.ok()) {
    const int e = names.status().sys_errno();
    if (e == ENOTSUP || e == EOPNOTSUPP) return std::vector<PlainXattr>{};
    return names.status();
  }
  std::vector<PlainXattr> out;
  for (std::string& attr : *names) {
    const bool is_acl = acl::IsAclName(attr);
    if (!attr.starts_with(kUserNamespace) && !(acls && is_acl)) continue;
    auto value = dir.GetXattr(name, attr);
    if (!value.ok() && value.status().sys_errno() == ENODATA) continue;  // removed meanwhile
    Status failed = value.status();
    if (failed.ok() && is_acl) {
      auto canonical = acl::Canonical(*value);
      if (canonical.ok()) {
        crypt::SecureWipe(*value);
        *value = std::move(canonical).value();
      } else {
        failed = canonical.status().WithContext(attr);
      }
    }
    if (!failed.ok()) {  // the values read so far are plaintext: wiped before they go
      if (value.ok()) crypt::SecureWipe(*value);
      for (PlainXattr& x : out) crypt::SecureWipe(x.value);
      return failed;
    }
    out.push_back({std::move(attr), std::move(value).value()});
  }
  return out;
}

}  // namespace sigilfs::core
