// SHA-256 over OpenSSL's SHA256_CTX, whose plain-struct state makes prefix reuse a copy.
#include "sigilfs/crypt/sha256.h"

// The low-level SHA256_* calls are deprecated in OpenSSL 3 in favour of EVP, but EVP_MD_CTX
// copies allocate a provider context per copy; a struct copy is what a per-block salted prefix
// needs. Both reach the same SHA-NI/AVX2 code.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <algorithm>
#include <cstring>

#include "sigilfs/crypt/secure_bytes.h"

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

void Sha256Hasher::Wipe() { SecureWipe(state_); }

Sha256Prefixed::Sha256Prefixed(ByteSpan prefix) { prefix_state_.Update(prefix); }

Sha256Digest Sha256Prefixed::Digest(ByteSpan block) const {
  Sha256Hasher h = prefix_state_;
  h.Update(block);
  return h.Final();
}

HmacSha256::HmacSha256(ByteSpan key) {
  constexpr size_t kBlock = 64;
  std::array<uint8_t, kBlock> block{};
  if (key.size() > kBlock) {
    const Sha256Digest hashed = Sha256(key);
    std::copy(hashed.begin(), hashed.end(), block.begin());
  } else {
    std::copy(key.begin(), key.end(), block.begin());
  }
  std::array<uint8_t, kBlock> pad;
  for (size_t i = 0; i < kBlock; ++i) pad[i] = block[i] ^ 0x36;
  inner_.Update(pad);
  for (size_t i = 0; i < kBlock; ++i) pad[i] = block[i] ^ 0x5c;
  outer_.Update(pad);
  SecureWipe(block);
  SecureWipe(pad);
}

HmacSha256::~HmacSha256() {
  inner_.Wipe();
  outer_.Wipe();
}

Sha256Digest HmacSha256::Mac(std::initializer_list<ByteSpan> parts) const {
  Sha256Hasher inner = inner_;
  for (ByteSpan part : parts) inner.Update(part);
  const Sha256Digest inner_digest = inner.Final();
  Sha256Hasher outer = outer_;
  outer.Update(inner_digest);
  const Sha256Digest mac = outer.Final();
  inner.Wipe();  // the copies began as the key's states
  outer.Wipe();
  return mac;
}

}  // namespace sigilfs::crypt
