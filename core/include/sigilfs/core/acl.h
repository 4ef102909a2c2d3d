// POSIX ACLs in the kernel's extended-attribute form, and the mode arithmetic of the kernel's
// fs/posix_acl.c that FUSE leaves to the server (equivalent mode, chmod, inheritance on create).
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <string_view>
#include <vector>

#include "sigilfs/crypt/bytes.h"
#include "sigilfs/status.h"

namespace sigilfs::core::acl {

inline constexpr std::string_view kAccessName = "system.posix_acl_access";
inline constexpr std::string_view kDefaultName = "system.posix_acl_default";

inline bool IsAclName(std::string_view name) { return name == kAccessName || name == kDefaultName; }

// Entry tags (linux/posix_acl.h), in the order a valid ACL lists them.
enum Tag : uint16_t {
  kUserObj = 0x01,
  kUser = 0x02,
  kGroupObj = 0x04,
  kGroup = 0x08,
  kMask = 0x10,
  kOther = 0x20,
};

struct Entry {
  uint16_t tag = 0;
  uint16_t perm = 0;  // rwx in the low three bits
  uint32_t id = 0;    // uid or gid for kUser/kGroup, else -1
};
using Acl = std::vector<Entry>;

// The xattr form (linux/posix_acl_xattr.h): a little-endian u32 version 2, then per entry
// u16 tag, u16 perm, u32 id.
inline constexpr uint32_t kXattrVersion = 2;
inline constexpr size_t kHeaderSize = 4, kEntrySize = 8;
inline constexpr uint32_t kUndefinedId = 0xffffffff;

namespace detail {
inline uint32_t Le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
inline uint16_t Le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
inline void Put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void Put16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
}
inline Status Invalid(const char* why) { return Status::FromErrno(EINVAL, why); }
}  // namespace detail

// Parses and checks an ACL as posix_acl_valid does: tags in order, one owner, owning-group and
// other entry each, at most one mask, and a mask whenever there are named entries. The kernel
// checks before it forwards; the daemon checks again because it computes modes from the result.
inline Result<Acl> Parse(ByteSpan value) {
  if (value.size() < kHeaderSize || (value.size() - kHeaderSize) % kEntrySize != 0)
    return detail::Invalid("ACL size");
  if (detail::Le32(value.data()) != kXattrVersion) return detail::Invalid("ACL version");
  Acl acl;
  int seen_user_obj = 0, seen_group_obj = 0, seen_other = 0, seen_mask = 0, named = 0;
  uint16_t last = 0;
  for (size_t at = kHeaderSize; at < value.size(); at += kEntrySize) {
    Entry e{detail::Le16(value.data() + at), detail::Le16(value.data() + at + 2),
            detail::Le32(value.data() + at + 4)};
    if ((e.perm & ~0007u) != 0) return detail::Invalid("ACL permissions");
    if (e.tag < last) return detail::Invalid("ACL order");
    switch (e.tag) {
      case kUserObj:
        ++seen_user_obj;
        break;
      case kGroupObj:
        ++seen_group_obj;
        break;
      case kOther:
        ++seen_other;
        break;
      case kMask:
        ++seen_mask;
        break;
      case kUser:
      case kGroup:
        ++named;
        break;
      default:
        return detail::Invalid("ACL tag");
    }
    last = e.tag;
    acl.push_back(e);
  }
  if (seen_user_obj != 1 || seen_group_obj != 1 || seen_other != 1 || seen_mask > 1 ||
      (named > 0 && seen_mask == 0))
    return detail::Invalid("ACL entries");
  return acl;
}

inline std::vector<uint8_t> Serialize(const Acl& acl) {
  std::vector<uint8_t> out;
  out.reserve(kHeaderSize + kEntrySize * acl.size());
  detail::Put32(out, kXattrVersion);
  for (const Entry& e : acl) {
    detail::Put16(out, e.tag);
    detail::Put16(out, e.perm);
    detail::Put32(out, e.id);
  }
  return out;
}

// An ACL checked and in the form the kernel hands out: the entries that name no one carry the
// id -1 (ACL_UNDEFINED_ID), so two copies of one ACL are equal byte for byte.
inline Result<std::vector<uint8_t>> Canonical(ByteSpan value) {
  auto acl = Parse(value);
  if (!acl.ok()) return acl.status();
  for (Entry& e : *acl)
    if (e.tag != kUser && e.tag != kGroup) e.id = kUndefinedId;
  return Serialize(*acl);
}

// The permission bits an ACL stands for (the group class is the mask when there is one), as
// posix_acl_equiv_mode. True if the mode says everything the ACL does (no named entries, no
// mask): then the ACL is not stored, as ext4 does.
inline bool EquivalentMode(const Acl& acl, mode_t* perms) {
  mode_t mode = 0;
  bool equivalent = true;
  for (const Entry& e : acl) {
    const mode_t p = e.perm & 07;
    switch (e.tag) {
      case kUserObj:
        mode |= p << 6;
        break;
      case kGroupObj:
        mode |= p << 3;
        break;
      case kOther:
        mode |= p;
        break;
      case kMask:
        mode = (mode & ~S_IRWXG) | (p << 3);
        equivalent = false;
        break;
      default:
        equivalent = false;
        break;
    }
  }
  *perms = mode;
  return equivalent;
}

// chmod of a file with an access ACL: owner, group class (the mask, if any, else the owning
// group) and other entries take the new bits, as posix_acl_chmod_masq.
inline void Chmod(Acl& acl, mode_t mode) {
  Entry* group_obj = nullptr;
  Entry* mask = nullptr;
  for (Entry& e : acl) {
    if (e.tag == kUserObj) e.perm = static_cast<uint16_t>((mode & S_IRWXU) >> 6);
    if (e.tag == kOther) e.perm = static_cast<uint16_t>(mode & S_IRWXO);
    if (e.tag == kGroupObj) group_obj = &e;
    if (e.tag == kMask) mask = &e;
  }
  Entry* group_class = mask != nullptr ? mask : group_obj;
  if (group_class != nullptr) group_class->perm = static_cast<uint16_t>((mode & S_IRWXG) >> 3);
}

// A new entry under a directory with a default ACL: `acl` starts as that default ACL and
// becomes the new entry's access ACL, restricted by the mode the creator asked for, and the
// mode is restricted by the ACL, as posix_acl_create_masq. True if the access ACL says more
// than the mode (it must be stored).
inline bool CreateMasq(Acl& acl, mode_t* mode) {
  mode_t m = *mode;
  Entry* group_obj = nullptr;
  Entry* mask = nullptr;
  bool needed = false;
  for (Entry& e : acl) {
    switch (e.tag) {
      case kUserObj:
        e.perm &= static_cast<uint16_t>((m >> 6) & 07);
        m &= (static_cast<mode_t>(e.perm) << 6) | ~S_IRWXU;
        break;
      case kOther:
        e.perm &= static_cast<uint16_t>(m & 07);
        m &= static_cast<mode_t>(e.perm) | ~S_IRWXO;
        break;
      case kGroupObj:
        group_obj = &e;
        break;
      case kMask:
        mask = &e;
        needed = true;
        break;
      default:
        needed = true;
        break;
    }
  }
  Entry* group_class = mask != nullptr ? mask : group_obj;
  if (group_class != nullptr) {
    group_class->perm &= static_cast<uint16_t>((m >> 3) & 07);
    m &= (static_cast<mode_t>(group_class->perm) << 3) | ~S_IRWXG;
  }
  *mode = m;
  return needed;
}

// What the owning group itself may do under `acl`: its entry, limited by the mask if there is
// one. (The group bits of a mode with an ACL are the mask, which speaks for named entries too.)
inline mode_t OwningGroupPerms(const Acl& acl) {
  mode_t group = 0, mask = 07;
  for (const Entry& e : acl) {
    if (e.tag == kGroupObj) group = e.perm & 07;
    if (e.tag == kMask) mask = e.perm & 07;
  }
  return group & mask;
}

}  // namespace sigilfs::core::acl
