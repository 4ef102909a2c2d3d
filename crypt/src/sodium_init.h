// Internal: initializes libsodium once, before any of its functions is used.
#pragma once

namespace sigilfs::crypt::internal {

// Calls sodium_init() exactly once per process; aborts if libsodium cannot start (no RNG).
void EnsureSodium();

}  // namespace sigilfs::crypt::internal
