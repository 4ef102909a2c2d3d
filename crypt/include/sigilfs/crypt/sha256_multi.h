// SHA-256 from a precomputed prefix state, with a 2-way interleaved SHA-NI path for block hashing.
#pragma once

#include <array>
#include <cstdint>

#include "sigilfs/crypt/bytes.h"
#include "sigilfs/crypt/sha256.h"
#include "sigilfs/status.h"

namespace sigilfs::crypt {

// SHA-256 state after absorbing a prefix whose length is a multiple of 64 bytes (fs-verity's
// zero-padded salt; may be empty). Because the prefix fills whole blocks, the state is just the
// eight chaining words, so each hash starts from them without copying a hasher.
//
// Hash2 hashes two equal-length messages at once: on a CPU with the SHA extensions the two
// compression streams are interleaved, so one stream's rounds run while the other's wait on the
// latency of the previous SHA256RNDS2. Every implementation gives the same digests.
// Thread-safety: safe for concurrent access (const methods only).
class Sha256Midstate {
 public:
  enum class Impl {
    kAuto,     // SHA-NI where the CPU has it, otherwise generic
    kShaNi,    // the SHA-NI code; falls back to kGeneric where ShaNiAvailable() is false
    kGeneric,  // OpenSSL, on any CPU
  };

  // kInvalidArgument unless prefix.size() is a multiple of 64.
  static Result<Sha256Midstate> Create(ByteSpan prefix);

  // SHA-256(prefix || data), for data of any length.
  Sha256Digest Hash(ByteSpan data) const;

  // out_a = SHA-256(prefix || a), out_b = SHA-256(prefix || b). Interleaved when a and b have
  // the same size (the fs-verity case: two data blocks); otherwise two Hash calls. a and b may
  // overlap; out_a and out_b must not overlap a or b.
  void Hash2(ByteSpan a, ByteSpan b, Sha256Digest& out_a, Sha256Digest& out_b) const;

  // The same with a chosen implementation, for tests and benchmarks.
  Sha256Digest HashWith(Impl impl, ByteSpan data) const;
  void Hash2With(Impl impl, ByteSpan a, ByteSpan b, Sha256Digest& out_a, Sha256Digest& out_b) const;

  // Whether this CPU runs the SHA-NI code (SHA, SSE4.1 and SSSE3 per CPUID; checked once).
  // Always false on other architectures than x86-64.
  static bool ShaNiAvailable();

 private:
  Sha256Midstate(const std::array<uint32_t, 8>& state, uint64_t prefix_size)
      : state_(state), prefix_size_(prefix_size) {}

  std::array<uint32_t, 8> state_;  // chaining words H0..H7 after the prefix
  uint64_t prefix_size_;           // in bytes; counts toward the final length field
};

}  // namespace sigilfs::crypt
