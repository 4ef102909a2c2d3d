// SHA-256: one-shot, incremental, and a salted-prefix hasher for fs-verity blocks.
#pragma once

#include <array>
#include <cstdint>

#include "sigilfs/crypt/bytes.h"

namespace sigilfs::crypt {

inline constexpr size_t kSha256Size = 32;
using Sha256Digest = std::array<uint8_t, kSha256Size>;

Sha256Digest Sha256(ByteSpan data);

// Incremental SHA-256 (OpenSSL; SHA-NI where the CPU has it). Copyable: copying duplicates
// the running state, which is how a precomputed prefix is reused.
// Thread-safety: REQUIRES external synchronization (a value type; copy it per thread).
class Sha256Hasher {
 public:
  Sha256Hasher();
  void Update(ByteSpan data);
  Sha256Digest Final();  // the hasher must not be updated again after Final

 private:
  // Opaque storage for OpenSSL's SHA256_CTX (a plain struct, so copying it is a memcpy).
  alignas(8) std::array<uint8_t, 112> state_;
};

// Hashes many blocks that share one prefix (fs-verity's salt, zero-padded to 64 bytes): the
// prefix is absorbed once and its state copied per block, instead of re-hashing the salt each time.
// Thread-safety: safe for concurrent access (Digest is const).
class Sha256Prefixed {
 public:
  // An empty prefix hashes like plain SHA-256.
  explicit Sha256Prefixed(ByteSpan prefix);
  Sha256Digest Digest(ByteSpan block) const;

 private:
  Sha256Hasher prefix_state_;
};

}  // namespace sigilfs::crypt
