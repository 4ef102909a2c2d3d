// Random bytes from OpenSSL's DRBG, with a per-thread pool for the many small page nonces.
#include "sigilfs/crypt/random.h"

#include <openssl/rand.h>
#include <pthread.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sigilfs/crypt/secure_bytes.h"

namespace sigilfs::crypt {
namespace {

// Bumped in every child after fork(): a pool filled before the fork must not be used again,
// or parent and child would hand out the same nonces.
std::atomic<uint64_t> g_fork_generation{0};

void OnForkChild() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

void RegisterForkHandler() {
  static const bool kRegistered = [] {
    pthread_atfork(nullptr, nullptr, &OnForkChild);
    return true;
  }();
  (void)kRegistered;
}

void FillFromDrbg(uint8_t* out, size_t n) {
  // RAND_bytes only fails if the DRBG cannot be seeded; continuing without randomness would
  // repeat nonces, so this is fatal.
  if (RAND_bytes(out, static_cast<int>(n)) != 1) {
    std::fputs("sigilfs: the random number generator failed\n", stderr);
    std::abort();
  }
}

constexpr size_t kPoolSize = 4096;
constexpr size_t kPooledMax = 64;  // larger requests go straight to the DRBG

struct Pool {
  std::array<uint8_t, kPoolSize> bytes;
  size_t used = kPoolSize;  // everything consumed: refill on first use
  uint64_t generation = ~uint64_t{0};
  ~Pool() { SecureWipe(bytes); }
};

}  // namespace

void RandomBytes(MutableByteSpan out) {
  if (out.empty()) return;
  if (out.size() > kPooledMax) {
    FillFromDrbg(out.data(), out.size());
    return;
  }
  RegisterForkHandler();
  thread_local Pool pool;
  const uint64_t gen = g_fork_generation.load(std::memory_order_relaxed);
  if (pool.generation != gen || kPoolSize - pool.used < out.size()) {
    FillFromDrbg(pool.bytes.data(), kPoolSize);
    pool.used = 0;
    pool.generation = gen;
  }
  uint8_t* src = pool.bytes.data() + pool.used;
  std::memcpy(out.data(), src, out.size());
  SecureWipe({src, out.size()});  // a value handed out is never handed out or kept again
  pool.used += out.size();
}

}  // namespace sigilfs::crypt
