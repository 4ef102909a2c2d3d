// AES-SIV (RFC 5297) over OpenSSL 3's "AES-nnn-SIV" ciphers, for deterministic name encryption.
#include "sigilfs/crypt/siv.h"

#include <openssl/err.h>

#include <climits>
#include <mutex>

#include "openssl_handles.h"
#include "sigilfs/crypt/secure_bytes.h"

namespace sigilfs::crypt {

using internal::CipherCtxPtr;
using internal::CipherPtr;

struct AesSiv::Impl {
  CipherPtr cipher;
  SecureBytes key;
};

AesSiv::AesSiv(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AesSiv::~AesSiv() = default;

Result<std::unique_ptr<AesSiv>> AesSiv::Create(ByteSpan key) {
  const char* name = nullptr;
  switch (key.size()) {
    case 32:
      name = "AES-128-SIV";
      break;
    case 48:
      name = "AES-192-SIV";
      break;
    case 64:
      name = "AES-256-SIV";
      break;
    default:
      return Status(Code::kInvalidArgument, "AES-SIV key must be 32, 48 or 64 bytes");
  }
  auto impl = std::make_unique<Impl>();
  impl->cipher.reset(EVP_CIPHER_fetch(nullptr, name, nullptr));
  if (!impl->cipher) return Status(Code::kNotSupported, std::string("OpenSSL has no ") + name);
  impl->key = SecureBytes::CopyOf(key);
  return std::unique_ptr<AesSiv>(new AesSiv(std::move(impl)));
}

namespace {

// Feeds every AD component as its own S2V input: each EVP update with a NULL output is one.
bool AbsorbAd(EVP_CIPHER_CTX* ctx, std::span<const ByteSpan> ad, bool encrypt) {
  for (ByteSpan a : ad) {
    if (a.size() > INT_MAX) return false;
    int len = 0;
    int rc = encrypt ? EVP_EncryptUpdate(ctx, nullptr, &len, a.data(), static_cast<int>(a.size()))
                     : EVP_DecryptUpdate(ctx, nullptr, &len, a.data(), static_cast<int>(a.size()));
    if (rc != 1) return false;
  }
  return true;
}

}  // namespace

Result<std::vector<uint8_t>> AesSiv::Seal(std::span<const ByteSpan> ad, ByteSpan plaintext) const {
  if (plaintext.size() > INT_MAX) return Status(Code::kInvalidArgument, "SIV input too large");
  // OpenSSL 3.0's SIV skips a zero-length update and then fails in final; names are never
  // empty, so an empty message is refused here rather than reported as a library failure.
  if (plaintext.empty())
    return Status(Code::kInvalidArgument, "AES-SIV cannot seal an empty message");
  // A fresh context per call, freed (and wiped) before it returns: a keyed context kept for
  // reuse would save 2 us a call but leave the names key's schedule in OpenSSL's ordinary heap,
  // which a core dump or swap may hold (MountKeyMemoryTest finds it there).
  CipherCtxPtr ctx(EVP_CIPHER_CTX_new());
  std::vector<uint8_t> out(kSivTagSize + plaintext.size());
  int len = 0;
  bool ok = ctx && EVP_EncryptInit_ex2(ctx.get(), impl_->cipher.get(), impl_->key.data(), nullptr,
                                       nullptr) == 1;
  ok = ok && AbsorbAd(ctx.get(), ad, true);
  // OpenSSL's SIV takes the whole plaintext in one update (an empty one included).
  ok = ok && EVP_EncryptUpdate(ctx.get(), out.data() + kSivTagSize, &len, plaintext.data(),
                               static_cast<int>(plaintext.size())) == 1;
  ok = ok && EVP_EncryptFinal_ex(ctx.get(), out.data() + kSivTagSize + len, &len) == 1;
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, kSivTagSize, out.data()) == 1;
  if (!ok) return Status(Code::kInternal, internal::LastOpensslError());
  return out;
}

Result<std::vector<uint8_t>> AesSiv::Open(std::span<const ByteSpan> ad, ByteSpan sealed) const {
  // Seal never produces a bare tag (see there), so one cannot be authentic.
  if (sealed.size() <= kSivTagSize) return Status(Code::kAuthFailed, "SIV input too short");
  if (sealed.size() > INT_MAX) return Status(Code::kInvalidArgument, "SIV input too large");
  CipherCtxPtr ctx(EVP_CIPHER_CTX_new());
  const size_t n = sealed.size() - kSivTagSize;
  std::vector<uint8_t> out(n);
  int len = 0;
  bool ok = ctx && EVP_DecryptInit_ex2(ctx.get(), impl_->cipher.get(), impl_->key.data(), nullptr,
                                       nullptr) == 1;
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_TAG, kSivTagSize,
                                 const_cast<uint8_t*>(sealed.data())) == 1;
  ok = ok && AbsorbAd(ctx.get(), ad, false);
  if (!ok) return Status(Code::kInternal, internal::LastOpensslError());
  // The tag is checked inside the single update for SIV; a mismatch fails there.
  if (EVP_DecryptUpdate(ctx.get(), out.data(), &len, sealed.data() + kSivTagSize,
                        static_cast<int>(n)) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), out.data() + len, &len) != 1) {
    ERR_clear_error();
    SecureWipe(out);
    return Status(Code::kAuthFailed, "name authentication failed");
  }
  return out;
}

}  // namespace sigilfs::crypt
