// SHA-256 from a prefix midstate: OpenSSL on any CPU, SHA-NI (one or two streams) on x86-64.
#include "sigilfs/crypt/sha256_multi.h"

// The low-level SHA256_CTX is the one OpenSSL interface that lets a hash resume from chaining
// words (EVP has no way to set them); it reaches the same assembly as EVP.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <iterator>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace sigilfs::crypt {
namespace {

constexpr size_t kBlockSize = 64;

using ChainingWords = std::array<uint32_t, 8>;

// --- Generic path ---------------------------------------------------------------------------

// An OpenSSL context as it would be right after hashing the prefix. The prefix filled whole
// blocks, so nothing is buffered and the chaining words plus the bit count are the whole state.
SHA256_CTX ContextAfterPrefix(const ChainingWords& words, uint64_t prefix_size) {
  SHA256_CTX ctx;
  SHA256_Init(&ctx);
  std::copy(words.begin(), words.end(), std::begin(ctx.h));
  const uint64_t bits = prefix_size * 8;
  ctx.Nl = static_cast<SHA_LONG>(bits);
  ctx.Nh = static_cast<SHA_LONG>(bits >> 32);
  return ctx;
}

Sha256Digest HashGeneric(const ChainingWords& words, uint64_t prefix_size, ByteSpan data) {
  SHA256_CTX ctx = ContextAfterPrefix(words, prefix_size);
  if (!data.empty()) SHA256_Update(&ctx, data.data(), data.size());
  Sha256Digest digest;
  SHA256_Final(digest.data(), &ctx);
  return digest;
}

// --- SHA-NI path ----------------------------------------------------------------------------

#if defined(__x86_64__)

// Only these functions use the SHA extensions, so the rest of the project builds for the baseline
// x86-64 and the CPUID check decides at run time whether they are called.
#define SIGILFS_SHA_NI __attribute__((target("sha,sse4.1,ssse3")))

// FIPS 180-4, 4.2.2: the 64 round constants, aligned so four at a time load as one vector.
alignas(16) constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

// The working variables in the two registers SHA256RNDS2 reads and writes. Listing dwords from
// the highest: abef = {A, B, E, F}, cdgh = {C, D, G, H}.
struct ShaNiState {
  __m128i abef;
  __m128i cdgh;
};

SIGILFS_SHA_NI inline __m128i ByteSwapMask() {
  // Reverses the bytes of each dword: SHA-256 words are big-endian.
  return _mm_set_epi64x(0x0c0d0e0f08090a0b, 0x0405060700010203);
}

// Chaining words H0..H7 into the register layout.
SIGILFS_SHA_NI inline ShaNiState LoadState(const ChainingWords& words) {
  const __m128i abcd = _mm_loadu_si128(reinterpret_cast<const __m128i*>(words.data()));
  const __m128i efgh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(words.data() + 4));
  const __m128i cdab = _mm_shuffle_epi32(abcd, 0xb1);
  const __m128i efgh_high_first = _mm_shuffle_epi32(efgh, 0x1b);
  return {_mm_alignr_epi8(cdab, efgh_high_first, 8), _mm_blend_epi16(efgh_high_first, cdab, 0xf0)};
}

// The register layout back into H0..H7, written as the big-endian digest.
SIGILFS_SHA_NI inline void StoreDigest(const ShaNiState& s, Sha256Digest& digest) {
  const __m128i feba = _mm_shuffle_epi32(s.abef, 0x1b);
  const __m128i dchg = _mm_shuffle_epi32(s.cdgh, 0xb1);
  const __m128i abcd = _mm_blend_epi16(feba, dchg, 0xf0);
  const __m128i efgh = _mm_alignr_epi8(dchg, feba, 8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(digest.data()),
                   _mm_shuffle_epi8(abcd, ByteSwapMask()));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(digest.data() + 16),
                   _mm_shuffle_epi8(efgh, ByteSwapMask()));
}

// Message words 4i..4i+3 of a block (i < 4), lowest dword first.
SIGILFS_SHA_NI inline __m128i LoadMessage(const uint8_t* block, size_t i) {
  return _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * i)),
                          ByteSwapMask());
}

// W[t..t+3] from W[t-16..t-1], held as four groups of four: msg1 adds sigma0(W[t-15]) to
// W[t-16], the alignr supplies W[t-7], and msg2 adds sigma1(W[t-2]), which for the upper two
// words are the two it has just computed.
SIGILFS_SHA_NI inline __m128i NextMessage(__m128i w16, __m128i w12, __m128i w8, __m128i w4) {
  const __m128i partial = _mm_add_epi32(_mm_sha256msg1_epu32(w16, w12), _mm_alignr_epi8(w4, w8, 4));
  return _mm_sha256msg2_epu32(partial, w4);
}

// Rounds 4g..4g+3. SHA256RNDS2 does two rounds, taking W+K for them from the low two dwords.
// After the first, the register that held CDGH holds the new ABEF, so the second reads them the
// other way round and leaves both back in place.
SIGILFS_SHA_NI inline void FourRounds(ShaNiState& s, __m128i w, size_t g) {
  const __m128i wk =
      _mm_add_epi32(w, _mm_load_si128(reinterpret_cast<const __m128i*>(kRoundConstants + 4 * g)));
  s.cdgh = _mm_sha256rnds2_epu32(s.cdgh, s.abef, wk);
  s.abef = _mm_sha256rnds2_epu32(s.abef, s.cdgh, _mm_shuffle_epi32(wk, 0x0e));
}

// The same rounds for two independent messages. Each SHA256RNDS2 waits for the previous one of
// its own stream; alternating the streams gives the CPU a second chain to issue in that wait.
SIGILFS_SHA_NI inline void FourRounds2(ShaNiState& a, __m128i wa, ShaNiState& b, __m128i wb,
                                       size_t g) {
  const __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(kRoundConstants + 4 * g));
  const __m128i wka = _mm_add_epi32(wa, k);
  const __m128i wkb = _mm_add_epi32(wb, k);
  a.cdgh = _mm_sha256rnds2_epu32(a.cdgh, a.abef, wka);
  b.cdgh = _mm_sha256rnds2_epu32(b.cdgh, b.abef, wkb);
  a.abef = _mm_sha256rnds2_epu32(a.abef, a.cdgh, _mm_shuffle_epi32(wka, 0x0e));
  b.abef = _mm_sha256rnds2_epu32(b.abef, b.cdgh, _mm_shuffle_epi32(wkb, 0x0e));
}

SIGILFS_SHA_NI inline void AddInto(ShaNiState& s, const ShaNiState& before) {
  s.abef = _mm_add_epi32(s.abef, before.abef);
  s.cdgh = _mm_add_epi32(s.cdgh, before.cdgh);
}

// Compresses `blocks` consecutive 64-byte blocks into s.
SIGILFS_SHA_NI void Compress(ShaNiState& s, const uint8_t* data, size_t blocks) {
  ShaNiState st = s;  // a local, so the state stays in registers across blocks
  for (; blocks > 0; --blocks, data += kBlockSize) {
    const ShaNiState before = st;
    __m128i m0 = LoadMessage(data, 0);
    __m128i m1 = LoadMessage(data, 1);
    __m128i m2 = LoadMessage(data, 2);
    __m128i m3 = LoadMessage(data, 3);
    FourRounds(st, m0, 0);
    FourRounds(st, m1, 1);
    FourRounds(st, m2, 2);
    FourRounds(st, m3, 3);
    for (size_t g = 4; g < 16; g += 4) {
      m0 = NextMessage(m0, m1, m2, m3);
      FourRounds(st, m0, g);
      m1 = NextMessage(m1, m2, m3, m0);
      FourRounds(st, m1, g + 1);
      m2 = NextMessage(m2, m3, m0, m1);
      FourRounds(st, m2, g + 2);
      m3 = NextMessage(m3, m0, m1, m2);
      FourRounds(st, m3, g + 3);
    }
    AddInto(st, before);
  }
  s = st;
}

// Compresses `blocks` blocks of each message, the two streams' rounds and message schedules
// interleaved in one loop.
SIGILFS_SHA_NI void Compress2(ShaNiState& sa, const uint8_t* a, ShaNiState& sb, const uint8_t* b,
                              size_t blocks) {
  ShaNiState sta = sa;
  ShaNiState stb = sb;
  for (; blocks > 0; --blocks, a += kBlockSize, b += kBlockSize) {
    const ShaNiState before_a = sta;
    const ShaNiState before_b = stb;
    __m128i a0 = LoadMessage(a, 0);
    __m128i b0 = LoadMessage(b, 0);
    __m128i a1 = LoadMessage(a, 1);
    __m128i b1 = LoadMessage(b, 1);
    __m128i a2 = LoadMessage(a, 2);
    __m128i b2 = LoadMessage(b, 2);
    __m128i a3 = LoadMessage(a, 3);
    __m128i b3 = LoadMessage(b, 3);
    FourRounds2(sta, a0, stb, b0, 0);
    FourRounds2(sta, a1, stb, b1, 1);
    FourRounds2(sta, a2, stb, b2, 2);
    FourRounds2(sta, a3, stb, b3, 3);
    for (size_t g = 4; g < 16; g += 4) {
      a0 = NextMessage(a0, a1, a2, a3);
      b0 = NextMessage(b0, b1, b2, b3);
      FourRounds2(sta, a0, stb, b0, g);
      a1 = NextMessage(a1, a2, a3, a0);
      b1 = NextMessage(b1, b2, b3, b0);
      FourRounds2(sta, a1, stb, b1, g + 1);
      a2 = NextMessage(a2, a3, a0, a1);
      b2 = NextMessage(b2, b3, b0, b1);
      FourRounds2(sta, a2, stb, b2, g + 2);
      a3 = NextMessage(a3, a0, a1, a2);
      b3 = NextMessage(b3, b0, b1, b2);
      FourRounds2(sta, a3, stb, b3, g + 3);
    }
    AddInto(sta, before_a);
    AddInto(stb, before_b);
  }
  sa = sta;
  sb = stb;
}

// --- Padding --------------------------------------------------------------------------------

// The length field at the end of the last block: a big-endian 64-bit count of bits.
constexpr size_t kLengthFieldSize = 8;

// The last one or two blocks of a message: the bytes after its last full block, 0x80, zeros,
// and the bit length of everything hashed (prefix included). Only this remainder (under 64
// bytes) is copied; the full blocks are hashed in place.
struct FinalBlocks {
  alignas(16) std::array<uint8_t, 2 * kBlockSize> bytes;
  size_t count;  // 1, or 2 when the remainder leaves no room for 0x80 and the length
};

FinalBlocks PadFinal(ByteSpan data, uint64_t prefix_size) {
  FinalBlocks out;
  const size_t remainder = data.size() % kBlockSize;
  out.count = remainder + 1 + kLengthFieldSize <= kBlockSize ? 1 : 2;
  const size_t end = out.count * kBlockSize;
  std::fill_n(out.bytes.begin(), end, uint8_t{0});
  if (remainder != 0) {
    std::memcpy(out.bytes.data(), data.data() + (data.size() - remainder), remainder);
  }
  out.bytes[remainder] = 0x80;
  uint64_t bits = (prefix_size + data.size()) * 8;
  for (size_t i = 1; i <= kLengthFieldSize; ++i, bits >>= 8) {
    out.bytes[end - i] = static_cast<uint8_t>(bits);
  }
  return out;
}

SIGILFS_SHA_NI Sha256Digest HashShaNi(const ChainingWords& words, uint64_t prefix_size,
                                      ByteSpan data) {
  ShaNiState s = LoadState(words);
  Compress(s, data.data(), data.size() / kBlockSize);
  const FinalBlocks last = PadFinal(data, prefix_size);
  Compress(s, last.bytes.data(), last.count);
  Sha256Digest digest;
  StoreDigest(s, digest);
  return digest;
}

// a.size() == b.size(), so both have the same number of full and final blocks.
SIGILFS_SHA_NI void Hash2ShaNi(const ChainingWords& words, uint64_t prefix_size, ByteSpan a,
                               ByteSpan b, Sha256Digest& out_a, Sha256Digest& out_b) {
  ShaNiState sa = LoadState(words);
  ShaNiState sb = sa;
  Compress2(sa, a.data(), sb, b.data(), a.size() / kBlockSize);
  const FinalBlocks last_a = PadFinal(a, prefix_size);
  const FinalBlocks last_b = PadFinal(b, prefix_size);
  Compress2(sa, last_a.bytes.data(), sb, last_b.bytes.data(), last_a.count);
  StoreDigest(sa, out_a);
  StoreDigest(sb, out_b);
}

// kShaNi is honoured only where the CPU has it, so no choice can reach an illegal instruction.
bool UseShaNi(Sha256Midstate::Impl impl) {
  return impl != Sha256Midstate::Impl::kGeneric && Sha256Midstate::ShaNiAvailable();
}

#endif  // defined(__x86_64__)

bool DetectShaNi() {
#if defined(__x86_64__)
  unsigned eax = 0;
  unsigned ebx = 0;
  unsigned ecx = 0;
  unsigned edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((ecx & bit_SSSE3) == 0 || (ecx & bit_SSE4_1) == 0) return false;
  // Leaf 7 may not exist on old CPUs; __get_cpuid_count checks the maximum leaf first.
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ebx & bit_SHA) != 0;
#else
  return false;
#endif
}

}  // namespace

Result<Sha256Midstate> Sha256Midstate::Create(ByteSpan prefix) {
  if (prefix.size() % kBlockSize != 0) {
    return Status(Code::kInvalidArgument, "SHA-256 midstate prefix of " +
                                              std::to_string(prefix.size()) +
                                              " bytes is not a multiple of 64");
  }
  SHA256_CTX ctx;
  SHA256_Init(&ctx);
  if (!prefix.empty()) SHA256_Update(&ctx, prefix.data(), prefix.size());
  assert(ctx.num == 0 && "whole blocks leave nothing buffered");
  ChainingWords words;
  std::copy(std::begin(ctx.h), std::end(ctx.h), words.begin());
  return Sha256Midstate(words, prefix.size());
}

bool Sha256Midstate::ShaNiAvailable() {
  static const bool available = DetectShaNi();
  return available;
}

Sha256Digest Sha256Midstate::Hash(ByteSpan data) const { return HashWith(Impl::kAuto, data); }

void Sha256Midstate::Hash2(ByteSpan a, ByteSpan b, Sha256Digest& out_a, Sha256Digest& out_b) const {
  Hash2With(Impl::kAuto, a, b, out_a, out_b);
}

Sha256Digest Sha256Midstate::HashWith(Impl impl, ByteSpan data) const {
#if defined(__x86_64__)
  if (UseShaNi(impl)) return HashShaNi(state_, prefix_size_, data);
#endif
  (void)impl;
  return HashGeneric(state_, prefix_size_, data);
}

void Sha256Midstate::Hash2With(Impl impl, ByteSpan a, ByteSpan b, Sha256Digest& out_a,
                               Sha256Digest& out_b) const {
#if defined(__x86_64__)
  if (a.size() == b.size() && UseShaNi(impl)) {
    Hash2ShaNi(state_, prefix_size_, a, b, out_a, out_b);
    return;
  }
#endif
  // OpenSSL has no multi-stream entry point; unequal sizes cannot share a loop either.
  out_a = HashWith(impl, a);
  out_b = HashWith(impl, b);
}

}  // namespace sigilfs::crypt
