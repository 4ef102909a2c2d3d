// Internal: RAII ownership of OpenSSL handles (as BoringSSL's bssl::UniquePtr does).
#pragma once

#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <memory>

namespace sigilfs::crypt::internal {

struct CipherCtxDeleter {
  void operator()(EVP_CIPHER_CTX* p) const { EVP_CIPHER_CTX_free(p); }
};
struct CipherDeleter {
  void operator()(EVP_CIPHER* p) const { EVP_CIPHER_free(p); }
};
struct KdfDeleter {
  void operator()(EVP_KDF* p) const { EVP_KDF_free(p); }
};
struct KdfCtxDeleter {
  void operator()(EVP_KDF_CTX* p) const { EVP_KDF_CTX_free(p); }
};

using CipherCtxPtr = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxDeleter>;
using CipherPtr = std::unique_ptr<EVP_CIPHER, CipherDeleter>;
using KdfPtr = std::unique_ptr<EVP_KDF, KdfDeleter>;
using KdfCtxPtr = std::unique_ptr<EVP_KDF_CTX, KdfCtxDeleter>;

// The most recent OpenSSL error as text, for Status messages.
const char* LastOpensslError();

}  // namespace sigilfs::crypt::internal
