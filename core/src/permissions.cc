// Permission rules of new and changed entries: modes, inherited and set ACLs, set-ID bits.
#include "sigilfs/core/permissions.h"

#include <cerrno>
#include <string>
#include <utility>

namespace sigilfs::core::permissions {

Result<NewModes> ForNew(Tree& tree, BackingDir& parent, mode_t type, mode_t mode, mode_t umask,
                        bool acls, bool parent_has_no_default) {
  NewModes out;
  out.mode = mode & 07777;
  if (acls && !parent_has_no_default) {
    // With POSIX ACLs the kernel neither applies the umask nor inherits default ACLs for FUSE:
    // posix_acl_create is the server's.
    auto inherited = tree.GetXattr(parent, acl::kDefaultName);
    if (inherited.ok()) {
      auto parsed = acl::Parse(*inherited);
      if (!parsed.ok()) return Status(Code::kCorrupt, "stored default ACL");
      if (acl::CreateMasq(*parsed, &out.mode)) out.access_acl = acl::Serialize(*parsed);
      if (S_ISDIR(type)) out.default_acl = std::move(*inherited);
      out.parent_default_acl = true;
      return out;
    }
    // No attribute, or none possible there: no default ACL.
    const int e = inherited.status().sys_errno();
    if (e != ENODATA && e != EOPNOTSUPP) return inherited.status();
  }
  out.mode &= ~umask;
  return out;
}

void WithoutAcl(NewModes& modes) {
  if (modes.access_acl.empty()) return;
  auto parsed = acl::Parse(modes.access_acl);
  const mode_t group = parsed.ok() ? acl::OwningGroupPerms(*parsed) : 0;
  modes.mode = (modes.mode & ~static_cast<mode_t>(S_IRWXG)) | (group << 3);
  modes.access_acl.clear();
}

Status FinishNew(Tree& tree, BackingDir& object, const NewModes& modes, const struct stat* known) {
  // The access ACL first: until it is stored the entry has its owner's bits only.
  if (!modes.access_acl.empty())
    SIGILFS_RETURN_IF_ERROR(
        tree.StoreAcl(object, acl::kAccessName, &modes.access_acl, 0, modes.mode));
  if (!modes.default_acl.empty())
    SIGILFS_RETURN_IF_ERROR(
        tree.StoreAcl(object, acl::kDefaultName, &modes.default_acl, 0, modes.mode));
  // The store's own umask applied to the new object too, and a chown by root clears set-ID
  // bits: the mode asked for wins. (A stored ACL may have changed the mode.)
  struct stat st;
  if (known != nullptr && modes.access_acl.empty() && modes.default_acl.empty()) {
    st = *known;
  } else {
    SIGILFS_ASSIGN_OR_RETURN(st, object.Stat(""));
  }
  if ((st.st_mode & 07777) != modes.mode) return object.SetMode("", modes.mode);
  return Status::Ok();
}

Status SetAcl(Tree& tree, BackingDir& object, const struct stat& st, std::string_view name,
              const acl::Acl& value, int flags, bool acls, const InGroup& in_group,
              bool known_absent) {
  const mode_t current = st.st_mode & 07777;
  const std::vector<uint8_t> bytes = acl::Serialize(value);
  if (name == acl::kDefaultName) {
    // Only directories have one (the kernel refuses the others before asking, as ext4 does).
    if (!S_ISDIR(st.st_mode)) return Status::FromErrno(EACCES, "default ACL on a non-directory");
    return tree.StoreAcl(object, name, &bytes, flags, current, {.st = &st});
  }
  // FUSE leaves posix_acl_update_mode to the server: the mode follows the ACL, an ACL the mode
  // says in full is not stored, and set-group-ID goes unless the caller is in the file's group.
  mode_t perms = 0;
  const bool equivalent = acl::EquivalentMode(value, &perms);
  mode_t mode = (current & ~0777u) | perms;
  if ((mode & S_ISGID) != 0 && !(in_group && in_group(st.st_gid))) mode &= ~S_ISGID;
  if (!acls) {
    if (!equivalent) return Status::FromErrno(EOPNOTSUPP, "ACLs are off (-o acl)");
    return mode != current ? object.SetMode("", mode) : Status::Ok();
  }
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    // The store keeps no `user.*` attributes on special files: only what the mode can say is
    // possible there.
    if (!equivalent) return Status::FromErrno(EOPNOTSUPP, "ACL on a special file");
    return mode != current ? object.SetMode("", mode) : Status::Ok();
  }
  return tree.StoreAcl(object, name, equivalent ? nullptr : &bytes, flags, mode,
                       {.st = &st, .absent = known_absent});
}

Status RemoveAcl(Tree& tree, BackingDir& object, const struct stat& st, std::string_view name) {
  // As on ext4, removing an ACL that is not there is no error (and changes no mode).
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return Status::Ok();  // never stored
  return tree.StoreAcl(object, name, nullptr, 0, st.st_mode & 07777, {.st = &st});
}

Status Chmod(Tree& tree, BackingDir& object, mode_t type, mode_t mode, bool acls,
             bool no_access_acl) {
  mode &= 07777;
  // The kernel leaves a FUSE server's ACLs alone on chmod (posix_acl_chmod is the server's):
  // the owner, group-class (mask) and other entries follow the new mode.
  if (acls && !no_access_acl && (S_ISREG(type) || S_ISDIR(type))) {
    auto value = tree.GetXattr(object, acl::kAccessName);
    if (value.ok()) {
      auto parsed = acl::Parse(*value);
      if (!parsed.ok()) return Status(Code::kCorrupt, "stored access ACL");
      acl::Chmod(*parsed, mode);
      const std::vector<uint8_t> rewritten = acl::Serialize(*parsed);
      return tree.StoreAcl(object, acl::kAccessName, &rewritten, 0, mode);
    }
    const int e = value.status().sys_errno();
    if (e != ENODATA && e != EOPNOTSUPP) return value.status();
  }
  return object.SetMode("", mode);
}

std::optional<mode_t> ClearedSetId(const struct stat& st, const InGroup& in_group,
                                   const std::function<bool()>& fsetid) {
  if (!S_ISREG(st.st_mode)) return std::nullopt;
  const mode_t now = st.st_mode & 07777;
  if ((now & (S_ISUID | S_ISGID)) == 0) return std::nullopt;
  // Group membership matters only for set-group-ID without group execute.
  const bool sgid_needs_group = (now & (S_ISGID | S_IXGRP)) == S_ISGID;
  const mode_t mode = WithoutSetId(now, !sgid_needs_group || (in_group && in_group(st.st_gid)));
  if (mode == now || (fsetid && fsetid())) return std::nullopt;
  return mode;
}

}  // namespace sigilfs::core::permissions
