// A reverse view's regular file: the header and each unit made from the plain file when read.
#include "reverse_file.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

#include "sigilfs/core/keys.h"
#include "sigilfs/crypt/aead.h"
#include "sigilfs/mutex.h"

namespace sigilfs::core {
namespace {

Status ReadOnly() { return Status::FromErrno(EROFS, "the encrypted view is read only"); }

class ReverseFile : public BackingFile {
 public:
  ReverseFile(std::unique_ptr<BackingFile> plain, uint64_t plain_size,
              std::unique_ptr<crypt::Aead> aead, const FileNonce& nonce, const ReverseKeys& keys)
      : plain_(std::move(plain)),
        plain_size_(plain_size),
        aead_(std::move(aead)),
        codec_(*aead_, nonce),
        keys_(keys),
        pages_(PageGeometry::PageCount(plain_size)) {
    EncodeFileHeader({.nonce = nonce}, header_);
  }

  Result<size_t> ReadAt(MutableByteSpan buf, uint64_t offset) override {
    const PageGeometry& g = codec_.geometry();
    const uint64_t cipher_size = g.CipherSize(plain_size_);
    if (offset >= cipher_size || buf.empty()) return size_t{0};
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), cipher_size - offset));
    size_t done = 0;
    if (offset < kFileHeaderSize) {
      done = std::min<size_t>(n, kFileHeaderSize - offset);
      std::memcpy(buf.data(), header_.data() + offset, done);
    }
    if (done == n) return n;
    const uint64_t start = offset + done - kFileHeaderSize;  // into the units
    const uint64_t end = offset + n - kFileHeaderSize;
    const uint64_t first = start / g.unit_size();
    const uint64_t last = (end - 1) / g.unit_size();
    SIGILFS_RETURN_IF_ERROR(Units(first, last, start, buf.subspan(done, n - done)));
    return n;
  }

  Result<uint64_t> Size() override { return codec_.geometry().CipherSize(plain_size_); }

  Result<uint64_t> Seek(uint64_t offset, bool data) override {
    const uint64_t size = codec_.geometry().CipherSize(plain_size_);
    if (offset >= size) return Status::FromErrno(ENXIO, "seek past the end");
    return data ? offset : size;
  }

  void WillNeed(uint64_t offset, uint64_t length) override {
    const PageGeometry& g = codec_.geometry();
    const uint64_t from = offset < kFileHeaderSize ? 0 : (offset - kFileHeaderSize) / g.unit_size();
    plain_->WillNeed(from * kPageSize, (length / g.unit_size() + 2) * kPageSize);
  }

  Status WriteAt(std::span<const ByteSpan>, uint64_t) override { return ReadOnly(); }
  Status Truncate(uint64_t) override { return ReadOnly(); }
  Status Allocate(uint64_t, uint64_t, bool) override { return ReadOnly(); }
  Status Sync(bool) override { return Status::Ok(); }

 private:
  // Units `first` to `last` into `out`, which starts at byte `start` of the units (relative to
  // the end of the header). The plain pages are read in one call; a unit the read ends inside
  // is kept for the next read, which then continues it with the same bytes.
  Status Units(uint64_t first, uint64_t last, uint64_t start, MutableByteSpan out) {
    const PageGeometry& g = codec_.geometry();
    std::vector<uint8_t> kept;
    uint64_t from = first;
    {
      MutexLock lock(mu_);
      if (kept_index_ == first) {
        kept = kept_unit_;
        ++from;
      }
    }
    std::vector<uint8_t> plain;
    if (from <= last) {
      const uint64_t plain_start = from * kPageSize;
      const uint64_t plain_end = std::min<uint64_t>(plain_size_, (last + 1) * kPageSize);
      plain.resize(plain_end - plain_start);
      auto got = plain_->ReadAt(plain, plain_start);
      if (!got.ok() || *got != plain.size()) {
        crypt::SecureWipe(plain);
        if (!got.ok()) return got.status();
        return Status::FromErrno(EIO, "the plain file became shorter while it was read");
      }
    }
    std::vector<uint8_t> unit;
    Status result;
    size_t written = 0;
    for (uint64_t index = first; index <= last && result.ok(); ++index) {
      const uint64_t unit_start = index * g.unit_size();
      const size_t plain_len =
          static_cast<size_t>(std::min<uint64_t>(kPageSize, plain_size_ - index * kPageSize));
      const size_t unit_len = plain_len + g.overhead();
      const size_t skip = static_cast<size_t>(start > unit_start ? start - unit_start : 0);
      const size_t take = std::min(unit_len - skip, out.size() - written);
      const bool whole = skip == 0 && take == unit_len;
      MutableByteSpan dest = out.subspan(written, take);
      if (index == first && !kept.empty()) {
        std::memcpy(dest.data(), kept.data() + skip, take);
      } else {
        unit.resize(unit_len);
        MutableByteSpan target = whole ? dest : MutableByteSpan(unit);
        const ByteSpan page(plain.data() + (index - from) * kPageSize, plain_len);
        result = Seal(index, page, target);
        if (result.ok() && !whole) {
          std::memcpy(dest.data(), unit.data() + skip, take);
          if (skip + take < unit_len) {  // the read ends inside this unit: keep it
            MutexLock lock(mu_);
            kept_index_ = index;
            kept_unit_ = unit;
          }
        }
      }
      written += take;
    }
    crypt::SecureWipe(plain);
    return result;
  }

  Status Seal(uint64_t index, ByteSpan page, MutableByteSpan unit) const {
    const bool last = index + 1 == pages_;
    uint8_t nonce[32];
    const MutableByteSpan n(nonce, codec_.geometry().nonce_size());
    keys_.UnitNonce(codec_.file_nonce(), index, UnitKind::kDataPage, last, page, n);
    return codec_.SealUnder(n, index, UnitKind::kDataPage, last, page, unit);
  }

  const std::unique_ptr<BackingFile> plain_;
  const uint64_t plain_size_;
  const std::unique_ptr<crypt::Aead> aead_;
  const UnitCodec codec_;
  const ReverseKeys& keys_;
  const uint64_t pages_;
  std::array<uint8_t, kFileHeaderSize> header_{};
  Mutex mu_;
  uint64_t kept_index_ SIGILFS_GUARDED_BY(mu_) = std::numeric_limits<uint64_t>::max();
  std::vector<uint8_t> kept_unit_ SIGILFS_GUARDED_BY(mu_);  // ciphertext: no wipe needed
};

}  // namespace

Result<std::unique_ptr<BackingFile>> NewReverseFile(std::unique_ptr<BackingFile> plain,
                                                    uint64_t plain_size, const FileNonce& nonce,
                                                    crypt::AeadAlgorithm cipher,
                                                    ByteSpan content_key, const ReverseKeys& keys) {
  SIGILFS_ASSIGN_OR_RETURN(crypt::SecureBytes key, DeriveFileKey(content_key, nonce));
  SIGILFS_ASSIGN_OR_RETURN(auto aead, crypt::Aead::Create(cipher, key.span()));
  return std::unique_ptr<BackingFile>(
      new ReverseFile(std::move(plain), plain_size, std::move(aead), nonce, keys));
}

}  // namespace sigilfs::core
