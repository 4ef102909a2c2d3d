// Fuzzes core::ParseConfig: fails cleanly or yields a config that serializes and parses back.
#include <cstddef>
#include <cstdint>

#include "fuzz_util.h"
#include "sigilfs/core/config.h"

namespace sigilfs::fuzz {
namespace {

bool SameConfig(const core::VaultConfig& a, const core::VaultConfig& b) {
  return a.version == b.version && a.cipher == b.cipher && a.page_size == b.page_size &&
         a.kdf.opslimit == b.kdf.opslimit && a.kdf.memlimit == b.kdf.memlimit &&
         a.kdf_salt == b.kdf_salt && a.wrap_nonce == b.wrap_nonce && a.wrapped_key == b.wrapped_key;
}

}  // namespace
}  // namespace sigilfs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sigilfs;
  auto config = core::ParseConfig(fuzz::AsText(data, size));
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == Code::kCorrupt ||
               config.status().code() == Code::kNotSupported);
    FUZZ_CHECK(!config.status().message().empty());
    return 0;
  }
  // What parses is a config this build can use.
  FUZZ_CHECK(config->version == core::kVaultFormatVersion);
  FUZZ_CHECK(config->page_size == core::kPageSize);
  FUZZ_CHECK(config->wrap_nonce.size() == crypt::AeadNonceSize(crypt::AeadAlgorithm::kAes256Gcm));
  FUZZ_CHECK(config->wrapped_key.size() == core::kMasterKeySize + crypt::kAeadTagSize);
  FUZZ_CHECK(crypt::ValidateArgon2Params(config->kdf).ok());

  // Serializing is canonical: parse(serialize(c)) == c, and serializing that again is stable.
  const std::string text = core::SerializeConfig(*config);
  auto again = core::ParseConfig(text);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(fuzz::SameConfig(*config, *again));
  FUZZ_CHECK(core::SerializeConfig(*again) == text);
  FUZZ_CHECK(core::ConfigAssociatedData(*config) == core::ConfigAssociatedData(*again));
  return 0;
}
