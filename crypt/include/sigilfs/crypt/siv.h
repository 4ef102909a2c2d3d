// AES-SIV (RFC 5297): deterministic authenticated encryption, used for file names.
#pragma once

#include <memory>
#include <vector>

#include "sigilfs/crypt/bytes.h"
#include "sigilfs/status.h"

namespace sigilfs::crypt {

inline constexpr size_t kSivTagSize = 16;

// AES-SIV over OpenSSL 3. The key is 32, 48 or 64 bytes (AES-128/192/256-SIV; sigilfs names use
// AES-256-SIV, 64 bytes). Output is SIV (16 bytes) || ciphertext, as RFC 5297 writes it.
// Thread-safety: safe for concurrent access without external synchronization.
class AesSiv {
 public:
  static Result<std::unique_ptr<AesSiv>> Create(ByteSpan key);
  ~AesSiv();
  AesSiv(const AesSiv&) = delete;
  AesSiv& operator=(const AesSiv&) = delete;

  // Each element of `ad` is one associated-data component (RFC 5297 S2V vector). `plaintext`
  // must not be empty (kInvalidArgument): OpenSSL 3.0 cannot seal an empty message.
  Result<std::vector<uint8_t>> Seal(std::span<const ByteSpan> ad, ByteSpan plaintext) const;
  // `sealed` is SIV || ciphertext; kAuthFailed if it does not verify.
  Result<std::vector<uint8_t>> Open(std::span<const ByteSpan> ad, ByteSpan sealed) const;

 private:
  struct Impl;
  explicit AesSiv(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sigilfs::crypt
