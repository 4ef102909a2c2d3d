// SecureBytes: a fixed-size buffer for keys and passphrases in guarded, locked, undumpable memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sigilfs/crypt/bytes.h"

namespace sigilfs::crypt {

// Memory from libsodium's sodium_malloc: guard pages around it, mlock'ed, excluded from core
// dumps (MADV_DONTDUMP), and wiped by sodium_free when released. Move-only.
// Thread-safety: REQUIRES external synchronization for writes; concurrent reads are safe.
class SecureBytes {
 public:
  SecureBytes() = default;
  // Allocates `size` zeroed bytes. Aborts (like operator new) if memory cannot be had.
  explicit SecureBytes(size_t size);
  // Copies `data` into a new secure buffer.
  static SecureBytes CopyOf(ByteSpan data);
  ~SecureBytes();

  SecureBytes(SecureBytes&& other) noexcept;
  SecureBytes& operator=(SecureBytes&& other) noexcept;
  SecureBytes(const SecureBytes&) = delete;
  SecureBytes& operator=(const SecureBytes&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  ByteSpan span() const { return {data_, size_}; }
  MutableByteSpan mutable_span() { return {data_, size_}; }

  // Shrinks the visible size (e.g. a passphrase buffer after reading); never grows.
  void Truncate(size_t size);

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Constant-time comparison of equal-length spans; false if the lengths differ.
bool ConstantTimeEqual(ByteSpan a, ByteSpan b);

// Wipes ordinary memory (that the compiler cannot optimise the wipe away).
void SecureWipe(MutableByteSpan buf);

}  // namespace sigilfs::crypt
