// SecureBytes: a fixed-size buffer for keys and passphrases in guarded, locked, undumpable memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sigilfs/crypt/bytes.h"

namespace sigilfs::crypt {

// The largest buffer served from the shared slot arena (see SecureBytes).
inline constexpr size_t kSecureSlotSize = 64;

// Memory from libsodium's sodium_malloc: guard pages around it, mlock'ed, excluded from core
// dumps (MADV_DONTDUMP), and wiped when released. Move-only.
// Buffers of at most kSecureSlotSize bytes (keys) are slots of a shared sodium_malloc arena
// instead of a region of their own: a region costs about eight system calls to set up and tear
// down (mmap, mprotect, mlock, madvise, munmap…), which the daemon would otherwise pay twice
// per file opened. Slots are locked and undumpable like regions (locked again in the child of a
// fork, which does not inherit mlock), and wiped when given back; only the guard page between
// neighbouring slots is given up.
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
  void Release();  // wipes and returns the memory; leaves data_ null

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Constant-time comparison of equal-length spans; false if the lengths differ.
bool ConstantTimeEqual(ByteSpan a, ByteSpan b);

// Wipes ordinary memory (that the compiler cannot optimise the wipe away).
void SecureWipe(MutableByteSpan buf);

}  // namespace sigilfs::crypt
