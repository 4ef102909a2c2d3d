// SHA-256: one-shot, incremental, a salted-prefix hasher for fs-verity blocks, and HMAC.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

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
  void Wipe();           // zeroes the state (which may hold a key's hash): the hasher is unusable

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

// HMAC-SHA256 (RFC 2104) with the key's two padded blocks absorbed once, so each message costs
// only its own hashing: for deriving many values from one key (reverse mode's synthetic
// nonces and path-derived IVs). The key's states are wiped when the object goes.
// Thread-safety: safe for concurrent access (Mac is const).
class HmacSha256 {
 public:
  explicit HmacSha256(ByteSpan key);  // any length; a key past 64 bytes is hashed first
  ~HmacSha256();
  HmacSha256(const HmacSha256&) = delete;
  HmacSha256& operator=(const HmacSha256&) = delete;

  // The MAC of the concatenation of `parts`.
  Sha256Digest Mac(std::initializer_list<ByteSpan> parts) const;

 private:
  Sha256Hasher inner_, outer_;
};

}  // namespace sigilfs::crypt
