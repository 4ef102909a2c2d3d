// Fuzzes verity record/descriptor/trailer decoding and opening and reading a cipher file.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "sigilfs/core/backing_file.h"
#include "sigilfs/core/format.h"
#include "sigilfs/core/page_layer.h"
#include "sigilfs/core/verity.h"

namespace sigilfs::fuzz {
namespace {

using crypt::AeadAlgorithm;
namespace verity = core::verity;

core::PageLayer& Layer(AeadAlgorithm alg) {
  static core::PageLayer* gcm = NewFuzzPageLayer(AeadAlgorithm::kAes256Gcm).release();
  static core::PageLayer* xchacha = NewFuzzPageLayer(AeadAlgorithm::kXChaCha20Poly1305).release();
  return alg == AeadAlgorithm::kAes256Gcm ? *gcm : *xchacha;
}

// `bytes` resized to `n`, zero-filled.
std::vector<uint8_t> Resized(ByteSpan bytes, size_t n) {
  std::vector<uint8_t> out(bytes.begin(), bytes.begin() + std::min(n, bytes.size()));
  out.resize(n, 0);
  return out;
}

void CheckDescriptor(ByteSpan in) {
  auto d = verity::DecodeDescriptor(in);
  if (!d.ok()) {
    FUZZ_CHECK(d.status().code() == Code::kCorrupt);
    return;
  }
  FUZZ_CHECK(in.size() == verity::kDescriptorSize);
  FUZZ_CHECK(d->salt.size() <= verity::kMaxSaltSize);
  // Canonical: every byte (padding included) is determined by what was decoded.
  const verity::Descriptor again = verity::EncodeDescriptor(d->data_size, d->root, d->salt);
  FUZZ_CHECK(std::equal(again.begin(), again.end(), in.begin(), in.end()));
}

void CheckRecord(ByteSpan in) {
  auto r = verity::DecodeRecord(in);
  if (!r.ok()) {
    FUZZ_CHECK(r.status().code() == Code::kCorrupt);
    return;
  }
  FUZZ_CHECK(in.size() == verity::kRecordSize);
  FUZZ_CHECK(r->decoded.data_size == verity::DecodeDescriptor(r->descriptor)->data_size);
  FUZZ_CHECK(r->pin_blocks <= core::PageGeometry::PageCount(r->decoded.data_size));
  const std::vector<uint8_t> again =
      verity::EncodeRecord(r->descriptor, r->tree_blocks, r->pin_blocks, r->bound);
  FUZZ_CHECK(std::equal(again.begin(), again.end(), in.begin(), in.end()));
}

void CheckTrailer(const core::PageGeometry& g, uint64_t cipher_size, ByteSpan trailer) {
  auto layout = verity::LayoutFromTrailer(g, cipher_size, trailer);
  if (!layout.ok()) {
    FUZZ_CHECK(layout.status().code() == Code::kCorrupt);
    return;
  }
  FUZZ_CHECK(layout->cipher_size == cipher_size);
  FUZZ_CHECK(layout->data_size == LoadLe64(trailer.data()));
  FUZZ_CHECK(layout->data_size <= cipher_size);
  FUZZ_CHECK(verity::LooksSealed(g, cipher_size));
  FUZZ_CHECK(layout->data_pages == core::PageGeometry::PageCount(layout->data_size));
  FUZZ_CHECK(layout->tree_first_unit >= layout->data_pages);
  FUZZ_CHECK(layout->tree_first_unit % verity::kTreeAlignUnits == 0);
  FUZZ_CHECK(layout->record_unit == layout->tree_first_unit + layout->tree_blocks);
  FUZZ_CHECK(layout->pin_first_unit == layout->record_unit + 1);
  FUZZ_CHECK(layout->pin_blocks == 0 ||
             layout->pin_blocks == verity::PinBlockCount(g, layout->data_pages));
  FUZZ_CHECK(g.UnitOffset(layout->pin_first_unit + layout->pin_blocks) + verity::kTrailerSize ==
             cipher_size);
}

bool CodeIsExpected(Code c) {
  return c == Code::kCorrupt || c == Code::kAuthFailed || c == Code::kNotSupported;
}

// Opens `in` as a cipher file under the fixed content key and reads all of it.
void CheckFile(AeadAlgorithm alg, ByteSpan in) {
  core::PageLayer& layer = Layer(alg);
  const core::PageGeometry& g = layer.geometry();
  auto data = std::make_shared<core::MemoryFileData>();
  data->bytes.assign(in.begin(), in.end());
  auto opened = layer.Open(core::NewMemoryBackingFile(data), "fuzz");
  if (!opened.ok()) {
    FUZZ_CHECK(CodeIsExpected(opened.status().code()));
    return;
  }
  core::FileContents& f = **opened;
  const uint64_t size = f.size();
  FUZZ_CHECK(size <= in.size());
  uint64_t cipher_size;
  {
    MutexLock lock(data->mu);
    cipher_size = data->bytes.size();
  }
  if (f.sealed()) {
    FUZZ_CHECK(cipher_size == in.size());
    FUZZ_CHECK(verity::LooksSealed(g, cipher_size));
    auto descriptor = f.VerityDescriptor();
    FUZZ_CHECK(descriptor.ok());
    auto decoded = verity::DecodeDescriptor(*descriptor);
    FUZZ_CHECK(decoded.ok());
    FUZZ_CHECK(decoded->data_size == size);
    // A sealed file refuses changes.
    const uint8_t byte = 0;
    FUZZ_CHECK(f.Write(0, ByteSpan(&byte, 1)).status().code() == Code::kPermissionDenied);
    FUZZ_CHECK(f.Truncate(0).code() == Code::kPermissionDenied);
  } else if (cipher_size != in.size()) {
    // An interrupted seal, undone: cut back to the data it covers.
    FUZZ_CHECK(verity::LooksSealed(g, in.size()));
    FUZZ_CHECK(cipher_size == g.CipherSize(size));
  } else {
    auto plain = g.PlainSize(cipher_size);
    FUZZ_CHECK(plain.ok());
    FUZZ_CHECK(*plain == size);
  }

  // Read everything, three pages at a time; past a bad page, carry on at the next one.
  std::vector<uint8_t> buf(3 * core::kPageSize);
  uint64_t offset = 0;
  bool all_read = true;
  while (offset < size) {
    auto n = f.Read(offset, buf);
    if (!n.ok()) {
      FUZZ_CHECK(n.status().code() != Code::kInternal);
      all_read = false;
      offset = (offset / core::kPageSize + 1) * core::kPageSize;
      continue;
    }
    FUZZ_CHECK(*n > 0);
    FUZZ_CHECK(*n <= buf.size());
    FUZZ_CHECK(offset + *n <= size);
    offset += *n;
  }
  auto at_end = f.Read(size, buf);
  FUZZ_CHECK(at_end.ok() && *at_end == 0);
  auto past_end = f.Read(size + 12345, buf);
  FUZZ_CHECK(past_end.ok() && *past_end == 0);
  if (f.sealed()) {
    const Status verified = f.VerifyAll();
    FUZZ_CHECK(verified.code() != Code::kInternal);
    if (verified.ok()) FUZZ_CHECK(all_read);  // a file that verifies reads in full
  }
}

void MakeCorpus(const std::string& dir) {
  for (auto alg : {AeadAlgorithm::kAes256Gcm, AeadAlgorithm::kXChaCha20Poly1305}) {
    const std::string name(crypt::AeadAlgorithmName(alg));
    std::vector<uint8_t> plain(2 * core::kPageSize + 500);
    for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>(i * 7);
    WriteSeed(dir, name + "-1", MakeCipherFile(alg, ByteSpan(plain).first(1)));
    WriteSeed(dir, name + "-4096", MakeCipherFile(alg, ByteSpan(plain).first(core::kPageSize)));
    WriteSeed(dir, name + "-8692", MakeCipherFile(alg, plain));
    // The smallest sealed file (a non-empty one puts its tree 16 units out: too large a seed).
    const std::vector<uint8_t> salt = {'s', 'a', 'l', 't'};
    std::vector<uint8_t> sealed = MakeCipherFile(alg, {}, /*seal=*/true, salt);
    WriteSeed(dir, name + "-sealed-empty", sealed);
    // The same with the header's sealed flag clear: a seal interrupted before its last step.
    sealed[10] &= static_cast<uint8_t>(~core::kFileFlagsSeal);
    WriteSeed(dir, name + "-interrupted-seal", sealed);
  }
  // A hole: page 1 of 3 was never written.
  {
    auto layer = NewFuzzPageLayer(AeadAlgorithm::kAes256Gcm);
    auto data = std::make_shared<core::MemoryFileData>();
    {
      auto f = layer->Open(core::NewMemoryBackingFile(data), "seed");
      const std::vector<uint8_t> page(core::kPageSize, 'h');
      FUZZ_CHECK((*f)->Write(0, page).ok());
      FUZZ_CHECK((*f)->Write(2 * core::kPageSize, ByteSpan(page).first(10)).ok());
      FUZZ_CHECK((*f)->Flush().ok());
    }
    WriteSeed(dir, "aes-256-gcm-hole", data->bytes);
  }
  // A record (the plaintext of a sealed file's record unit) for a 1 MiB file, sealed without
  // pins and with them under AES-256-GCM.
  verity::Digest root;
  for (size_t i = 0; i < root.size(); ++i) root[i] = static_cast<uint8_t>(i);
  const uint64_t data_size = 1 << 20;
  const std::vector<uint8_t> salt = {1, 2, 3};
  const verity::Descriptor descriptor = verity::EncodeDescriptor(data_size, root, salt);
  const uint64_t tree_blocks = verity::TreeLayout(data_size).total_blocks();
  const core::PageGeometry gcm(crypt::AeadNonceSize(AeadAlgorithm::kAes256Gcm));
  WriteSeed(dir, "record-1MiB", verity::EncodeRecord(descriptor, tree_blocks, 0, false));
  WriteSeed(dir, "record-1MiB-pins",
            verity::EncodeRecord(
                descriptor, tree_blocks,
                verity::PinBlockCount(gcm, core::PageGeometry::PageCount(data_size)), false));
  WriteSeed(dir, "record-1MiB-pins-bound",
            verity::EncodeRecord(
                descriptor, tree_blocks,
                verity::PinBlockCount(gcm, core::PageGeometry::PageCount(data_size)), true));
}

}  // namespace
}  // namespace sigilfs::fuzz

SIGILFS_FUZZ_SEEDS(sigilfs::fuzz::MakeCorpus)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sigilfs;
  using crypt::AeadAlgorithm;
  const ByteSpan in(data, size);
  fuzz::CheckRecord(in);
  fuzz::CheckRecord(fuzz::Resized(in, core::verity::kRecordSize));
  fuzz::CheckDescriptor(in);
  fuzz::CheckDescriptor(fuzz::Resized(in, core::verity::kDescriptorSize));
  for (auto alg : {AeadAlgorithm::kAes256Gcm, AeadAlgorithm::kXChaCha20Poly1305}) {
    const core::PageGeometry g(crypt::AeadNonceSize(alg));
    if (size >= core::verity::kTrailerSize) {
      // The input's own length and last 8 bytes, as a sealed file's trailer is found.
      fuzz::CheckTrailer(g, size, in.last(core::verity::kTrailerSize));
      // A length from the first 8 bytes (at most what off_t can hold) against the last 8.
      const uint64_t n = fuzz::LoadLe64(data) & uint64_t{std::numeric_limits<int64_t>::max()};
      fuzz::CheckTrailer(g, n, in.last(core::verity::kTrailerSize));
    }
    fuzz::CheckFile(alg, in);
  }
  return 0;
}
