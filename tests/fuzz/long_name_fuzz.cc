// Fuzzes one listed entry (long-name side-file check, decrypt) and the base64/hex decoders.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "sigilfs/core/names.h"
#include "sigilfs/crypt/encoding.h"

namespace sigilfs::fuzz {
namespace {

using core::NameCodec;

// A listing reads at most this much of a side file (a larger one is damaged).
constexpr size_t kMaxSideFile = 4096;

const NameCodec& Codec() {
  static const NameCodec* codec = [] {
    const auto key = NamesKey();
    return NameCodec::Create(key).value().release();
  }();
  return *codec;
}

void CheckBase64(std::string_view text) {
  for (auto variant : {crypt::Base64Variant::kStandard, crypt::Base64Variant::kUrlSafeUnpadded}) {
    auto bytes = crypt::Base64Decode(text, variant);
    if (!bytes.ok()) {
      FUZZ_CHECK(bytes.status().code() == Code::kCorrupt);
      continue;
    }
    FUZZ_CHECK(crypt::Base64Encode(*bytes, variant) == text);
    const size_t n = bytes->size();
    if (variant == crypt::Base64Variant::kStandard)
      FUZZ_CHECK(text.size() == (n + 2) / 3 * 4);
    else
      FUZZ_CHECK(text.size() == (n * 4 + 2) / 3);
  }
  // Hex is the checksum's encoding in the config: canonical in lower case.
  auto hex = crypt::HexDecode(text);
  if (hex.ok()) {
    FUZZ_CHECK(hex->size() * 2 == text.size());
    std::string lower(text);
    for (char& c : lower)
      if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    FUZZ_CHECK(crypt::HexEncode(*hex) == lower);
  }
}

// One directory entry: `stored` as readdir returns it, `side` as its side file holds (if any).
// Mirrors Volume::ListedName.
void CheckEntry(std::string_view stored, std::string_view side) {
  if (stored.empty() || stored == "." || stored == "..") return;
  if (NameCodec::IsReserved(stored) && !NameCodec::IsLongName(stored)) return;  // never listed
  std::string cipher(stored);
  if (NameCodec::IsLongName(stored)) {
    FUZZ_CHECK(NameCodec::IsReserved(stored));
    if (side.size() > kMaxSideFile) return;             // damaged: too large
    if (NameCodec::StoredName(side) != stored) return;  // damaged: does not match
    // The check admits the full cipher name (longer than a stored name may be), or a side file
    // that repeats the stored name itself, which never decrypts ('.' is not base64url).
    FUZZ_CHECK(side.size() > core::kMaxStoredNameLength || side == stored);
    cipher = side;
  } else if (stored.size() > core::kMaxStoredNameLength) {
    return;  // damaged: a lookup stores such a name hashed
  }
  auto plain = Codec().Decrypt(FixedDirIv(), cipher);
  if (!plain.ok()) return;  // damaged
  FUZZ_CHECK(cipher.find('.') == std::string::npos);
  // What is listed is what a lookup of the plain name would store.
  auto again = Codec().Encrypt(FixedDirIv(), *plain);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == cipher);
  FUZZ_CHECK(NameCodec::StoredName(*again) == stored);
}

void MakeCorpus(const std::string& dir) {
  const std::string plains[] = {"short name", std::string(200, 'L'), std::string(255, 'M')};
  int i = 0;
  for (const std::string& p : plains) {
    const std::string cipher = *Codec().Encrypt(FixedDirIv(), p);
    const std::string stored = NameCodec::StoredName(cipher);
    std::string seed = stored;
    if (stored != cipher) seed += std::string(1, '\0') + cipher;
    WriteSeed(dir, "entry-" + std::to_string(i++), seed);
  }
  WriteSeed(dir, "base64-std", std::string_view("c2lnaWxmcw=="));
  WriteSeed(dir, "base64-url", std::string_view("_-8AAQ"));
  WriteSeed(dir, "hex", std::string_view("00ff10Ab"));
}

}  // namespace
}  // namespace sigilfs::fuzz

SIGILFS_FUZZ_SEEDS(sigilfs::fuzz::MakeCorpus)

// Input: stored name, NUL, side-file contents (without a NUL: a stored name alone).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sigilfs;
  const std::string_view text = fuzz::AsText(data, size);
  const size_t nul = text.find('\0');
  const std::string_view stored = text.substr(0, nul);
  const std::string_view side = nul == std::string_view::npos ? text : text.substr(nul + 1);
  fuzz::CheckEntry(stored, side);
  fuzz::CheckBase64(text);
  fuzz::CheckBase64(side);
  return 0;
}
