// Progress reports of long library calls (import, export, the tree check, sealing and verifying
// a file), so that front ends can show how far they have come.
#pragma once

#include <cstdint>
#include <functional>

namespace sigilfs::core {

// Called, on the calling thread, with the plaintext bytes just done (a step of up to a few MiB).
// Empty: nothing is reported.
using ByteProgress = std::function<void(uint64_t bytes)>;

}  // namespace sigilfs::core
