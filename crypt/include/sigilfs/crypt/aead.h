// AEAD: seal/open one unit (page, tree block, record, wrapped key) with AES-256-GCM or
// XChaCha20-Poly1305.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "sigilfs/crypt/bytes.h"
#include "sigilfs/crypt/secure_bytes.h"
#include "sigilfs/status.h"

namespace sigilfs::crypt {

enum class AeadAlgorithm {
  kAes256Gcm,          // OpenSSL 3 EVP; 96-bit nonce; the default (AES-NI + PCLMUL)
  kXChaCha20Poly1305,  // libsodium; 192-bit nonce
};

inline constexpr size_t kAeadKeySize = 32;
inline constexpr size_t kAeadTagSize = 16;

// Stable config-file name of an algorithm ("aes-256-gcm", "xchacha20-poly1305").
std::string_view AeadAlgorithmName(AeadAlgorithm alg);
Result<AeadAlgorithm> ParseAeadAlgorithm(std::string_view name);
size_t AeadNonceSize(AeadAlgorithm alg);

// One key, many units. Seal and Open never allocate: the caller provides every buffer.
// The key schedule is computed once at creation; OpenSSL cipher contexts are pooled and reused.
// Thread-safety: safe for concurrent access without external synchronization.
class Aead {
 public:
  virtual ~Aead() = default;

  // `key` must be kAeadKeySize bytes.
  static Result<std::unique_ptr<Aead>> Create(AeadAlgorithm alg, ByteSpan key);

  virtual AeadAlgorithm algorithm() const = 0;
  size_t nonce_size() const { return AeadNonceSize(algorithm()); }

  // Encrypts `plaintext` into `ciphertext` (same size; may alias exactly) and writes the tag.
  // `nonce` must be nonce_size() bytes and never repeat for this key.
  virtual Status Seal(ByteSpan nonce, ByteSpan ad, ByteSpan plaintext, MutableByteSpan ciphertext,
                      MutableByteSpan tag) const = 0;

  // Verifies and decrypts. On kAuthFailed the contents of `plaintext` are unspecified (and must
  // not be used); callers wipe or discard them.
  virtual Status Open(ByteSpan nonce, ByteSpan ad, ByteSpan ciphertext, ByteSpan tag,
                      MutableByteSpan plaintext) const = 0;
};

}  // namespace sigilfs::crypt
