// Fuzzes UnitCodec::Open (both AEADs): binds index, kind and last flag; seal/open round-trips.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "sigilfs/core/format.h"

namespace sigilfs::fuzz {
namespace {

using crypt::AeadAlgorithm;

// Input layout: le64 unit index, u8 kind, u8 flags (bit 0: last unit), then the unit.
constexpr size_t kPrefixSize = 10;

struct Codecs {
  std::unique_ptr<crypt::Aead> gcm;
  std::unique_ptr<crypt::Aead> xchacha;
  std::unique_ptr<core::UnitCodec> gcm_codec;
  std::unique_ptr<core::UnitCodec> xchacha_codec;
};

const Codecs& GetCodecs() {
  static const Codecs* codecs = [] {
    auto* c = new Codecs;
    const auto key = ContentKey();
    c->gcm = crypt::Aead::Create(AeadAlgorithm::kAes256Gcm, key).value();
    c->xchacha = crypt::Aead::Create(AeadAlgorithm::kXChaCha20Poly1305, key).value();
    c->gcm_codec = std::make_unique<core::UnitCodec>(*c->gcm, FixedNonce());
    c->xchacha_codec = std::make_unique<core::UnitCodec>(*c->xchacha, FixedNonce());
    return c;
  }();
  return *codecs;
}

// True if `unit` opens under (index, kind, last); checks that it opens under nothing else.
bool OpensOnlyAs(const core::UnitCodec& codec, uint64_t index, core::UnitKind kind, bool last,
                 ByteSpan unit) {
  const size_t overhead = codec.geometry().overhead();
  if (unit.size() < overhead) {
    std::vector<uint8_t> plain(0);
    FUZZ_CHECK(codec.Open(index, kind, last, unit, plain).code() == Code::kInvalidArgument);
    return false;
  }
  std::vector<uint8_t> plain(unit.size() - overhead);
  const Status s = codec.Open(index, kind, last, unit, plain);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == Code::kAuthFailed);
    return false;
  }
  // The associated data binds position, role and the last-unit flag.
  auto fails = [&](uint64_t i, core::UnitKind k, bool l, ByteSpan u) {
    std::vector<uint8_t> p(plain.size());
    return codec.Open(i, k, l, u, p).code() == Code::kAuthFailed;
  };
  FUZZ_CHECK(fails(index + 1, kind, last, unit));
  FUZZ_CHECK(fails(index ^ (uint64_t{1} << 63), kind, last, unit));
  FUZZ_CHECK(fails(index, static_cast<core::UnitKind>(static_cast<uint8_t>(kind) ^ 1), last, unit));
  FUZZ_CHECK(fails(index, kind, !last, unit));
  std::vector<uint8_t> flipped(unit.begin(), unit.end());
  flipped[flipped.size() / 2] ^= 0x01;
  FUZZ_CHECK(fails(index, kind, last, flipped));
  // A plaintext buffer of the wrong size is refused before any decryption.
  std::vector<uint8_t> wrong(plain.size() + 1);
  FUZZ_CHECK(codec.Open(index, kind, last, unit, wrong).code() == Code::kInvalidArgument);
  return true;
}

void RoundTrip(const core::UnitCodec& codec, uint64_t index, core::UnitKind kind, bool last,
               ByteSpan plain) {
  plain = plain.first(std::min<size_t>(plain.size(), core::kPageSize));
  std::vector<uint8_t> unit(plain.size() + codec.geometry().overhead());
  FUZZ_CHECK(codec.Seal(index, kind, last, plain, unit).ok());
  FUZZ_CHECK(OpensOnlyAs(codec, index, kind, last, unit));
  std::vector<uint8_t> out(plain.size());
  FUZZ_CHECK(codec.Open(index, kind, last, unit, out).ok());
  FUZZ_CHECK(std::equal(out.begin(), out.end(), plain.begin(), plain.end()));
  // Units of the wrong size are refused, not overrun.
  std::vector<uint8_t> small(unit.size() - 1);
  FUZZ_CHECK(codec.Seal(index, kind, last, plain, small).code() == Code::kInvalidArgument);
}

void MakeCorpus(const std::string& dir) {
  struct Seed {
    uint64_t index;
    core::UnitKind kind;
    bool last;
    size_t size;
  };
  const Seed seeds[] = {{0, core::UnitKind::kDataPage, true, 5},
                        {7, core::UnitKind::kDataPage, false, core::kPageSize},
                        {2, core::UnitKind::kTreeBlock, true, 300},
                        {0, core::UnitKind::kSealedRecord, true, 64}};
  for (auto alg : {AeadAlgorithm::kAes256Gcm, AeadAlgorithm::kXChaCha20Poly1305}) {
    const core::UnitCodec& codec =
        alg == AeadAlgorithm::kAes256Gcm ? *GetCodecs().gcm_codec : *GetCodecs().xchacha_codec;
    int n = 0;
    for (const Seed& s : seeds) {
      std::vector<uint8_t> plain(s.size);
      for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>('a' + i % 26);
      std::vector<uint8_t> input(kPrefixSize + s.size + codec.geometry().overhead());
      for (size_t b = 0; b < 8; ++b) input[b] = static_cast<uint8_t>(s.index >> (8 * b));
      input[8] = static_cast<uint8_t>(s.kind);
      input[9] = s.last ? 1 : 0;
      FUZZ_CHECK(
          codec.Seal(s.index, s.kind, s.last, plain, MutableByteSpan(input).subspan(10)).ok());
      WriteSeed(dir, std::string(crypt::AeadAlgorithmName(alg)) + "-" + std::to_string(n++), input);
    }
  }
}

}  // namespace
}  // namespace sigilfs::fuzz

SIGILFS_FUZZ_SEEDS(sigilfs::fuzz::MakeCorpus)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sigilfs;
  if (size < fuzz::kPrefixSize) return 0;
  const uint64_t index = fuzz::LoadLe64(data);
  const auto kind = static_cast<core::UnitKind>(data[8]);
  const bool last = (data[9] & 1) != 0;
  const ByteSpan unit(data + fuzz::kPrefixSize, size - fuzz::kPrefixSize);
  const fuzz::Codecs& codecs = fuzz::GetCodecs();
  for (const core::UnitCodec* codec : {codecs.gcm_codec.get(), codecs.xchacha_codec.get()}) {
    fuzz::OpensOnlyAs(*codec, index, kind, last, unit);
    fuzz::RoundTrip(*codec, index, kind, last, unit);
  }
  return 0;
}
