// Base64 and hex over libsodium's constant-time codecs.
#include "sigilfs/crypt/encoding.h"

#include <sodium.h>

#include "sodium_init.h"

namespace sigilfs::crypt {
namespace {

int SodiumVariant(Base64Variant v) {
  return v == Base64Variant::kStandard ? sodium_base64_VARIANT_ORIGINAL
                                       : sodium_base64_VARIANT_URLSAFE_NO_PADDING;
}

}  // namespace

std::string Base64Encode(ByteSpan data, Base64Variant variant) {
  internal::EnsureSodium();
  const int v = SodiumVariant(variant);
  std::string out(sodium_base64_ENCODED_LEN(data.size(), v), '\0');
  sodium_bin2base64(out.data(), out.size(), data.data(), data.size(), v);
  out.resize(out.size() - 1);  // drop the terminating NUL libsodium counts in
  return out;
}

Result<std::vector<uint8_t>> Base64Decode(std::string_view text, Base64Variant variant) {
  internal::EnsureSodium();
  std::vector<uint8_t> out(text.size() / 4 * 3 + 3);
  size_t len = 0;
  const char* end = nullptr;
  if (sodium_base642bin(out.data(), out.size(), text.data(), text.size(), nullptr, &len, &end,
                        SodiumVariant(variant)) != 0 ||
      end != text.data() + text.size()) {
    return Status(Code::kCorrupt, "invalid base64");
  }
  out.resize(len);
  // libsodium accepts non-zero padding bits; re-encoding makes the decoding canonical, so one
  // name has exactly one spelling (otherwise two cipher names could decrypt to one plain name).
  if (Base64Encode(out, variant) != text) return Status(Code::kCorrupt, "non-canonical base64");
  return out;
}

std::string HexEncode(ByteSpan data) {
  internal::EnsureSodium();
  std::string out(data.size() * 2 + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), data.data(), data.size());
  out.pop_back();
  return out;
}

Result<std::vector<uint8_t>> HexDecode(std::string_view text) {
  internal::EnsureSodium();
  if (text.size() % 2 != 0) return Status(Code::kCorrupt, "odd-length hex");
  if (text.empty()) return std::vector<uint8_t>{};  // sodium_hex2bin must not get a null buffer
  std::vector<uint8_t> out(text.size() / 2);
  size_t len = 0;
  const char* end = nullptr;
  if (sodium_hex2bin(out.data(), out.size(), text.data(), text.size(), nullptr, &len, &end) != 0 ||
      end != text.data() + text.size() || len != out.size()) {
    return Status(Code::kCorrupt, "invalid hex");
  }
  return out;
}

}  // namespace sigilfs::crypt
