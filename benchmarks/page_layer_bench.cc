// Page-layer speed: full-page overwrite with and without read-modify-write, sequential write and
// read at 1 MiB, and the raw AES-256-GCM speed of this machine as the yardstick, in one run.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sigilfs/core/page_layer.h"
#include "sigilfs/crypt/aead.h"
#include "sigilfs/crypt/random.h"

namespace sigilfs::core {
namespace {

constexpr size_t kFileSize = 64 << 20;

// A temporary cipher file on the real filesystem (TMPDIR), removed at exit.
class BenchFile {
 public:
  BenchFile() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sigilfs-bench-XXXXXX").string();
    int fd = ::mkstemp(tmpl.data());
    ::close(fd);
    path_ = tmpl;
  }
  ~BenchFile() { std::filesystem::remove(path_); }
  // Replaces the file with a new, empty one at the same path. Emptying the old one with a
  // truncate would make ext4 start writing all of it back when it is closed (its auto_da_alloc
  // rule for files truncated to zero), which is the backing filesystem's work, not ours.
  void Recreate() const {
    std::filesystem::remove(path_);
    ::close(::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  }
  std::unique_ptr<BackingFile> Open() const {
    return NewPosixBackingFile(::open(path_.c_str(), O_RDWR | O_CLOEXEC));
  }
  // Writes the file's dirty pages to disk and drops them from the kernel's page cache, so the
  // next read of the cipher file comes from the disk.
  void DropFromPageCache() const {
    int fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
    ::fsync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }

 private:
  std::string path_;
};

std::array<uint8_t, 32> Key() {
  std::array<uint8_t, 32> k;
  crypt::RandomBytes(k);
  return k;
}

void FillFile(PageLayer& layer, const BenchFile& file) {
  auto f = std::move(layer.Open(file.Open(), "bench")).value();
  std::vector<uint8_t> chunk(1 << 20, 0x5a);
  for (size_t off = 0; off < kFileSize; off += chunk.size()) (void)f->Write(off, chunk);
  (void)f->Flush();
}

// Overwrites an existing 64 MiB file with 4 KiB page-aligned writes through a freshly opened
// file (nothing cached in sigilfs): arg 0 = the skip path (0) or read-modify-write forced (1);
// arg 1 = the cipher file warm in the kernel's page cache (0) or dropped from it (1).
void BM_FullPageOverwrite(benchmark::State& state) {
  PageLayerOptions o;
  o.force_rmw = state.range(0) == 1;
  const bool cold = state.range(1) == 1;
  const auto key = Key();
  PageLayer layer(crypt::AeadAlgorithm::kAes256Gcm, key, o);
  BenchFile file;
  FillFile(layer, file);
  std::vector<uint8_t> page(kPageSize, 0xa5);
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      file.DropFromPageCache();
      state.ResumeTiming();
    }
    auto f = std::move(layer.Open(file.Open(), "bench")).value();
    for (size_t off = 0; off < kFileSize; off += kPageSize) (void)f->Write(off, page);
    (void)f->Flush();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kFileSize));
  state.counters["rmw_reads"] = static_cast<double>(layer.counters().Get(PageCounter::kRmwReads)) /
                                static_cast<double>(state.iterations());
  state.SetLabel(std::string(o.force_rmw ? "rmw forced" : "skip path") +
                 (cold ? ", cipher file not cached" : ", cipher file cached"));
}
BENCHMARK(BM_FullPageOverwrite)
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Sequential write of a new 64 MiB file with writes of range(0) bytes.
void BM_SequentialWrite(benchmark::State& state) {
  const auto key = Key();
  PageLayer layer(crypt::AeadAlgorithm::kAes256Gcm, key);
  BenchFile file;
  std::vector<uint8_t> chunk(static_cast<size_t>(state.range(0)), 0x11);
  for (auto _ : state) {
    state.PauseTiming();  // emptying the file is the backing filesystem's work, not ours
    file.Recreate();
    auto f = std::move(layer.Open(file.Open(), "bench")).value();
    state.ResumeTiming();
    for (size_t off = 0; off < kFileSize; off += chunk.size()) (void)f->Write(off, chunk);
    (void)f->Flush();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kFileSize));
}
BENCHMARK(BM_SequentialWrite)
    ->Arg(4096)
    ->Arg(128 << 10)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Sequential read of a 64 MiB file with reads of range(0) bytes, through a freshly opened file
// (the cipher file itself is in the kernel's page cache: this measures sigilfs, not the disk).
void BM_SequentialRead(benchmark::State& state) {
  const auto key = Key();
  PageLayer layer(crypt::AeadAlgorithm::kAes256Gcm, key);
  BenchFile file;
  FillFile(layer, file);
  std::vector<uint8_t> buf(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    auto f = std::move(layer.Open(file.Open(), "bench")).value();
    for (size_t off = 0; off < kFileSize; off += buf.size()) (void)f->Read(off, buf);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kFileSize));
}
BENCHMARK(BM_SequentialRead)
    ->Arg(4096)
    ->Arg(128 << 10)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The yardstick: AES-256-GCM sealing 4 KiB units on one core, as `openssl speed -evp` measures.
void BM_RawAesGcmSeal(benchmark::State& state) {
  const auto key = Key();
  auto aead = std::move(crypt::Aead::Create(crypt::AeadAlgorithm::kAes256Gcm, key)).value();
  std::vector<uint8_t> in(kPageSize, 1), out(kPageSize), nonce(12, 0), tag(16);
  for (auto _ : state) {
    (void)aead->Seal(nonce, {}, in, out, tag);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kPageSize));
}
BENCHMARK(BM_RawAesGcmSeal);

}  // namespace
}  // namespace sigilfs::core

BENCHMARK_MAIN();
