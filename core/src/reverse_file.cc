// A reverse view's regular file: the header and each unit made from the plain file when read.
#include "reverse_file.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <list>
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
              std::unique_ptr<crypt::Aead> aead, const FileNonce& nonce,
              std::shared_ptr<const ReverseKeys> keys)
      : plain_(std::move(plain)),
        plain_size_(plain_size),
        aead_(std::move(aead)),
        codec_(*aead_, nonce),
        keys_(std::move(keys)),
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
  // The view's file changes only with its plain file, which no lock here holds still: its stamp
  // is its length, and a lock is granted at once (an exclusive one is for writers).
  Result<FileStamp> Stamp() override {
    return FileStamp{codec_.geometry().CipherSize(plain_size_)};
  }
  Status Lock(FileLock kind) override {
    return kind == FileLock::kExclusive ? ReadOnly() : Status::Ok();
  }

 private:
  // Units `first` to `last` into `out`, which starts at byte `start` of the units (relative to
  // the end of the header). The pages of the units the read covers whole are read in one call;
  // a unit it covers only in part (at most its first and its last) is a boundary unit.
  Status Units(uint64_t first, uint64_t last, uint64_t start, MutableByteSpan out) {
    const PageGeometry& g = codec_.geometry();
    auto unit_len = [&](uint64_t index) {
      return static_cast<size_t>(std::min<uint64_t>(kPageSize, plain_size_ - index * kPageSize)) +
             g.overhead();
    };
    const uint64_t end = start + out.size();
    // The units covered whole: [lo, hi_end), every one but a first or last covered in part.
    const bool first_whole = start == first * g.unit_size();
    const bool last_whole = end == last * g.unit_size() + unit_len(last);
    const uint64_t lo = first_whole ? first : first + 1;
    const uint64_t hi_end = last_whole ? last + 1 : last;
    std::vector<uint8_t> plain;
    if (lo < hi_end) {
      const uint64_t plain_start = lo * kPageSize;
      const uint64_t plain_end = std::min<uint64_t>(plain_size_, hi_end * kPageSize);
      plain.resize(plain_end - plain_start);
      if (Status s = ReadPlain(plain, plain_start); !s.ok()) {
        crypt::SecureWipe(plain);
        return s;
      }
    }
    std::vector<uint8_t> unit;
    Status result;
    size_t written = 0;
    for (uint64_t index = first; index <= last && result.ok(); ++index) {
      const uint64_t unit_start = index * g.unit_size();
      const size_t len = unit_len(index);
      const size_t skip = static_cast<size_t>(start > unit_start ? start - unit_start : 0);
      const size_t take = std::min(len - skip, out.size() - written);
      MutableByteSpan dest = out.subspan(written, take);
      if (index >= lo && index < hi_end) {
        const ByteSpan page(plain.data() + (index - lo) * kPageSize, len - g.overhead());
        result = Seal(index, page, dest);
      } else {
        unit.resize(len);
        result = BoundaryUnit(index, unit);
        if (result.ok()) std::memcpy(dest.data(), unit.data() + skip, take);
      }
      written += take;
    }
    crypt::SecureWipe(plain);
    return result;
  }

  // Reads plain bytes at `offset`, all of them: a file that became shorter since it was opened
  // fails the read.
  Status ReadPlain(MutableByteSpan buf, uint64_t offset) {
    auto got = plain_->ReadAt(buf, offset);
    if (!got.ok()) return got.status();
    if (*got != buf.size())
      return Status::FromErrno(EIO, "the plain file became shorter while it was read");
    return Status::Ok();
  }

  // Unit `index`, which a read covers only in part, into `unit`: the same bytes to every read
  // of this open file, so that two reads that each take a part of it (in any order, or at once)
  // give a whole unit even while its page changes. Sealed under the lock the first time, from
  // one read of its page, and kept (the last kKept of them).
  Status BoundaryUnit(uint64_t index, MutableByteSpan unit) {
    MutexLock lock(mu_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (it->first != index) continue;
      std::memcpy(unit.data(), it->second.data(), unit.size());
      kept_.splice(kept_.begin(), kept_, it);  // most recently used first
      return Status::Ok();
    }
    std::array<uint8_t, kPageSize> page;
    const size_t len = unit.size() - codec_.geometry().overhead();
    Status s = ReadPlain(MutableByteSpan(page.data(), len), index * kPageSize);
    if (s.ok()) s = Seal(index, ByteSpan(page.data(), len), unit);
    crypt::SecureWipe(page);
    if (!s.ok()) return s;
    kept_.emplace_front(index, std::vector<uint8_t>(unit.begin(), unit.end()));
    if (kept_.size() > kKept) kept_.pop_back();
    return Status::Ok();
  }

  Status Seal(uint64_t index, ByteSpan page, MutableByteSpan unit) const {
    const bool last = index + 1 == pages_;
    uint8_t nonce[32];
    const MutableByteSpan n(nonce, codec_.geometry().nonce_size());
    keys_->UnitNonce(codec_.file_nonce(), index, UnitKind::kDataPage, last, page, n);
    return codec_.SealUnder(n, index, UnitKind::kDataPage, last, page, unit);
  }

  const std::unique_ptr<BackingFile> plain_;
  const uint64_t plain_size_;
  const std::unique_ptr<crypt::Aead> aead_;
  const UnitCodec codec_;
  const std::shared_ptr<const ReverseKeys> keys_;
  const uint64_t pages_;
  std::array<uint8_t, kFileHeaderSize> header_{};
  // Boundary units sealed (index, ciphertext), most recently used first. Reads a few at a time
  // in flight (the kernel's read-ahead) share at most one each with their neighbours.
  static constexpr size_t kKept = 32;
  Mutex mu_;
  std::list<std::pair<uint64_t, std::vector<uint8_t>>> kept_ SIGILFS_GUARDED_BY(mu_);
};

}  // namespace

Result<std::unique_ptr<BackingFile>> NewReverseFile(std::unique_ptr<BackingFile> plain,
                                                    uint64_t plain_size, const FileNonce& nonce,
                                                    crypt::AeadAlgorithm cipher,
                                                    ByteSpan content_key,
                                                    std::shared_ptr<const ReverseKeys> keys) {
  SIGILFS_ASSIGN_OR_RETURN(crypt::SecureBytes key, DeriveFileKey(content_key, nonce));
  SIGILFS_ASSIGN_OR_RETURN(auto aead, crypt::Aead::Create(cipher, key.span()));
  return std::unique_ptr<BackingFile>(
      new ReverseFile(std::move(plain), plain_size, std::move(aead), nonce, std::move(keys)));
}

}  // namespace sigilfs::core
