// Fuzzes core::DecodeFileHeader (canonical re-encode) and PageGeometry size arithmetic.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "fuzz_util.h"
#include "sigilfs/core/format.h"

namespace sigilfs::fuzz {
namespace {

void CheckSizes(const core::PageGeometry& g, uint64_t n) {
  // n as a cipher-file size: when it maps to a plaintext size, that maps back to n (except the
  // header-only file, which holds no data and reads as empty, and a torn tail, which counts as
  // a one-byte last page right after its whole units). Only a torn header maps to none.
  auto plain = g.PlainSize(n);
  if (plain.ok()) {
    FUZZ_CHECK(*plain <= n);
    if (n == core::kFileHeaderSize) {
      FUZZ_CHECK(*plain == 0);
    } else if (g.TornTail(n)) {
      FUZZ_CHECK(*plain % core::kPageSize == 1);
      // Unit offsets wrap past 2^64; a file can only be as long as off_t allows.
      if (n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        FUZZ_CHECK(g.UnitOffset(core::PageGeometry::PageCount(*plain)) > n);
        FUZZ_CHECK(g.UnitOffset(core::PageGeometry::PageCount(*plain) - 1) < n);
      }
    } else {
      FUZZ_CHECK(g.CipherSize(*plain) == n);
    }
  } else {
    FUZZ_CHECK(plain.status().code() == Code::kCorrupt);
    FUZZ_CHECK(n > 0 && n < core::kFileHeaderSize);
  }
  // n as a plaintext size of a file that can exist (off_t is signed): its cipher size maps back.
  if (n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    const uint64_t cipher = g.CipherSize(n);
    FUZZ_CHECK(cipher >= n);
    auto back = g.PlainSize(cipher);
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(*back == n);
    if (n > 0) FUZZ_CHECK(g.UnitOffset(core::PageGeometry::PageCount(n) - 1) < cipher);
  }
}

void MakeCorpus(const std::string& dir) {
  using crypt::AeadAlgorithm;
  const std::vector<uint8_t> small(100, 'x');
  const std::vector<uint8_t> page(core::kPageSize, 'y');
  auto plain = MakeCipherFile(AeadAlgorithm::kAes256Gcm, small);
  const std::vector<uint8_t> salt = {'s', 'a', 'l', 't'};
  auto sealed = MakeCipherFile(AeadAlgorithm::kXChaCha20Poly1305, {}, /*seal=*/true, salt);
  auto full = MakeCipherFile(AeadAlgorithm::kAes256Gcm, page);
  WriteSeed(dir, "header-plain", ByteSpan(plain).first(core::kFileHeaderSize));
  WriteSeed(dir, "header-sealed", ByteSpan(sealed).first(core::kFileHeaderSize));
  WriteSeed(dir, "file-gcm-100", plain);
  WriteSeed(dir, "file-gcm-4096", full);
  // First 8 bytes as sizes: one full GCM unit, one short XChaCha unit, an empty header.
  std::array<uint8_t, 8> size{};
  const uint64_t sizes[] = {core::kFileHeaderSize + core::kPageSize + 28,
                            core::kFileHeaderSize + 100 + 40, core::kFileHeaderSize};
  int i = 0;
  for (uint64_t s : sizes) {
    for (size_t b = 0; b < 8; ++b) size[b] = static_cast<uint8_t>(s >> (8 * b));
    WriteSeed(dir, "size-" + std::to_string(i++), size);
  }
}

}  // namespace
}  // namespace sigilfs::fuzz

SIGILFS_FUZZ_SEEDS(sigilfs::fuzz::MakeCorpus)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sigilfs;
  const ByteSpan in(data, size);
  auto header = core::DecodeFileHeader(in);
  if (header.ok()) {
    // Canonical: every one of the 32 bytes is determined by the decoded header.
    FUZZ_CHECK(size >= core::kFileHeaderSize);
    FUZZ_CHECK(header->version == core::kFileFormatVersion);
    FUZZ_CHECK((header->flags & ~core::kKnownFileFlags) == 0);
    std::array<uint8_t, core::kFileHeaderSize> out;
    core::EncodeFileHeader(*header, out);
    FUZZ_CHECK(std::equal(out.begin(), out.end(), in.begin()));
  } else {
    FUZZ_CHECK(header.status().code() == Code::kCorrupt ||
               header.status().code() == Code::kNotSupported);
    if (size < core::kFileHeaderSize) FUZZ_CHECK(header.status().code() == Code::kCorrupt);
  }

  if (size >= 8) {
    const uint64_t n = fuzz::LoadLe64(data);
    for (auto alg : {crypt::AeadAlgorithm::kAes256Gcm, crypt::AeadAlgorithm::kXChaCha20Poly1305})
      fuzz::CheckSizes(core::PageGeometry(crypt::AeadNonceSize(alg)), n);
  }
  return 0;
}
