// SecureBytes over sodium_malloc: guarded, locked, undumpable key memory.
#include "sigilfs/crypt/secure_bytes.h"

#include <openssl/crypto.h>
#include <sodium.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "sodium_init.h"

namespace sigilfs::crypt {

SecureBytes::SecureBytes(size_t size) : size_(size), capacity_(size) {
  if (size == 0) return;
  internal::EnsureSodium();
  // sodium_malloc mlocks the pages and marks them MADV_DONTDUMP; when mlock fails (a low
  // RLIMIT_MEMLOCK) it still returns guarded memory, which is the better outcome than failing.
  data_ = static_cast<uint8_t*>(sodium_malloc(size));
  if (data_ == nullptr) throw std::bad_alloc();
  std::memset(data_, 0, size);
}

SecureBytes SecureBytes::CopyOf(ByteSpan data) {
  if (data.empty()) return SecureBytes();
  SecureBytes out(data.size());
  // Non-empty, so the constructor allocated (or threw); the analyzer cannot see through it.
  // NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker)
  std::memcpy(out.data_, data.data(), data.size());
  return out;
}

SecureBytes::~SecureBytes() {
  if (data_ != nullptr) sodium_free(data_);  // wipes before unmapping
}

SecureBytes::SecureBytes(SecureBytes&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

SecureBytes& SecureBytes::operator=(SecureBytes&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) sodium_free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void SecureBytes::Truncate(size_t size) {
  if (size >= size_) return;
  sodium_memzero(data_ + size, size_ - size);
  size_ = size;
}

bool ConstantTimeEqual(ByteSpan a, ByteSpan b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

void SecureWipe(MutableByteSpan buf) {
  if (!buf.empty()) sodium_memzero(buf.data(), buf.size());
}

}  // namespace sigilfs::crypt
