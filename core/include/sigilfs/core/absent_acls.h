// KnownAbsentAcls: which objects a front end knows to have no ACL, so that asking costs no call.
#pragma once

#include <cstdint>

#include "sigilfs/core/node_table.h"
#include "sigilfs/mutex.h"

namespace sigilfs::core {

// What a front end that is its store's one writer (an exclusive mount) knows its objects not to
// have: their access and default ACLs. `ls -l` asks for every file's access ACL, and a create
// for its directory's default ACL; most objects have neither, and a store call to say so costs
// more than the rest of the request. A node's knowledge (Node::absent_acls) is learned from the
// store's answer or at the object's making, and forgotten when any ACL changes:
// - a reader takes Now() before it asks the store (or makes an object), and records a "none"
//   with Learned(), which a change completed meanwhile (anywhere) voids;
// - a change of a node's ACLs calls Changed() once stored and before its reply, so that no
//   answer given after the reply says "none" of an ACL that is there.
// A front end whose store other writers share (a shared mount) must not use it: they change
// ACLs behind it.
// Thread-safety: safe for concurrent access.
class KnownAbsentAcls {
 public:
  static constexpr uint8_t kAccess = 1;   // no access ACL
  static constexpr uint8_t kDefault = 2;  // no default ACL

  // Whether `node` is known to have none of `bits`.
  static bool Known(const Node& node, uint8_t bits) {
    return (node.absent_acls.load(std::memory_order_acquire) & bits) == bits;
  }
  // The point a store's answer, asked for after this, dates from.
  uint64_t Now() const SIGILFS_EXCLUDES(mu_);
  // The store said at `since` (Now() before asking) that `node` has none of `bits`: known from
  // here on, unless some ACL changed since.
  void Learned(Node& node, uint8_t bits, uint64_t since) SIGILFS_EXCLUDES(mu_);
  // `node`'s ACLs changed (or may have: a failed change): what was known of it goes, but for
  // `now_absent`, what the change itself left without an ACL (a removal, or an access ACL that
  // only said the mode and was not stored).
  void Changed(Node& node, uint8_t now_absent = 0) SIGILFS_EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  uint64_t changes_ SIGILFS_GUARDED_BY(mu_) = 0;
};

}  // namespace sigilfs::core
