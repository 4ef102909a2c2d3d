// Shared by the libFuzzer targets: invariant checks that survive NDEBUG, the fixed keys the seed
// corpus is made under, and the --make-corpus mode that writes a target's seeds.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "sigilfs/core/backing_file.h"
#include "sigilfs/core/page_layer.h"
#include "sigilfs/crypt/aead.h"
#include "sigilfs/crypt/bytes.h"

// Aborts (a crash libFuzzer reports, with the input saved) when an invariant does not hold.
#define FUZZ_CHECK(cond)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace sigilfs::fuzz {

// Fixed key material: the seed corpus is sealed under these, so seeds open and the fuzzer
// mutates valid units, names and files rather than only noise.
inline std::array<uint8_t, 32> ContentKey() {
  std::array<uint8_t, 32> k;
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(0xc0 + i);
  return k;
}
inline std::array<uint8_t, 64> NamesKey() {
  std::array<uint8_t, 64> k;
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(0x40 + i);
  return k;
}
inline std::array<uint8_t, 16> FixedNonce() {
  std::array<uint8_t, 16> n;
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(0xa0 + i);
  return n;
}
inline std::array<uint8_t, 16> FixedDirIv() {
  std::array<uint8_t, 16> iv;
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<uint8_t>(0x10 + i);
  return iv;
}

inline uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Writes one seed file into `dir` (which must exist); exits on failure.
inline void WriteSeed(const std::string& dir, const std::string& name, ByteSpan bytes) {
  const std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
}
inline void WriteSeed(const std::string& dir, const std::string& name, std::string_view text) {
  WriteSeed(dir, name, AsBytes(text));
}

// A page layer under the fixed content key, without worker threads (runs stay reproducible).
inline std::unique_ptr<core::PageLayer> NewFuzzPageLayer(crypt::AeadAlgorithm algorithm) {
  core::PageLayerOptions options;
  options.crypto_threads = 1;
  const auto key = ContentKey();
  return std::make_unique<core::PageLayer>(algorithm, key, options);
}

// The bytes of a cipher file holding `plain` under the fixed content key, made by the library;
// sealed (fs-verity, with `salt`) if `seal`. The file nonce is random, so each run differs.
inline std::vector<uint8_t> MakeCipherFile(crypt::AeadAlgorithm algorithm, ByteSpan plain,
                                           bool seal = false, ByteSpan salt = {}) {
  auto layer = NewFuzzPageLayer(algorithm);
  auto data = std::make_shared<core::MemoryFileData>();
  {
    auto f = layer->Open(core::NewMemoryBackingFile(data), "seed");
    FUZZ_CHECK(f.ok());
    if (!plain.empty()) FUZZ_CHECK((*f)->Write(0, plain).ok());
    FUZZ_CHECK((*f)->Flush().ok());
    if (seal) FUZZ_CHECK((*f)->EnableVerity(salt).ok());
  }
  MutexLock lock(data->mu);
  return data->bytes;
}

// For LLVMFuzzerInitialize: with --make-corpus=DIR on the command line, calls `make(DIR)` to
// write the target's seeds and exits; otherwise returns and fuzzing proceeds.
inline void MaybeMakeCorpus(int argc, char** argv,
                            const std::function<void(const std::string&)>& make) {
  constexpr std::string_view kFlag = "--make-corpus=";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with(kFlag)) {
      make(std::string(arg.substr(kFlag.size())));
      std::exit(0);
    }
  }
}

}  // namespace sigilfs::fuzz

// Defines LLVMFuzzerInitialize: `TARGET --make-corpus=DIR` writes the target's seeds and exits.
#define SIGILFS_FUZZ_SEEDS(make)                                 \
  extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) { \
    sigilfs::fuzz::MaybeMakeCorpus(*argc, *argv, make);          \
    return 0;                                                    \
  }
