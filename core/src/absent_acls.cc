// KnownAbsentAcls: the knowledge of ACLs that are not there, learned and forgotten in order.
#include "sigilfs/core/absent_acls.h"

namespace sigilfs::core {

uint64_t KnownAbsentAcls::Now() const {
  MutexLock lock(mu_);
  return changes_;
}

void KnownAbsentAcls::Learned(Node& node, uint8_t bits, uint64_t since) {
  // Under the lock a change takes to count itself: a change either completed before this (and
  // counted, so `since` is old and nothing is learned) or clears after it.
  MutexLock lock(mu_);
  if (changes_ == since) node.absent_acls.fetch_or(bits, std::memory_order_release);
}

void KnownAbsentAcls::Changed(Node& node, uint8_t now_absent) {
  MutexLock lock(mu_);
  ++changes_;
  node.absent_acls.store(now_absent, std::memory_order_release);
}

}  // namespace sigilfs::core
