// SecureBytes over sodium_malloc: guarded, locked, undumpable key memory.
#include "sigilfs/crypt/secure_bytes.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <sodium.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "sigilfs/mutex.h"
#include "sodium_init.h"

namespace sigilfs::crypt {
namespace {

// Fixed-size slots carved out of sodium_malloc arenas. Arenas are never returned: the pool only
// grows to the largest number of small keys alive at once (a few per open file), and keeping
// the arenas makes every later allocation a pop from the free list.
class SlotPool {
 public:
  static SlotPool& Get() {
    // Leaked on purpose: SecureBytes in other static objects may be destroyed after it.
    static SlotPool* const kPool = new SlotPool;
    return *kPool;
  }

  uint8_t* Take() {
    MutexLock lock(mu_);
    if (free_.empty()) Grow();
    uint8_t* slot = free_.back();
    free_.pop_back();
    return slot;
  }

  // The caller's bytes are wiped before the slot can be handed out again.
  void Give(uint8_t* slot) {
    sodium_memzero(slot, kSecureSlotSize);
    MutexLock lock(mu_);
    free_.push_back(slot);
  }

 private:
  static constexpr size_t kSlotsPerArena = 1024;  // 64 KiB: one mlock'ed region
  static constexpr size_t kArenaBytes = kSlotsPerArena * kSecureSlotSize;
  // Arenas relocked after fork; beyond this many (16 M keys alive at once) they are not.
  static constexpr size_t kMaxTrackedArenas = 16384;

  SlotPool() {
    // mlock is not inherited across fork: a daemon that forks after unlocking (fuse_daemonize)
    // would hold its keys in swappable memory. MADV_DONTDUMP is inherited; the lock is redone.
    (void)pthread_atfork(nullptr, nullptr, &RelockInChild);
  }

  // Runs in the child of fork, single-threaded: no locks (another thread may have held mu_).
  static void RelockInChild() {
    SlotPool& pool = Get();
    const size_t n = pool.arena_count_.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) (void)sodium_mlock(pool.arenas_[i], kArenaBytes);
  }

  void Grow() SIGILFS_REQUIRES(mu_) {
    free_.reserve(free_.size() + kSlotsPerArena);  // first: nothing to undo if it throws
    // sodium_malloc mlocks the pages and marks them MADV_DONTDUMP; when mlock fails (a low
    // RLIMIT_MEMLOCK) it still returns guarded memory, which is better than failing. Its
    // contents are filler bytes: zero them, so a slot never starts with anything in it.
    auto* arena = static_cast<uint8_t*>(sodium_malloc(kArenaBytes));
    if (arena == nullptr) throw std::bad_alloc();
    sodium_memzero(arena, kArenaBytes);
    const size_t n = arena_count_.load(std::memory_order_relaxed);
    if (n < kMaxTrackedArenas) {
      arenas_[n] = arena;
      arena_count_.store(n + 1, std::memory_order_release);
    }
    for (size_t i = kSlotsPerArena; i-- > 0;) free_.push_back(arena + i * kSecureSlotSize);
  }

  Mutex mu_;
  std::vector<uint8_t*> free_ SIGILFS_GUARDED_BY(mu_);
  std::array<uint8_t*, kMaxTrackedArenas> arenas_{};  // written under mu_, read after fork
  std::atomic<size_t> arena_count_{0};
};

}  // namespace

SecureBytes::SecureBytes(size_t size) : size_(size), capacity_(size) {
  if (size == 0) return;
  internal::EnsureSodium();
  if (size <= kSecureSlotSize) {
    data_ = SlotPool::Get().Take();
  } else {
    // A region of its own, with guard pages: see Grow for what happens when mlock fails.
    data_ = static_cast<uint8_t*>(sodium_malloc(size));
    if (data_ == nullptr) throw std::bad_alloc();
  }
  std::memset(data_, 0, size);
}

void SecureBytes::Release() {
  if (data_ == nullptr) return;
  if (capacity_ <= kSecureSlotSize) {
    SlotPool::Get().Give(data_);
  } else {
    sodium_free(data_);  // wipes before unmapping
  }
  data_ = nullptr;
}

SecureBytes SecureBytes::CopyOf(ByteSpan data) {
  if (data.empty()) return SecureBytes();
  SecureBytes out(data.size());
  // Non-empty, so the constructor allocated (or threw); the analyzer cannot see through it.
  // NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker)
  std::memcpy(out.data_, data.data(), data.size());
  return out;
}

SecureBytes::~SecureBytes() { Release(); }

SecureBytes::SecureBytes(SecureBytes&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

SecureBytes& SecureBytes::operator=(SecureBytes&& other) noexcept {
  if (this != &other) {
    Release();
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
