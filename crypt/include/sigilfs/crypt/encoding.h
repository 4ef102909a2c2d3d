// Text encodings of binary data: base64 (config fields), unpadded base64url (file names), hex.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sigilfs/crypt/bytes.h"
#include "sigilfs/status.h"

namespace sigilfs::crypt {

enum class Base64Variant {
  kStandard,         // RFC 4648 section 4, padded: config files
  kUrlSafeUnpadded,  // RFC 4648 section 5, no '=': encrypted file names (no '/' allowed)
};

std::string Base64Encode(ByteSpan data, Base64Variant variant);
// kCorrupt if `text` is not canonical base64 of the variant (stray characters, bad padding).
Result<std::vector<uint8_t>> Base64Decode(std::string_view text, Base64Variant variant);

std::string HexEncode(ByteSpan data);
Result<std::vector<uint8_t>> HexDecode(std::string_view text);

}  // namespace sigilfs::crypt
