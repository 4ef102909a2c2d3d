// Permission rules a kernel leaves to a FUSE server, for every front end over Tree: the mode and
// ACLs a new entry gets, an ACL set or removed with the mode it implies, chmod's rewrite of an
// access ACL, and the set-ID bits a change clears.
#pragma once

#include <sys/stat.h>

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "sigilfs/core/acl.h"
#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/tree.h"
#include "sigilfs/status.h"

namespace sigilfs::core::permissions {

// Whether the caller is in group `gid` (its own or a supplementary one).
using InGroup = std::function<bool(gid_t gid)>;

// What a new entry gets: its mode (the umask applied, or restricted by the parent's default
// ACL) and the ACLs it inherits (empty when none is stored).
struct NewModes {
  mode_t mode = 0;                   // permission bits (and set-ID bits) of the new entry
  std::vector<uint8_t> access_acl;   // inherited access ACL, xattr form
  std::vector<uint8_t> default_acl;  // directories: the parent's default ACL
  // The parent has a default ACL (as read, with `acls`): without one, the new entry has no ACL.
  bool parent_default_acl = false;
  // Until its access ACL is stored a new entry has its owner's bits only: the ACL may deny a
  // named user what the group or other bits would allow.
  mode_t initial() const { return access_acl.empty() ? mode : mode & ~(S_IRWXG | S_IRWXO); }
};

// The modes of a new entry of type `type` (S_IFMT bits) asked for with `mode` in directory
// `parent`. With `acls` (POSIX ACLs kept) and a default ACL on `parent`, that ACL restricts the
// mode and is inherited (posix_acl_create); otherwise `umask` applies. kCorrupt if the stored
// default ACL does not parse; a value that does not open is Tree::GetXattr's error.
// `parent_has_no_default`: known already (KnownAbsentAcls), so the store is not asked.
Result<NewModes> ForNew(Tree& tree, BackingDir& parent, mode_t type, mode_t mode, mode_t umask,
                        bool acls, bool parent_has_no_default = false);
// A special file (FIFO, socket, device) keeps no ACL (the store keeps no `user.*` attributes
// there): it gets the mode its inherited ACL allows, its group bits what the owning group
// itself may do, not the mask (which would hand the group what only named entries were given).
void WithoutAcl(NewModes& modes);
// Stores a new entry's inherited ACLs and then gives it its final mode (`object`: a handle on
// the new entry; `known`, if given, its stat as it is now).
Status FinishNew(Tree& tree, BackingDir& object, const NewModes& modes,
                 const struct stat* known = nullptr);

// Sets ACL `name` (acl::kAccessName or acl::kDefaultName) of `object` (`st`, its stat) to
// `value` (XATTR_CREATE/XATTR_REPLACE in `flags`). A default ACL only on a directory (EACCES).
// An access ACL sets the mode it stands for and is not stored if that mode says it all; the
// set-group-ID bit goes unless the caller is in the file's group (posix_acl_update_mode).
// Without `acls` (none kept), or on a special file, only an ACL a mode can say is taken, as
// that mode (EOPNOTSUPP otherwise). `known_absent`: `name` is known not to be stored
// (KnownAbsentAcls), so an ACL the mode says costs no removal.
Status SetAcl(Tree& tree, BackingDir& object, const struct stat& st, std::string_view name,
              const acl::Acl& value, int flags, bool acls, const InGroup& in_group,
              bool known_absent = false);
// Removes ACL `name` of `object` (`st`); none there, or a special file's, is no error.
Status RemoveAcl(Tree& tree, BackingDir& object, const struct stat& st, std::string_view name);
// chmod of `object` (of type `type`) to permission bits `mode`: with `acls`, an access ACL's
// owner, group-class and other entries follow the new mode (posix_acl_chmod), stored with it.
// kCorrupt if the stored access ACL does not parse. `no_access_acl`: known already
// (KnownAbsentAcls), so the store is not asked.
Status Chmod(Tree& tree, BackingDir& object, mode_t type, mode_t mode, bool acls,
             bool no_access_acl = false);

// `mode` without set-user-ID, and without set-group-ID where the group may execute or the
// caller is not `in_group`.
inline mode_t WithoutSetId(mode_t mode, bool in_group) {
  mode &= ~static_cast<mode_t>(S_ISUID);
  if ((mode & S_IXGRP) != 0 || !in_group) mode &= ~static_cast<mode_t>(S_ISGID);
  return mode;
}
// The permission bits of a regular file (`st`) once a write, truncate, O_TRUNC open or
// fallocate by the caller has cleared what it must (the kernel's setattr_should_drop_suidgid):
// nullopt where nothing changes, or the caller holds CAP_FSETID (`fsetid`, asked only then).
std::optional<mode_t> ClearedSetId(const struct stat& st, const InGroup& in_group,
                                   const std::function<bool()>& fsetid);

}  // namespace sigilfs::core::permissions
