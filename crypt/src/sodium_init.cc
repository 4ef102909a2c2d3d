// Internal: one-time libsodium initialization.
#include "sodium_init.h"

#include <sodium.h>

#include <cstdio>
#include <cstdlib>

namespace sigilfs::crypt::internal {

void EnsureSodium() {
  static const bool kReady = [] {
    if (sodium_init() < 0) {
      std::fputs("sigilfs: libsodium failed to initialize\n", stderr);
      std::abort();
    }
    return true;
  }();
  (void)kReady;
}

}  // namespace sigilfs::crypt::internal
