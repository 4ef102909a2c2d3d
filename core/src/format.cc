// Encoding of the cipher-file header, unit associated data and size arithmetic.
#include "sigilfs/core/format.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "endian.h"
#include "sigilfs/crypt/random.h"

namespace sigilfs::core {

void EncodeFileHeader(const FileHeader& header, std::span<uint8_t, kFileHeaderSize> out) {
  std::memset(out.data(), 0, out.size());
  std::memcpy(out.data(), kFileMagic.data(), kFileMagic.size());
  StoreLe16(out.data() + 8, header.version);
  StoreLe16(out.data() + 10, header.flags);
  // Bytes 12..15 are reserved and zero.
  std::memcpy(out.data() + 16, header.nonce.data(), kFileNonceSize);
}

Result<FileHeader> DecodeFileHeader(ByteSpan in) {
  if (in.size() < kFileHeaderSize) return Status(Code::kCorrupt, "file header truncated");
  if (std::memcmp(in.data(), kFileMagic.data(), kFileMagic.size()) != 0)
    return Status(Code::kCorrupt, "bad file magic");
  FileHeader h;
  h.version = LoadLe16(in.data() + 8);
  h.flags = LoadLe16(in.data() + 10);
  if (h.version != kFileFormatVersion)
    return Status(Code::kNotSupported, "file format version " + std::to_string(h.version) +
                                           " (this build reads version " +
                                           std::to_string(kFileFormatVersion) + ")");
  if ((h.flags & ~kKnownFileFlags) != 0)
    return Status(Code::kNotSupported, "unknown file flags " + std::to_string(h.flags));
  if ((h.flags & kFileFlagsSeal) != 0 && (h.flags & kFileFlagSealed) == 0)
    return Status(Code::kCorrupt, "file flags: pinned nonces or a bound last page without a seal");
  if (LoadLe32(in.data() + 12) != 0) return Status(Code::kCorrupt, "reserved header bytes set");
  std::memcpy(h.nonce.data(), in.data() + 16, kFileNonceSize);
  return h;
}

std::array<uint8_t, kUnitAdSize> UnitAssociatedData(const FileNonce& nonce, uint64_t index,
                                                    UnitKind kind, bool last) {
  std::array<uint8_t, kUnitAdSize> ad;
  std::memcpy(ad.data(), nonce.data(), kFileNonceSize);
  StoreLe64(ad.data() + kFileNonceSize, index);
  ad[kFileNonceSize + 8] = static_cast<uint8_t>(kind);
  ad[kFileNonceSize + 9] = last ? 1 : 0;
  return ad;
}

uint64_t PageGeometry::CipherSize(uint64_t plain_size) const {
  if (plain_size == 0) return 0;
  const uint64_t full = plain_size / kPageSize;
  const uint64_t tail = plain_size % kPageSize;
  return kFileHeaderSize + full * unit_size() + (tail == 0 ? 0 : tail + overhead());
}

Result<uint64_t> PageGeometry::PlainSize(uint64_t cipher_size) const {
  if (cipher_size == 0) return uint64_t{0};
  if (cipher_size < kFileHeaderSize) return Status(Code::kCorrupt, "file header truncated");
  const uint64_t body = cipher_size - kFileHeaderSize;
  const uint64_t full = body / unit_size();
  const uint64_t rest = body % unit_size();
  if (rest == 0) return full * kPageSize;
  // A remainder too short for a nonce and a tag is a unit torn by a crash while the file grew.
  // It counts as a last page of one byte that cannot be opened: the whole units before it read
  // as usual, and reads touching it fail (see TornTail).
  if (rest <= overhead()) return full * kPageSize + 1;
  return full * kPageSize + (rest - overhead());
}

bool PageGeometry::TornTail(uint64_t cipher_size) const {
  if (cipher_size <= kFileHeaderSize) return false;
  const uint64_t rest = (cipher_size - kFileHeaderSize) % unit_size();
  return rest != 0 && rest <= overhead();
}

Status UnitCodec::Seal(uint64_t index, UnitKind kind, bool last, ByteSpan plaintext,
                       MutableByteSpan unit) const {
  const size_t n = geometry_.nonce_size();
  if (plaintext.size() > kPageSize || unit.size() != plaintext.size() + geometry_.overhead())
    return Status(Code::kInvalidArgument, "unit buffer size mismatch");
  crypt::RandomBytes(unit.first(n));
  const auto ad = UnitAssociatedData(nonce_, index, kind, last);
  return aead_.Seal(unit.first(n), ad, plaintext, unit.subspan(n, plaintext.size()),
                    unit.last(crypt::kAeadTagSize));
}

Status UnitCodec::SealUnder(ByteSpan nonce, uint64_t index, UnitKind kind, bool last,
                            ByteSpan plaintext, MutableByteSpan unit) const {
  const size_t n = geometry_.nonce_size();
  if (nonce.size() != n || plaintext.size() > kPageSize ||
      unit.size() != plaintext.size() + geometry_.overhead())
    return Status(Code::kInvalidArgument, "unit buffer or nonce size mismatch");
  std::copy(nonce.begin(), nonce.end(), unit.begin());
  const auto ad = UnitAssociatedData(nonce_, index, kind, last);
  return aead_.Seal(unit.first(n), ad, plaintext, unit.subspan(n, plaintext.size()),
                    unit.last(crypt::kAeadTagSize));
}

Status UnitCodec::Open(uint64_t index, UnitKind kind, bool last, ByteSpan unit,
                       MutableByteSpan plaintext) const {
  const size_t n = geometry_.nonce_size();
  if (unit.size() < geometry_.overhead() || plaintext.size() != unit.size() - geometry_.overhead())
    return Status(Code::kInvalidArgument, "unit buffer size mismatch");
  const auto ad = UnitAssociatedData(nonce_, index, kind, last);
  return aead_.Open(unit.first(n), ad, unit.subspan(n, plaintext.size()),
                    unit.last(crypt::kAeadTagSize), plaintext);
}

bool IsAllZero(ByteSpan data) {
  // Word-at-a-time OR over blocks of 64 bytes (the compiler vectorizes each), stopping at the
  // first block that is not zero. Ciphertext, the common input, starts with a random nonce, so
  // it is told from a hole by its first block instead of a pass over the whole unit (that pass
  // was 5% of the daemon's time reading a sealed file).
  constexpr size_t kBlock = 64;
  size_t i = 0;
  for (; i + kBlock <= data.size(); i += kBlock) {
    uint64_t acc = 0;
    for (size_t j = 0; j < kBlock; j += 8) {
      uint64_t w;
      std::memcpy(&w, data.data() + i + j, 8);
      acc |= w;
    }
    if (acc != 0) return false;
  }
  uint8_t rest = 0;
  for (; i < data.size(); ++i) rest |= data[i];
  return rest == 0;
}

}  // namespace sigilfs::core
