// Test helper: POSIX ACLs as `getfacl` and `setfacl` see and set them.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "test_support/process.h"

namespace sigilfs::test {

// `getfacl -R -p` of `dir`, with paths relative to it and entries sorted (each file system
// lists a directory in its own order).
inline std::string AclsOf(const std::string& dir, const std::string& extra = "") {
  ProcessResult r =
      RunProcess({"/bin/sh", "-c", "cd \"$1\" && exec getfacl -R -p " + extra + " .", "sh", dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> blocks;
  std::istringstream in(r.out);
  std::string block;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) {
      block += line + "\n";
    } else if (!block.empty()) {
      blocks.push_back(std::move(block));
      block.clear();
    }
  }
  if (!block.empty()) blocks.push_back(block);
  std::sort(blocks.begin(), blocks.end());
  std::string out;
  for (const std::string& b : blocks) out += b + "\n";
  return out;
}

inline void Setfacl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/setfacl"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = RunProcess(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

// One entry of a POSIX ACL as the kernel gives it in `system.posix_acl_*` attributes.
inline constexpr uint16_t kAclUserObj = 0x01, kAclUser = 0x02, kAclGroupObj = 0x04,
                          kAclGroup = 0x08, kAclMask = 0x10, kAclOther = 0x20;
inline constexpr uint32_t kAclNoId = 0xFFFFFFFF;
struct AclEntry {
  uint16_t tag;
  uint16_t perm;
  uint32_t id = kAclNoId;
};

// The attribute's value: version 2, then (tag, perm, id) per entry, little-endian. Entries in
// the kernel's order (by tag, then id) come back byte for byte.
inline std::string AclXattr(const std::vector<AclEntry>& entries) {
  std::string out;
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  };
  put(2, 4);
  for (const AclEntry& e : entries) {
    put(e.tag, 2);
    put(e.perm, 2);
    put(e.id, 4);
  }
  return out;
}

// The permission bits of the mode that goes with an access ACL: the group's are the mask's
// where there is one.
inline mode_t AclMode(const std::vector<AclEntry>& entries) {
  mode_t user = 0, group = 0, mask = 0, other = 0;
  bool masked = false;
  for (const AclEntry& e : entries) {
    if (e.tag == kAclUserObj) user = e.perm;
    if (e.tag == kAclGroupObj) group = e.perm;
    if (e.tag == kAclOther) other = e.perm;
    if (e.tag == kAclMask) {
      mask = e.perm;
      masked = true;
    }
  }
  return user << 6 | (masked ? mask : group) << 3 | other;
}

// The access ACL a new entry made with `mode` inherits from a default ACL, and in `mode` the
// mode it gets (the kernel's posix_acl_create_masq).
inline std::vector<AclEntry> AclCreateMasq(std::vector<AclEntry> acl, mode_t& mode) {
  AclEntry* group = nullptr;
  AclEntry* mask = nullptr;
  for (AclEntry& e : acl) {
    if (e.tag == kAclUserObj) {
      e.perm &= (mode >> 6) & 7;
      mode &= (static_cast<mode_t>(e.perm) << 6) | ~0700u;
    } else if (e.tag == kAclOther) {
      e.perm &= mode & 7;
      mode &= e.perm | ~07u;
    } else if (e.tag == kAclGroupObj) {
      group = &e;
    } else if (e.tag == kAclMask) {
      mask = &e;
    }
  }
  AclEntry* middle = mask != nullptr ? mask : group;
  middle->perm &= (mode >> 3) & 7;
  mode &= (static_cast<mode_t>(middle->perm) << 3) | ~070u;
  return acl;
}

}  // namespace sigilfs::test
