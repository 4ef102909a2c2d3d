// A reverse view's regular file: the header and each unit made from the plain file when read.
#include "reverse_file.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <utility>
#include <vector>

#include "sigilfs/core/keys.h"
#include "sigilfs/crypt/aead.h"
#include "sigilfs/mutex.h"

namespace sigilfs::core {

class ReverseKeptUnits {
 public:
  // The kept units of one version of a file.
  class Units {
   public:
    // Bytes [skip, skip + out.size()) of unit `index` into `out`, if it is kept.
    bool Take(uint64_t index, size_t skip, MutableByteSpan out) SIGILFS_EXCLUDES(mu_) {
      MutexLock lock(mu_);
      auto it = Find(index);
      if (it == units_.end()) return false;
      TakeFrom(it, skip, out);
      return true;
    }

    // Keeps `sealed` as unit `index`, then takes from it as Take does. Two reads that sealed the
    // unit at once (from two versions of its page, maybe) both take the one kept first.
    void KeepAndTake(uint64_t index, ByteSpan sealed, size_t skip, MutableByteSpan out)
        SIGILFS_EXCLUDES(mu_) {
      MutexLock lock(mu_);
      if (auto it = Find(index); it != units_.end()) return TakeFrom(it, skip, out);
      units_.push_front({index, std::vector<uint8_t>(sealed.begin(), sealed.end()),
                         std::vector<bool>(sealed.size()), sealed.size()});
      TakeFrom(units_.begin(), skip, out);
      if (units_.size() <= kKept) return;
      // A unit whose every byte was taken goes first; one that a read took a part of waits for
      // the read of the rest, which may come much later (the stream before it, in a copier
      // with several), unless all of them are such.
      auto victim = std::prev(units_.end());
      for (auto it = units_.rbegin(); it != units_.rend(); ++it) {
        if (it->untaken != 0) continue;
        victim = std::prev(it.base());
        break;
      }
      units_.erase(victim);
    }

   private:
    struct Unit {
      uint64_t index;
      std::vector<uint8_t> bytes;
      std::vector<bool> taken;  // by a read, since the unit was kept
      size_t untaken;
    };

    std::list<Unit>::iterator Find(uint64_t index) SIGILFS_REQUIRES(mu_) {
      return std::find_if(units_.begin(), units_.end(),
                          [index](const Unit& u) { return u.index == index; });
    }

    // Bytes of `it` into `out`, as Take.
    void TakeFrom(std::list<Unit>::iterator it, size_t skip, MutableByteSpan out)
        SIGILFS_REQUIRES(mu_) {
      std::memcpy(out.data(), it->bytes.data() + skip, out.size());
      for (size_t i = skip; i < skip + out.size(); ++i) {
        if (it->taken[i]) continue;
        it->taken[i] = true;
        --it->untaken;
      }
      units_.splice(units_.begin(), units_, it);  // most recently used first
    }

    // Reads a few at a time in flight (the kernel's read-ahead) per open, and a few opens (a
    // copier's streams) share at most one unit each with their neighbours: 64 units (about
    // 260 KiB) leave room for many of them.
    static constexpr size_t kKept = 64;
    Mutex mu_;
    std::list<Unit> units_ SIGILFS_GUARDED_BY(mu_);  // most recently used first
  };

  // The kept units of the version of a file with header nonce `nonce` and `size` plain bytes:
  // those of the opens of it still open, else new ones.
  static std::shared_ptr<Units> Of(const std::shared_ptr<ReverseKeptUnits>& all,
                                   const FileNonce& nonce, uint64_t size) {
    const Version version{nonce, size};
    MutexLock lock(all->mu_);
    std::weak_ptr<Units>& slot = all->versions_[version];
    if (std::shared_ptr<Units> open = slot.lock()) return open;
    // The last open's close forgets the version, unless a new open of it came in between.
    std::shared_ptr<Units> made(new Units, [all, version](Units* units) {
      {
        MutexLock forget(all->mu_);
        auto it = all->versions_.find(version);
        if (it != all->versions_.end() && it->second.expired()) all->versions_.erase(it);
      }
      delete units;
    });
    slot = made;
    return made;
  }

 private:
  // What fixes every unit's key, place, length and last-unit flag.
  using Version = std::pair<FileNonce, uint64_t>;
  Mutex mu_;
  std::map<Version, std::weak_ptr<Units>> versions_ SIGILFS_GUARDED_BY(mu_);
};

std::shared_ptr<ReverseKeptUnits> NewReverseKeptUnits() {
  return std::make_shared<ReverseKeptUnits>();
}

namespace {

Status ReadOnly() { return Status::FromErrno(EROFS, "the encrypted view is read only"); }

class ReverseFile : public BackingFile {
 public:
  ReverseFile(std::unique_ptr<BackingFile> plain, uint64_t plain_size,
              std::unique_ptr<crypt::Aead> aead, const FileNonce& nonce,
              std::shared_ptr<const ReverseKeys> keys,
              std::shared_ptr<ReverseKeptUnits::Units> kept)
      : plain_(std::move(plain)),
        plain_size_(plain_size),
        aead_(std::move(aead)),
        codec_(*aead_, nonce),
        keys_(std::move(keys)),
        pages_(PageGeometry::PageCount(plain_size)),
        kept_(std::move(kept)) {
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
      if (kept_->Take(index, skip, dest)) {
        // A unit another read took a part of: the same bytes, though its page may have changed.
        written += take;
        continue;
      }
      if (index >= lo && index < hi_end) {
        const ByteSpan page(plain.data() + (index - lo) * kPageSize, len - g.overhead());
        result = Seal(index, page, dest);
      } else {
        unit.resize(len);
        result = SealFromItsPage(index, unit);
        if (result.ok()) kept_->KeepAndTake(index, unit, skip, dest);
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

  // Unit `index` into `unit`, sealed from one read of its page: a unit a read covers only in
  // part, which is then kept (ReverseKeptUnits), so that the reads of its other parts, by this
  // open or another, in any order or at once, give a whole unit even while its page changes.
  Status SealFromItsPage(uint64_t index, MutableByteSpan unit) {
    std::array<uint8_t, kPageSize> page;
    const size_t len = unit.size() - codec_.geometry().overhead();
    Status s = ReadPlain(MutableByteSpan(page.data(), len), index * kPageSize);
    if (s.ok()) s = Seal(index, ByteSpan(page.data(), len), unit);
    crypt::SecureWipe(page);
    return s;
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
  const std::shared_ptr<ReverseKeptUnits::Units> kept_;  // this version's, shared by its opens
  std::array<uint8_t, kFileHeaderSize> header_{};
};

}  // namespace

Result<std::unique_ptr<BackingFile>> NewReverseFile(std::unique_ptr<BackingFile> plain,
                                                    uint64_t plain_size, const FileNonce& nonce,
                                                    crypt::AeadAlgorithm cipher,
                                                    ByteSpan content_key,
                                                    std::shared_ptr<const ReverseKeys> keys,
                                                    const std::shared_ptr<ReverseKeptUnits>& kept) {
  SIGILFS_ASSIGN_OR_RETURN(crypt::SecureBytes key, DeriveFileKey(content_key, nonce));
  SIGILFS_ASSIGN_OR_RETURN(auto aead, crypt::Aead::Create(cipher, key.span()));
  return std::unique_ptr<BackingFile>(
      new ReverseFile(std::move(plain), plain_size, std::move(aead), nonce, std::move(keys),
                      ReverseKeptUnits::Of(kept, nonce, plain_size)));
}

}  // namespace sigilfs::core
