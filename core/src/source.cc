// Source implementations: memory, iovec, descriptor, and the fault injector for tests.
#include "sigilfs/core/source.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "sigilfs/crypt/secure_bytes.h"

namespace sigilfs::core {

Result<size_t> MemorySource::Read(MutableByteSpan dst) {
  const size_t n = std::min(dst.size(), data_.size() - pos_);
  if (n > 0) std::memcpy(dst.data(), data_.data() + pos_, n);
  pos_ += n;
  return n;
}

Result<size_t> IovecSource::Read(MutableByteSpan dst) {
  size_t done = 0;
  while (done < dst.size() && seg_ < iov_.size()) {
    const iovec& v = iov_[seg_];
    const size_t n = std::min(dst.size() - done, v.iov_len - off_);
    if (n > 0) std::memcpy(dst.data() + done, static_cast<const uint8_t*>(v.iov_base) + off_, n);
    done += n;
    off_ += n;
    if (off_ == v.iov_len) {
      ++seg_;
      off_ = 0;
    }
  }
  return done;
}

void IovecSource::Unread(size_t n) {
  while (n > 0) {
    if (off_ == 0) {
      --seg_;
      off_ = iov_[seg_].iov_len;
    }
    const size_t back = std::min(n, off_);
    off_ -= back;
    n -= back;
  }
}

ByteSpan IovecSource::Peek(size_t max) {
  if (seg_ >= iov_.size()) return {};
  const iovec& v = iov_[seg_];
  return {static_cast<const uint8_t*>(v.iov_base) + off_, std::min(max, v.iov_len - off_)};
}

void IovecSource::Consume(size_t n) {
  off_ += n;
  if (seg_ < iov_.size() && off_ == iov_[seg_].iov_len) {
    ++seg_;
    off_ = 0;
  }
}

StepSource::StepSource(int fd, size_t step) : fd_(fd), buffer_(step) {}

StepSource::StepSource(BackingFile& file, size_t step) : file_(&file), buffer_(step) {}

StepSource::~StepSource() { crypt::SecureWipe(buffer_); }

Result<size_t> StepSource::Fill() {
  size_t got = 0;
  while (file_ != nullptr && got < buffer_.size()) {
    SIGILFS_ASSIGN_OR_RETURN(size_t n,
                             file_->ReadAt(MutableByteSpan(buffer_).subspan(got), offset_));
    if (n == 0) break;
    got += n;
    offset_ += n;
  }
  while (file_ == nullptr && got < buffer_.size()) {
    const ssize_t n = ::read(fd_, buffer_.data() + got, buffer_.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "read");
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  pos_ = 0;
  end_ = got;
  return got;
}

Result<size_t> StepSource::Read(MutableByteSpan dst) {
  const size_t n = std::min(dst.size(), end_ - pos_);
  if (n > 0) std::memcpy(dst.data(), buffer_.data() + pos_, n);
  pos_ += n;
  return n;
}

ByteSpan StepSource::Peek(size_t max) {
  return ByteSpan(buffer_).subspan(pos_, std::min(max, end_ - pos_));
}

Result<size_t> FaultySource::Read(MutableByteSpan dst) {
  size_t limit = dst.size();
  if (!limits_.empty()) limit = std::min(limit, limits_[std::min(calls_, limits_.size() - 1)]);
  ++calls_;
  return inner_.Read(dst.first(limit));
}

}  // namespace sigilfs::core
