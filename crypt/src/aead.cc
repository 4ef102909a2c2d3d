// AEAD implementations: AES-256-GCM on OpenSSL 3 EVP, XChaCha20-Poly1305 on libsodium.
#include "sigilfs/crypt/aead.h"

#include <openssl/err.h>
#include <sodium.h>

#include <array>
#include <atomic>
#include <climits>
#include <vector>

#include "openssl_handles.h"
#include "sigilfs/mutex.h"
#include "sodium_init.h"

namespace sigilfs::crypt {
namespace internal {

const char* LastOpensslError() {
  thread_local char buf[256];
  unsigned long err = ERR_get_error();  // NOLINT(google-runtime-int): OpenSSL's type
  if (err == 0) return "unknown OpenSSL error";
  ERR_error_string_n(err, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

}  // namespace internal

namespace {

using internal::CipherCtxPtr;
using internal::CipherPtr;

Status CheckSizes(size_t nonce_want, ByteSpan nonce, ByteSpan in, MutableByteSpan out,
                  size_t tag_size) {
  if (nonce.size() != nonce_want) return Status(Code::kInvalidArgument, "wrong AEAD nonce size");
  if (out.size() != in.size()) return Status(Code::kInvalidArgument, "AEAD output size mismatch");
  if (tag_size != kAeadTagSize) return Status(Code::kInvalidArgument, "wrong AEAD tag size");
  if (in.size() > INT_MAX) return Status(Code::kInvalidArgument, "AEAD unit too large");
  return Status::Ok();
}

Status AuthFailed() { return Status(Code::kAuthFailed, "authentication tag mismatch"); }

// libsodium declares its buffer arguments nonnull even for zero lengths; an empty span's data()
// may be null, so point those at a harmless byte instead.
const uint8_t* NonNull(ByteSpan s) {
  static const uint8_t kEmpty = 0;
  return s.data() != nullptr ? s.data() : &kEmpty;
}
uint8_t* NonNull(MutableByteSpan s) {
  thread_local uint8_t empty = 0;
  return s.data() != nullptr ? s.data() : &empty;
}

// The cipher is fetched from the provider once per process: implicit fetches on every init
// would cost a lock and a lookup per page.
const EVP_CIPHER* Aes256GcmCipher() {
  static const CipherPtr kCipher(EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr));
  return kCipher.get();
}

class AesGcm final : public Aead {
 public:
  explicit AesGcm(ByteSpan key) : key_(SecureBytes::CopyOf(key)) {}
  ~AesGcm() override {
    for (Shard& shard : shards_)
      for (EVP_CIPHER_CTX* ctx : shard.free) EVP_CIPHER_CTX_free(ctx);
  }

  AeadAlgorithm algorithm() const override { return AeadAlgorithm::kAes256Gcm; }

  Status Seal(ByteSpan nonce, ByteSpan ad, ByteSpan plaintext, MutableByteSpan ciphertext,
              MutableByteSpan tag) const override {
    SIGILFS_RETURN_IF_ERROR(CheckSizes(12, nonce, plaintext, ciphertext, tag.size()));
    if (ad.size() > INT_MAX) return Status(Code::kInvalidArgument, "AD too large");
    Lease lease(*this);
    EVP_CIPHER_CTX* ctx = lease.get();
    if (ctx == nullptr) return Status(Code::kInternal, internal::LastOpensslError());
    int len = 0;
    // A NULL cipher and key keep the context's key schedule; only the IV (and direction) change.
    bool ok = EVP_EncryptInit_ex2(ctx, nullptr, nullptr, nonce.data(), nullptr) == 1;
    if (ok && !ad.empty())
      ok = EVP_EncryptUpdate(ctx, nullptr, &len, ad.data(), static_cast<int>(ad.size())) == 1;
    if (ok && !plaintext.empty())
      ok = EVP_EncryptUpdate(ctx, ciphertext.data(), &len, plaintext.data(),
                             static_cast<int>(plaintext.size())) == 1;
    if (ok) ok = EVP_EncryptFinal_ex(ctx, ciphertext.data() + plaintext.size(), &len) == 1;
    if (ok)
      ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kAeadTagSize),
                               tag.data()) == 1;
    if (!ok) {
      lease.discard();
      return Status(Code::kInternal, internal::LastOpensslError());
    }
    return Status::Ok();
  }

  Status Open(ByteSpan nonce, ByteSpan ad, ByteSpan ciphertext, ByteSpan tag,
              MutableByteSpan plaintext) const override {
    SIGILFS_RETURN_IF_ERROR(CheckSizes(12, nonce, ciphertext, plaintext, tag.size()));
    if (ad.size() > INT_MAX) return Status(Code::kInvalidArgument, "AD too large");
    Lease lease(*this);
    EVP_CIPHER_CTX* ctx = lease.get();
    if (ctx == nullptr) return Status(Code::kInternal, internal::LastOpensslError());
    int len = 0;
    bool ok = EVP_DecryptInit_ex2(ctx, nullptr, nullptr, nonce.data(), nullptr) == 1;
    if (ok && !ad.empty())
      ok = EVP_DecryptUpdate(ctx, nullptr, &len, ad.data(), static_cast<int>(ad.size())) == 1;
    if (ok && !ciphertext.empty())
      ok = EVP_DecryptUpdate(ctx, plaintext.data(), &len, ciphertext.data(),
                             static_cast<int>(ciphertext.size())) == 1;
    // The tag is only an input here; OpenSSL's API takes it as non-const.
    if (ok)
      ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kAeadTagSize),
                               const_cast<uint8_t*>(tag.data())) == 1;
    if (!ok) {
      lease.discard();
      return Status(Code::kInternal, internal::LastOpensslError());
    }
    if (EVP_DecryptFinal_ex(ctx, plaintext.data() + ciphertext.size(), &len) != 1) {
      ERR_clear_error();
      return AuthFailed();
    }
    return Status::Ok();
  }

 private:
  // Borrows a keyed context from the pool (or makes one) and gives it back on scope exit.
  class Lease {
   public:
    explicit Lease(const AesGcm& owner) : owner_(owner), ctx_(owner.Acquire()) {}
    ~Lease() {
      if (ctx_ != nullptr) owner_.Release(ctx_);
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    EVP_CIPHER_CTX* get() const { return ctx_; }
    // A context that failed mid-operation is freed rather than reused.
    void discard() {
      EVP_CIPHER_CTX_free(ctx_);
      ctx_ = nullptr;
    }

   private:
    const AesGcm& owner_;
    EVP_CIPHER_CTX* ctx_;
  };

  // The pool is sharded by thread so the workers sealing one batch do not queue on one mutex
  // per page; a thread keeps to its shard.
  static constexpr size_t kShards = 8;
  struct alignas(64) Shard {
    Mutex mu;
    std::vector<EVP_CIPHER_CTX*> free SIGILFS_GUARDED_BY(mu);
  };

  static size_t ShardIndex() {
    static std::atomic<size_t> next{0};
    thread_local const size_t index = next.fetch_add(1, std::memory_order_relaxed) % kShards;
    return index;
  }

  EVP_CIPHER_CTX* Acquire() const {
    Shard& shard = shards_[ShardIndex()];
    {
      MutexLock lock(shard.mu);
      if (!shard.free.empty()) {
        EVP_CIPHER_CTX* ctx = shard.free.back();
        shard.free.pop_back();
        return ctx;
      }
    }
    // A new context: the AES key schedule and GHASH table are computed here, once.
    CipherCtxPtr ctx(EVP_CIPHER_CTX_new());
    if (!ctx ||
        EVP_EncryptInit_ex2(ctx.get(), Aes256GcmCipher(), key_.data(), nullptr, nullptr) != 1) {
      return nullptr;
    }
    return ctx.release();
  }

  void Release(EVP_CIPHER_CTX* ctx) const {
    Shard& shard = shards_[ShardIndex()];
    MutexLock lock(shard.mu);
    shard.free.push_back(ctx);
  }

  SecureBytes key_;
  mutable std::array<Shard, kShards> shards_;
};

class XChaCha20Poly1305 final : public Aead {
 public:
  explicit XChaCha20Poly1305(ByteSpan key) : key_(SecureBytes::CopyOf(key)) {}

  AeadAlgorithm algorithm() const override { return AeadAlgorithm::kXChaCha20Poly1305; }

  Status Seal(ByteSpan nonce, ByteSpan ad, ByteSpan plaintext, MutableByteSpan ciphertext,
              MutableByteSpan tag) const override {
    SIGILFS_RETURN_IF_ERROR(CheckSizes(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES, nonce,
                                       plaintext, ciphertext, tag.size()));
    unsigned long long tag_len = 0;  // NOLINT(google-runtime-int): libsodium's type
    crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
        NonNull(ciphertext), tag.data(), &tag_len, NonNull(plaintext), plaintext.size(),
        NonNull(ad), ad.size(), nullptr, nonce.data(), key_.data());
    return Status::Ok();
  }

  Status Open(ByteSpan nonce, ByteSpan ad, ByteSpan ciphertext, ByteSpan tag,
              MutableByteSpan plaintext) const override {
    SIGILFS_RETURN_IF_ERROR(CheckSizes(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES, nonce,
                                       ciphertext, plaintext, tag.size()));
    if (crypto_aead_xchacha20poly1305_ietf_decrypt_detached(
            NonNull(plaintext), nullptr, NonNull(ciphertext), ciphertext.size(), tag.data(),
            NonNull(ad), ad.size(), nonce.data(), key_.data()) != 0) {
      return AuthFailed();
    }
    return Status::Ok();
  }

 private:
  SecureBytes key_;
};

}  // namespace

std::string_view AeadAlgorithmName(AeadAlgorithm alg) {
  switch (alg) {
    case AeadAlgorithm::kAes256Gcm:
      return "aes-256-gcm";
    case AeadAlgorithm::kXChaCha20Poly1305:
      return "xchacha20-poly1305";
  }
  return "unknown";
}

Result<AeadAlgorithm> ParseAeadAlgorithm(std::string_view name) {
  if (name == "aes-256-gcm") return AeadAlgorithm::kAes256Gcm;
  if (name == "xchacha20-poly1305") return AeadAlgorithm::kXChaCha20Poly1305;
  return Status(Code::kNotSupported, "unknown cipher '" + std::string(name) +
                                         "' (choose aes-256-gcm or xchacha20-poly1305)");
}

size_t AeadNonceSize(AeadAlgorithm alg) {
  return alg == AeadAlgorithm::kAes256Gcm ? 12 : crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
}

Result<std::unique_ptr<Aead>> Aead::Create(AeadAlgorithm alg, ByteSpan key) {
  if (key.size() != kAeadKeySize)
    return Status(Code::kInvalidArgument, "AEAD key must be 32 bytes");
  internal::EnsureSodium();
  switch (alg) {
    case AeadAlgorithm::kAes256Gcm: {
      if (Aes256GcmCipher() == nullptr)
        return Status(Code::kNotSupported, "OpenSSL has no AES-256-GCM");
      auto aead = std::make_unique<AesGcm>(key);
      return std::unique_ptr<Aead>(std::move(aead));
    }
    case AeadAlgorithm::kXChaCha20Poly1305:
      return std::unique_ptr<Aead>(std::make_unique<XChaCha20Poly1305>(key));
  }
  return Status(Code::kNotSupported, "unknown AEAD algorithm");
}

}  // namespace sigilfs::crypt
