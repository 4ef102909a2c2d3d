// Cryptographically secure random bytes (nonces, salts, keys).
#pragma once

#include "sigilfs/crypt/bytes.h"

namespace sigilfs::crypt {

// Fills `out` with random bytes from OpenSSL's DRBG. Small requests (page nonces, one per page
// write) are served from a per-thread buffer so the hot path makes no system call and takes no
// lock; the buffer is discarded in a child after fork() so parent and child never share nonces.
// Thread-safety: safe for concurrent use.
void RandomBytes(MutableByteSpan out);

}  // namespace sigilfs::crypt
