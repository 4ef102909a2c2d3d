// Source implementations: memory, iovec, descriptor, and the fault injector for tests.
#include "sigilfs/core/source.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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

Result<size_t> FdSource::Read(MutableByteSpan dst) {
  size_t done = 0;
  if (!pushed_back_.empty()) {
    done = std::min(dst.size(), pushed_back_.size());
    if (done > 0) std::memcpy(dst.data(), pushed_back_.data(), done);
    pushed_back_.erase(pushed_back_.begin(), pushed_back_.begin() + static_cast<long>(done));
  }
  while (done < dst.size()) {
    ssize_t n = ::read(fd_, dst.data() + done, dst.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (done > 0) break;  // report what we have; the error comes back on the next call
      return Status::FromErrno(errno, "read write data");
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
    break;  // one read per call: a pipe delivers what it has, short
  }
  last_.assign(dst.data(), dst.data() + done);
  return done;
}

void FdSource::Unread(size_t n) {
  pushed_back_.insert(pushed_back_.begin(), last_.end() - static_cast<long>(n), last_.end());
  last_.resize(last_.size() - n);
}

Result<size_t> FaultySource::Read(MutableByteSpan dst) {
  size_t limit = dst.size();
  if (!limits_.empty()) limit = std::min(limit, limits_[std::min(calls_, limits_.size() - 1)]);
  ++calls_;
  return inner_.Read(dst.first(limit));
}

}  // namespace sigilfs::core
