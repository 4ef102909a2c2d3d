// SHA-256 over OpenSSL's SHA256_CTX, whose plain-struct state makes prefix reuse a copy.
#include "sigilfs/crypt/sha256.h"

// The low-level SHA256_* calls are deprecated in OpenSSL 3 in favour of EVP, but EVP_MD_CTX
// copies allocate a provider context per copy; a struct copy is what a per-block salted prefix
// needs. Both reach the same SHA-NI/AVX2 code.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <cstring>

namespace sigilfs::crypt {

static_assert(sizeof(SHA256_CTX) == 112, "Sha256Hasher::state_ must hold a SHA256_CTX");
static_assert(alignof(SHA256_CTX) <= 8);

namespace {
SHA256_CTX* Ctx(std::array<uint8_t, 112>& s) { return reinterpret_cast<SHA256_CTX*>(s.data()); }
}  // namespace

Sha256Digest Sha256(ByteSpan data) {
  Sha256Digest d;
  ::SHA256(data.data(), data.size(), d.data());
  return d;
}

Sha256Hasher::Sha256Hasher() { SHA256_Init(Ctx(state_)); }

void Sha256Hasher::Update(ByteSpan data) {
  if (!data.empty()) SHA256_Update(Ctx(state_), data.data(), data.size());
}

Sha256Digest Sha256Hasher::Final() {
  Sha256Digest d;
  SHA256_Final(d.data(), Ctx(state_));
  return d;
}

Sha256Prefixed::Sha256Prefixed(ByteSpan prefix) { prefix_state_.Update(prefix); }

Sha256Digest Sha256Prefixed::Digest(ByteSpan block) const {
  Sha256Hasher h = prefix_state_;
  h.Update(block);
  return h.Final();
}

}  // namespace sigilfs::crypt
