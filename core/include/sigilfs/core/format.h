// The cipher-file format: file header, unit (page) layout, associated data, size arithmetic.
// docs/format.md describes the same bytes; a change here is a format version change.
#pragma once

#include <array>
#include <cstdint>

#include "sigilfs/crypt/aead.h"
#include "sigilfs/crypt/bytes.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

inline constexpr uint32_t kPageSize = 4096;
inline constexpr uint16_t kFileFormatVersion = 1;
inline constexpr size_t kFileNonceSize = 16;
inline constexpr size_t kFileHeaderSize = 32;
inline constexpr std::array<uint8_t, 8> kFileMagic = {'S', 'I', 'G', 'I', 'L', 'F', 'S', 0};

using FileNonce = std::array<uint8_t, kFileNonceSize>;

// Header flag bits. Unknown bits make a header unreadable (a newer format feature).
inline constexpr uint16_t kFileFlagSealed = 0x0001;  // fs-verity tree and record follow the data
// With kFileFlagSealed: the data units' nonces are pinned after the record (docs/format.md,
// "Sealed files"). Only ever set together with kFileFlagSealed; older builds refuse the file as
// a newer format instead of taking its longer layout for damage.
inline constexpr uint16_t kFileFlagPinned = 0x0002;
// With kFileFlagSealed: the data's last page was sealed again when the file was sealed, as a
// UnitKind::kSealedLastPage unit, so the file can no longer pass for an unsealed one
// (docs/format.md, "Binding the seal"). Only with kFileFlagSealed, and only when the file has data;
// older builds refuse the file as a newer format.
inline constexpr uint16_t kFileFlagBound = 0x0004;
inline constexpr uint16_t kFileFlagsSeal = kFileFlagSealed | kFileFlagPinned | kFileFlagBound;
inline constexpr uint16_t kKnownFileFlags = kFileFlagsSeal;

struct FileHeader {
  uint16_t version = kFileFormatVersion;
  uint16_t flags = 0;
  FileNonce nonce{};
};

void EncodeFileHeader(const FileHeader& header, std::span<uint8_t, kFileHeaderSize> out);
// kCorrupt for a bad magic or a short header, kNotSupported for an unknown version or flag.
Result<FileHeader> DecodeFileHeader(ByteSpan in);

// What a sealed unit holds; bound into its associated data so units cannot change role.
enum class UnitKind : uint8_t {
  kDataPage = 1,
  kTreeBlock = 2,     // fs-verity Merkle tree block
  kSealedRecord = 3,  // fs-verity descriptor record
  kPinBlock = 4,      // nonces of a sealed file's data units
  // The last data page of a file sealed with kFileFlagBound, sealed again (new nonce) as the
  // seal's commit point: the cipher file cannot be opened as an unsealed file while it is there.
  kSealedLastPage = 5,
};

inline constexpr size_t kUnitAdSize = kFileNonceSize + 8 + 1 + 1;
// file nonce || le64 unit index || u8 kind || u8 last-unit flag.
std::array<uint8_t, kUnitAdSize> UnitAssociatedData(const FileNonce& nonce, uint64_t index,
                                                    UnitKind kind, bool last);

// Byte layout of a cipher file for one AEAD: header, then units of nonce || ciphertext || tag.
// Data page i (plaintext bytes [i*4096, (i+1)*4096)) is at UnitOffset(i); only the last page
// may be short. A zero-length cipher file is an empty plaintext file with no header yet.
class PageGeometry {
 public:
  explicit PageGeometry(size_t nonce_size) : nonce_size_(nonce_size) {}

  size_t nonce_size() const { return nonce_size_; }
  size_t overhead() const { return nonce_size_ + crypt::kAeadTagSize; }
  size_t unit_size() const { return kPageSize + overhead(); }
  uint64_t UnitOffset(uint64_t index) const { return kFileHeaderSize + index * unit_size(); }
  // Cipher-file size of a plaintext of `plain_size` bytes (0 stays 0: no header is needed).
  uint64_t CipherSize(uint64_t plain_size) const;
  // Plaintext size of a cipher file of `cipher_size` bytes; kCorrupt for a torn header
  // (1 to 31 bytes), the only lengths without one. A torn tail (TornTail) counts as a last page
  // of one byte, which no read can open; CipherSize(PlainSize(L)) == L unless the tail is torn.
  Result<uint64_t> PlainSize(uint64_t cipher_size) const;
  // True if the last unit is too short to hold a nonce and a tag (1 to overhead() bytes past
  // the last whole unit): what a crash leaves when it stops a write that grows the file.
  bool TornTail(uint64_t cipher_size) const;
  // Number of data pages of a plaintext size.
  static uint64_t PageCount(uint64_t plain_size) {
    return (plain_size + kPageSize - 1) / kPageSize;
  }

 private:
  size_t nonce_size_;
};

// Seals and opens units of one file: its AEAD (keyed with the per-file key) and its nonce.
// Thread-safety: safe for concurrent access (it only reads its members).
class UnitCodec {
 public:
  UnitCodec(const crypt::Aead& aead, const FileNonce& nonce)
      : aead_(aead), nonce_(nonce), geometry_(aead.nonce_size()) {}

  const PageGeometry& geometry() const { return geometry_; }
  const FileNonce& file_nonce() const { return nonce_; }

  // Encrypts `plaintext` (at most kPageSize bytes) into `unit`, which must be exactly
  // plaintext.size() + overhead() bytes, under a fresh random nonce.
  Status Seal(uint64_t index, UnitKind kind, bool last, ByteSpan plaintext,
              MutableByteSpan unit) const;
  // Seal under `nonce` (nonce_size() bytes) instead of a random one: reverse mode's synthetic
  // nonces, derived from the unit's place and plaintext, so that the same page at the same place
  // seals to the same bytes (and a nonce repeats only with its plaintext). Readers cannot tell.
  Status SealUnder(ByteSpan nonce, uint64_t index, UnitKind kind, bool last, ByteSpan plaintext,
                   MutableByteSpan unit) const;
  // Verifies and decrypts `unit` into `plaintext` (unit.size() - overhead() bytes).
  // kAuthFailed if the unit was changed, moved, or belongs to another file, kind or position.
  Status Open(uint64_t index, UnitKind kind, bool last, ByteSpan unit,
              MutableByteSpan plaintext) const;

 private:
  const crypt::Aead& aead_;
  FileNonce nonce_;
  PageGeometry geometry_;
};

// True if every byte is zero: such a unit is a hole (sparse region), not ciphertext.
bool IsAllZero(ByteSpan data);

}  // namespace sigilfs::core
