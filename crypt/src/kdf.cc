// Argon2id (libsodium) and HKDF-SHA256 (OpenSSL 3 EVP_KDF).
#include "sigilfs/crypt/kdf.h"

#include <openssl/core_names.h>
#include <openssl/params.h>
#include <sodium.h>

#include <string>

#include "openssl_handles.h"
#include "sodium_init.h"

namespace sigilfs::crypt {

Argon2Params Argon2ParamsFor(KdfPreset preset) {
  switch (preset) {
    case KdfPreset::kInteractive:
      return {crypto_pwhash_argon2id_OPSLIMIT_INTERACTIVE,
              crypto_pwhash_argon2id_MEMLIMIT_INTERACTIVE};
    case KdfPreset::kModerate:
      return {crypto_pwhash_argon2id_OPSLIMIT_MODERATE, crypto_pwhash_argon2id_MEMLIMIT_MODERATE};
    case KdfPreset::kSensitive:
      return {crypto_pwhash_argon2id_OPSLIMIT_SENSITIVE, crypto_pwhash_argon2id_MEMLIMIT_SENSITIVE};
    case KdfPreset::kTest:
      return {crypto_pwhash_argon2id_OPSLIMIT_MIN, crypto_pwhash_argon2id_MEMLIMIT_MIN};
  }
  return {};
}

Result<KdfPreset> ParseKdfPreset(std::string_view name) {
  if (name == "interactive") return KdfPreset::kInteractive;
  if (name == "moderate") return KdfPreset::kModerate;
  if (name == "sensitive") return KdfPreset::kSensitive;
  if (name == "test") return KdfPreset::kTest;
  return Status(Code::kInvalidArgument, "unknown KDF preset '" + std::string(name) +
                                            "' (choose interactive, moderate, sensitive or test)");
}

Status ValidateArgon2Params(const Argon2Params& params) {
  // Upper bounds well above the "sensitive" preset (4 passes, 1 GiB) but low enough that a
  // damaged or hostile config cannot pin the machine before its tag check fails.
  constexpr uint64_t kMaxOps = 64;
  constexpr uint64_t kMaxMem = uint64_t{4} << 30;
  if (params.opslimit < crypto_pwhash_argon2id_OPSLIMIT_MIN || params.opslimit > kMaxOps)
    return Status(Code::kInvalidArgument,
                  "Argon2id opslimit " + std::to_string(params.opslimit) + " out of range");
  if (params.memlimit < crypto_pwhash_argon2id_MEMLIMIT_MIN || params.memlimit > kMaxMem)
    return Status(Code::kInvalidArgument,
                  "Argon2id memlimit " + std::to_string(params.memlimit) + " out of range");
  return Status::Ok();
}

Result<SecureBytes> Argon2id(ByteSpan passphrase, ByteSpan salt, const Argon2Params& params,
                             size_t out_size) {
  SIGILFS_RETURN_IF_ERROR(ValidateArgon2Params(params));
  if (salt.size() != crypto_pwhash_argon2id_SALTBYTES)
    return Status(Code::kInvalidArgument, "Argon2id salt must be 16 bytes");
  if (out_size < crypto_pwhash_argon2id_BYTES_MIN)
    return Status(Code::kInvalidArgument, "Argon2id output too short");
  internal::EnsureSodium();
  SecureBytes out(out_size);
  // An empty passphrase is a valid input to Argon2id; libsodium accepts a null pointer for it.
  if (crypto_pwhash(out.data(), out.size(), reinterpret_cast<const char*>(passphrase.data()),
                    passphrase.size(), salt.data(), params.opslimit,
                    static_cast<size_t>(params.memlimit), crypto_pwhash_ALG_ARGON2ID13) != 0) {
    return Status(Code::kNoSpace, "Argon2id could not allocate its memory");
  }
  return out;
}

Result<SecureBytes> HkdfSha256(ByteSpan ikm, ByteSpan salt, ByteSpan info, size_t out_size) {
  static const internal::KdfPtr kHkdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr));
  if (!kHkdf) return Status(Code::kNotSupported, "OpenSSL has no HKDF");
  if (out_size == 0 || out_size > size_t{255} * 32)
    return Status(Code::kInvalidArgument, "HKDF output size out of range");
  internal::KdfCtxPtr ctx(EVP_KDF_CTX_new(kHkdf.get()));
  if (!ctx) return Status(Code::kInternal, internal::LastOpensslError());

  char digest[] = "SHA256";
  OSSL_PARAM params[5];
  size_t n = 0;
  params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0);
  params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
                                                  const_cast<uint8_t*>(ikm.data()), ikm.size());
  // An absent salt means HashLen zero bytes (RFC 5869 2.2); OpenSSL does that when it is unset.
  if (!salt.empty())
    params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT,
                                                    const_cast<uint8_t*>(salt.data()), salt.size());
  if (!info.empty())
    params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO,
                                                    const_cast<uint8_t*>(info.data()), info.size());
  params[n] = OSSL_PARAM_construct_end();

  SecureBytes out(out_size);
  if (EVP_KDF_derive(ctx.get(), out.data(), out.size(), params) != 1)
    return Status(Code::kInternal, internal::LastOpensslError());
  return out;
}

}  // namespace sigilfs::crypt
