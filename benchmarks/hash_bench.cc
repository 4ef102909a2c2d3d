// fs-verity block hashing speed: SHA-256(salt padded to 64 || 4 KiB block) by each available path.
#include <benchmark/benchmark.h>
#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "sigilfs/crypt/random.h"
#include "sigilfs/crypt/sha256.h"
#include "sigilfs/crypt/sha256_multi.h"

namespace sigilfs::crypt {
namespace {

constexpr size_t kBlockSize = 4096;
constexpr size_t kSaltSize = 32;
constexpr size_t kPaddedSaltSize = 64;

using Impl = Sha256Midstate::Impl;

// A 32-byte random salt, zero-padded to the SHA-256 block size as fs-verity does.
std::vector<uint8_t> PaddedSalt() {
  std::vector<uint8_t> salt(kPaddedSaltSize, 0);
  RandomBytes(MutableByteSpan(salt).first(kSaltSize));
  return salt;
}

std::vector<uint8_t> Block() {
  std::vector<uint8_t> block(kBlockSize);
  RandomBytes(block);
  return block;
}

Sha256Midstate Midstate(ByteSpan prefix) {
  return std::move(Sha256Midstate::Create(prefix)).value();
}

// (a) What a first implementation does: a fresh hasher per block, fed the salt every time.
void BM_Naive(benchmark::State& state) {
  const std::vector<uint8_t> salt = PaddedSalt();
  const std::vector<uint8_t> block = Block();
  for ([[maybe_unused]] auto _ : state) {
    Sha256Hasher hasher;
    hasher.Update(salt);
    hasher.Update(block);
    Sha256Digest digest = hasher.Final();
    benchmark::DoNotOptimize(digest);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBlockSize));
}
BENCHMARK(BM_Naive);

// (a') The same through EVP, OpenSSL 3's non-deprecated interface: one context reused, the
// digest re-initialised per block.
void BM_NaiveEvp(benchmark::State& state) {
  const std::vector<uint8_t> salt = PaddedSalt();
  const std::vector<uint8_t> block = Block();
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  for ([[maybe_unused]] auto _ : state) {
    Sha256Digest digest;
    EVP_DigestInit_ex(ctx, md, nullptr);
    EVP_DigestUpdate(ctx, salt.data(), salt.size());
    EVP_DigestUpdate(ctx, block.data(), block.size());
    EVP_DigestFinal_ex(ctx, digest.data(), nullptr);
    benchmark::DoNotOptimize(digest);
  }
  EVP_MD_free(md);
  EVP_MD_CTX_free(ctx);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBlockSize));
}
BENCHMARK(BM_NaiveEvp);

// (b) The salt absorbed once; OpenSSL's state copied per block.
void BM_Prefixed(benchmark::State& state) {
  const Sha256Prefixed hasher(PaddedSalt());
  const std::vector<uint8_t> block = Block();
  for ([[maybe_unused]] auto _ : state) {
    Sha256Digest digest = hasher.Digest(block);
    benchmark::DoNotOptimize(digest);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBlockSize));
}
BENCHMARK(BM_Prefixed);

// (c) The midstate, one stream on SHA-NI.
void BM_MidstateShaNi(benchmark::State& state) {
  if (!Sha256Midstate::ShaNiAvailable()) {
    state.SkipWithError("no SHA-NI on this CPU");
    return;
  }
  const Sha256Midstate midstate = Midstate(PaddedSalt());
  const std::vector<uint8_t> block = Block();
  for ([[maybe_unused]] auto _ : state) {
    Sha256Digest digest = midstate.HashWith(Impl::kShaNi, block);
    benchmark::DoNotOptimize(digest);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBlockSize));
}
BENCHMARK(BM_MidstateShaNi);

// (d) Two blocks per iteration, the streams interleaved on SHA-NI.
void BM_Hash2ShaNi(benchmark::State& state) {
  if (!Sha256Midstate::ShaNiAvailable()) {
    state.SkipWithError("no SHA-NI on this CPU");
    return;
  }
  const Sha256Midstate midstate = Midstate(PaddedSalt());
  const std::vector<uint8_t> a = Block();
  const std::vector<uint8_t> b = Block();
  for ([[maybe_unused]] auto _ : state) {
    Sha256Digest da;
    Sha256Digest db;
    midstate.Hash2With(Impl::kShaNi, a, b, da, db);
    benchmark::DoNotOptimize(da);
    benchmark::DoNotOptimize(db);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * kBlockSize));
}
BENCHMARK(BM_Hash2ShaNi);

// (e) Two blocks per iteration through the generic (OpenSSL, one block after the other) path.
void BM_Hash2Generic(benchmark::State& state) {
  const Sha256Midstate midstate = Midstate(PaddedSalt());
  const std::vector<uint8_t> a = Block();
  const std::vector<uint8_t> b = Block();
  for ([[maybe_unused]] auto _ : state) {
    Sha256Digest da;
    Sha256Digest db;
    midstate.Hash2With(Impl::kGeneric, a, b, da, db);
    benchmark::DoNotOptimize(da);
    benchmark::DoNotOptimize(db);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * kBlockSize));
}
BENCHMARK(BM_Hash2Generic);

}  // namespace
}  // namespace sigilfs::crypt

BENCHMARK_MAIN();
