// Fuzzes NameCodec decryption of names, symlink targets and xattrs, and the round trips.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "sigilfs/core/names.h"

namespace sigilfs::fuzz {
namespace {

using core::NameCodec;

const NameCodec& Codec() {
  static const NameCodec* codec = [] {
    const auto key = NamesKey();
    return NameCodec::Create(key).value().release();
  }();
  return *codec;
}

core::DirIv OtherIv() {
  core::DirIv iv = FixedDirIv();
  iv[0] ^= 0x80;
  return iv;
}

bool ValidPlainName(std::string_view s) {
  return !s.empty() && s != "." && s != ".." && s.size() <= core::kMaxPlainNameLength &&
         s.find_first_of(std::string_view("/\0", 2)) == std::string_view::npos;
}

// `s` as a stored cipher name (what readdir returns).
void CheckDecrypt(std::string_view s) {
  const NameCodec& codec = Codec();
  auto plain = codec.Decrypt(FixedDirIv(), s);
  if (!plain.ok()) {
    const Code c = plain.status().code();
    FUZZ_CHECK(c == Code::kCorrupt || c == Code::kAuthFailed || c == Code::kInvalidArgument);
    return;
  }
  // Deterministic and canonical: one plain name has exactly one cipher name per directory.
  FUZZ_CHECK(ValidPlainName(*plain));
  auto again = codec.Encrypt(FixedDirIv(), *plain);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == s);
  FUZZ_CHECK(!codec.Decrypt(OtherIv(), s).ok());  // bound to its directory
  FUZZ_CHECK(!NameCodec::IsReserved(s));          // cipher names never look like vault files
}

// `s` as a plain name: encrypts, decrypts back, and maps to a stored name of legal length.
void CheckEncrypt(std::string_view s) {
  const NameCodec& codec = Codec();
  auto cipher = codec.Encrypt(FixedDirIv(), s);
  if (!cipher.ok()) {
    FUZZ_CHECK(!ValidPlainName(s));
    FUZZ_CHECK(cipher.status().code() == Code::kInvalidArgument ||
               cipher.status().code() == Code::kNameTooLong);
    return;
  }
  FUZZ_CHECK(ValidPlainName(s));
  auto back = codec.Decrypt(FixedDirIv(), *cipher);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == s);
  FUZZ_CHECK(!codec.Decrypt(OtherIv(), *cipher).ok());
  const std::string stored = NameCodec::StoredName(*cipher);
  FUZZ_CHECK(stored.size() <= core::kMaxStoredNameLength);
  FUZZ_CHECK(NameCodec::IsLongName(stored) == (stored != *cipher));
  FUZZ_CHECK(NameCodec::IsReserved(stored) == NameCodec::IsLongName(stored));
}

void CheckTarget(std::string_view s) {
  const NameCodec& codec = Codec();
  auto target = codec.DecryptTarget(s);
  if (target.ok()) {
    // Sealed with a fresh nonce each time: re-encrypting differs, but opens to the same target.
    auto again = codec.EncryptTarget(*target);
    FUZZ_CHECK(again.ok());
    auto back = codec.DecryptTarget(*again);
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(*back == *target);
    // A symlink target is never accepted as a name, nor a name as a target.
    FUZZ_CHECK(!codec.Decrypt(FixedDirIv(), s).ok());
  } else {
    const Code c = target.status().code();
    FUZZ_CHECK(c == Code::kCorrupt || c == Code::kAuthFailed || c == Code::kInvalidArgument);
  }
  // `s` as a plain target.
  auto sealed = codec.EncryptTarget(s);
  if (!sealed.ok()) {
    FUZZ_CHECK(s.empty() || s.find('\0') != std::string_view::npos);
    return;
  }
  auto back = codec.DecryptTarget(*sealed);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == s);
  FUZZ_CHECK(!codec.Decrypt(FixedDirIv(), *sealed).ok());
}

// Input for xattrs: stored attribute name, NUL, sealed value.
void CheckXattr(ByteSpan in) {
  const NameCodec& codec = Codec();
  const std::string_view text = AsText(in.data(), in.size());
  const size_t nul = text.find('\0');
  const std::string_view stored = text.substr(0, nul);
  const ByteSpan sealed = nul == std::string_view::npos ? ByteSpan() : in.subspan(nul + 1);
  auto x = codec.OpenXattr(stored, sealed);
  if (x.ok()) {
    auto expect = codec.XattrStoredName(x->name);
    FUZZ_CHECK(expect.ok());
    FUZZ_CHECK(*expect == stored);
    FUZZ_CHECK(!codec.OpenXattr(std::string(stored) + "x", sealed).ok());
  } else {
    const Code c = x.status().code();
    FUZZ_CHECK(c == Code::kCorrupt || c == Code::kAuthFailed || c == Code::kInvalidArgument);
  }
  // The stored part as an attribute name, the rest as its value.
  auto name = codec.XattrStoredName(stored);
  if (!name.ok()) return;
  FUZZ_CHECK(name->starts_with(NameCodec::kXattrPrefix));
  auto value = codec.SealXattr(*name, stored, sealed);
  FUZZ_CHECK(value.ok());
  auto back = codec.OpenXattr(*name, *value);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(back->name == stored);
  FUZZ_CHECK(std::equal(back->value.begin(), back->value.end(), sealed.begin(), sealed.end()));
}

void CheckStoredNameHelpers(std::string_view s) {
  const std::string stored = NameCodec::StoredName(s);
  if (s.size() <= core::kMaxStoredNameLength) {
    FUZZ_CHECK(stored == s);
  } else {
    FUZZ_CHECK(stored.size() <= core::kMaxStoredNameLength);
    FUZZ_CHECK(NameCodec::IsLongName(stored));
    FUZZ_CHECK(NameCodec::IsReserved(stored));
    FUZZ_CHECK(NameCodec::StoredName(stored) == stored);
  }
  // A long name's side file is reserved but not itself a long name.
  const std::string side = NameCodec::SideFileName(s);
  FUZZ_CHECK(NameCodec::IsReserved(side));
  FUZZ_CHECK(!NameCodec::IsLongName(side));
  if (NameCodec::IsLongName(s)) FUZZ_CHECK(NameCodec::IsReserved(s));
}

void MakeCorpus(const std::string& dir) {
  const NameCodec& codec = Codec();
  const std::string names[] = {"a",
                               "hello.txt",
                               "Ünïcödé name",
                               std::string(170, 'm'),
                               std::string(200, 'n'),
                               std::string(255, 'z')};
  int i = 0;
  for (const std::string& n : names) {
    WriteSeed(dir, "name-" + std::to_string(i), *codec.Encrypt(FixedDirIv(), n));
    WriteSeed(dir, "plain-" + std::to_string(i), n);
    ++i;
  }
  WriteSeed(dir, "target-0", *codec.EncryptTarget("../some/where/else"));
  WriteSeed(dir, "target-1", *codec.EncryptTarget(std::string(600, 't')));
  const std::vector<uint8_t> value = {1, 2, 3, 0, 255};
  for (std::string_view attr : {"comment", "mime_type"}) {
    const std::string stored = *codec.XattrStoredName(attr);
    std::vector<uint8_t> seed(stored.begin(), stored.end());
    seed.push_back(0);
    const std::vector<uint8_t> sealed = *codec.SealXattr(stored, attr, value);
    seed.insert(seed.end(), sealed.begin(), sealed.end());
    WriteSeed(dir, "xattr-" + std::string(attr), seed);
  }
}

}  // namespace
}  // namespace sigilfs::fuzz

SIGILFS_FUZZ_SEEDS(sigilfs::fuzz::MakeCorpus)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sigilfs;
  const std::string_view s = fuzz::AsText(data, size);
  fuzz::CheckDecrypt(s);
  fuzz::CheckEncrypt(s);
  fuzz::CheckTarget(s);
  fuzz::CheckXattr(ByteSpan(data, size));
  fuzz::CheckStoredNameHelpers(s);
  return 0;
}
