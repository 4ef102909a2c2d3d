// Tests of sealed (fs-verity) files in the library: digests equal libfsverity's, reads are
// checked against the pins (or, in files sealed without them, the tree), tampering and rollback
// fail, sealed files refuse changes, and an interrupted seal is undone.
#include <gtest/gtest.h>

// libfsverity 1.5 opens `extern "C"` before its own includes: include those first.
#include <errno.h>
#include <libfsverity.h>
#include <stddef.h>
#include <stdint.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "sigilfs/core/keys.h"
#include "sigilfs/core/page_layer.h"
#include "sigilfs/core/verity.h"
#include "sigilfs/crypt/aead.h"
#include "sigilfs/crypt/random.h"
#include "test_support/backends.h"
#include "test_support/forwarding_backing_file.h"
#include "test_support/param_names.h"
#include "test_support/pattern.h"
#include "test_support/recording_backing_file.h"

namespace sigilfs::core {
namespace {

using test::BackendKind;
using test::TestBackend;

using test::Pattern;

// The digest libfsverity computes for `plain` (the test oracle).
verity::Digest OracleDigest(const std::vector<uint8_t>& plain, const std::vector<uint8_t>& salt) {
  struct Reader {
    const std::vector<uint8_t>* data;
    size_t pos;
  } reader{&plain, 0};
  auto read = [](void* fd, void* buf, size_t count) -> int {
    auto* r = static_cast<Reader*>(fd);
    if (r->pos + count > r->data->size()) return -EIO;
    std::memcpy(buf, r->data->data() + r->pos, count);
    r->pos += count;
    return 0;
  };
  libfsverity_merkle_tree_params params{};
  params.version = 1;
  params.hash_algorithm = FS_VERITY_HASH_ALG_SHA256;
  params.file_size = plain.size();
  params.block_size = 4096;
  params.salt_size = static_cast<uint32_t>(salt.size());
  params.salt = salt.empty() ? nullptr : salt.data();
  libfsverity_digest* d = nullptr;
  verity::Digest out{};
  if (libfsverity_compute_digest(&reader, read, &params, &d) == 0) {
    std::memcpy(out.data(), d->digest, out.size());
    std::free(d);  // NOLINT(cppcoreguidelines-no-malloc): libfsverity's allocation
  } else {
    ADD_FAILURE() << "libfsverity_compute_digest failed";
  }
  return out;
}

// Parameters: backend, cipher, and whether sealing pins the data units' nonces.
class VerityTest
    : public ::testing::TestWithParam<std::tuple<BackendKind, crypt::AeadAlgorithm, bool>> {
 protected:
  VerityTest() : backend_(std::get<0>(GetParam())) {
    crypt::RandomBytes(key_);
    layer_ = std::make_unique<PageLayer>(std::get<1>(GetParam()), key_, Options(pins()));
  }

  static bool pins() { return std::get<2>(GetParam()); }
  static PageLayerOptions Options(bool pins) {
    PageLayerOptions o;
    o.verity_pins = pins;
    return o;
  }

  std::unique_ptr<FileContents> Open(const std::string& name) {
    auto f = layer_->Open(backend_.Open(name), name);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(f).value() : nullptr;
  }

  // A sealed file holding `plain`; returns its digest.
  verity::Digest MakeSealed(const std::string& name, const std::vector<uint8_t>& plain,
                            const std::vector<uint8_t>& salt = {}) {
    auto f = Open(name);
    if (!plain.empty()) {
      EXPECT_EQ(*f->Write(0, plain), plain.size());
    }
    auto digest = f->EnableVerity(salt);
    EXPECT_TRUE(digest.ok()) << digest.status().ToString();
    return digest.ok() ? *digest : verity::Digest{};
  }

  static Result<std::vector<uint8_t>> ReadRange(FileContents& f, uint64_t offset, size_t n) {
    std::vector<uint8_t> out(n);
    auto got = f.Read(offset, out);
    if (!got.ok()) return got.status();
    out.resize(*got);
    return out;
  }

  const PageGeometry& geometry() const { return layer_->geometry(); }

  // Unit `k` of the cipher file `from` put over the same unit of `to` (an older version of it).
  // A sealed file's cipher bytes as a seal interrupted before its commit point leaves them: the
  // header's flags clear, and the last data page as it was before sealing (unbound), which a
  // layer sealing without binding writes the same way: opened as an unsealed page by the caller's
  // key, it is sealed again here with the unsealed page's associated data.
  std::vector<uint8_t> BeforeCommit(std::vector<uint8_t> raw) const {
    raw[10] &= static_cast<uint8_t>(~kFileFlagsSeal);
    uint64_t size = 0;
    for (size_t i = 0; i < 8; ++i)
      size |= uint64_t{raw[raw.size() - verity::kTrailerSize + i]} << (8 * i);
    const uint64_t last = PageGeometry::PageCount(size) - 1;
    const size_t len = static_cast<size_t>(size - last * 4096);
    FileNonce nonce;
    std::copy(raw.begin() + 16, raw.begin() + 32, nonce.begin());
    auto file_key = DeriveFileKey(key_, nonce);
    auto aead = crypt::Aead::Create(std::get<1>(GetParam()), file_key->span());
    const UnitCodec codec(**aead, nonce);
    const auto at = static_cast<long>(geometry().UnitOffset(last));
    std::vector<uint8_t> page(len);
    const ByteSpan unit(raw.data() + at, len + geometry().overhead());
    EXPECT_TRUE(codec.Open(last, UnitKind::kSealedLastPage, true, unit, page).ok());
    std::vector<uint8_t> unbound(unit.size());
    EXPECT_TRUE(codec.Seal(last, UnitKind::kDataPage, true, page, unbound).ok());
    std::copy(unbound.begin(), unbound.end(), raw.begin() + at);
    return raw;
  }

  void CopyUnit(const std::vector<uint8_t>& from, std::vector<uint8_t>& to, uint64_t k) const {
    const auto at = static_cast<long>(geometry().UnitOffset(k));
    std::copy(from.begin() + at, from.begin() + at + static_cast<long>(geometry().unit_size()),
              to.begin() + at);
  }

  // `name` holding `plain`, sealed by a layer that seals without pins (and without binding the
  // last page), as sigilfs did before they existed.
  void SealWithoutPins(const std::string& name, const std::vector<uint8_t>& plain) {
    PageLayerOptions o = Options(false);
    o.verity_bind = false;
    PageLayer old_layer(std::get<1>(GetParam()), key_, o);
    auto f = std::move(old_layer.Open(backend_.Open(name), name)).value();
    ASSERT_EQ(*f->Write(0, plain), plain.size());
    ASSERT_TRUE(f->EnableVerity({}).ok());
  }

  std::array<uint8_t, 32> key_;
  TestBackend backend_;
  std::unique_ptr<PageLayer> layer_;
};

TEST_P(VerityTest, DigestsEqualLibfsverity) {
  const std::vector<uint8_t> salts[] = {{}, {0xab, 0xcd}, std::vector<uint8_t>(32, 0x5a)};
  const size_t sizes[] = {
      0, 1, 4095, 4096, 4097, 128 * 4096 - 1, 128 * 4096, 128 * 4096 + 1, 5 * 1048576 + 123};
  int n = 0;
  for (size_t size : sizes) {
    for (const auto& salt : salts) {
      const auto plain = Pattern(size, static_cast<uint32_t>(size));
      const std::string name = "f" + std::to_string(n++);
      EXPECT_EQ(MakeSealed(name, plain, salt), OracleDigest(plain, salt))
          << size << " bytes, salt " << salt.size();
      // Reopened: still sealed, same descriptor, same bytes.
      auto f = Open(name);
      ASSERT_TRUE(f->sealed());
      auto d = f->VerityDescriptor();
      ASSERT_TRUE(d.ok());
      EXPECT_EQ(verity::FileDigest(*d), OracleDigest(plain, salt));
      auto back = ReadRange(*f, 0, size + 10);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_TRUE(*back == plain);
      EXPECT_TRUE(f->VerifyAll().ok());
    }
  }
}

TEST_P(VerityTest, ThreeLevelTreeEqualsLibfsverity) {
  // 128 * 128 blocks + 1: level 0 has 129 blocks, level 1 two, level 2 one.
  const auto plain = Pattern(128 * 128 * 4096 + 1, 7);
  EXPECT_EQ(MakeSealed("big", plain), OracleDigest(plain, {}));
  auto f = Open("big");
  EXPECT_TRUE(f->VerifyAll().ok());
  auto tail = ReadRange(*f, plain.size() - 5000, 5000);
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  EXPECT_TRUE(std::equal(tail->begin(), tail->end(), plain.end() - 5000));
}

TEST_P(VerityTest, SealedFilesRefuseChangesWithEperm) {
  MakeSealed("a", Pattern(10000, 1));
  for (int reopen = 0; reopen < 2; ++reopen) {
    auto f = Open("a");
    auto w = f->Write(0, Pattern(10, 2));
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.status().code(), Code::kPermissionDenied);
    EXPECT_EQ(w.status().sys_errno(), EPERM);
    auto big = f->Write(0, Pattern(100 * 4096, 2));  // the direct path too
    EXPECT_EQ(big.status().sys_errno(), EPERM);
    EXPECT_EQ(f->Truncate(5).sys_errno(), EPERM);
    EXPECT_EQ(f->Truncate(10000).sys_errno(), EPERM);
    EXPECT_EQ(f->EnableVerity({}).status().code(), Code::kExists);
    EXPECT_TRUE(*ReadRange(*f, 0, 10000) == Pattern(10000, 1));
  }
  // Unsealed files are not affected.
  auto g = Open("b");
  EXPECT_EQ(*g->Write(0, Pattern(10, 2)), 10u);
  EXPECT_FALSE(g->VerityDescriptor().ok());
  EXPECT_EQ(g->VerityDescriptor().status().sys_errno(), ENODATA);
}

TEST_P(VerityTest, SaltOver32BytesIsRefused) {
  auto f = Open("a");
  ASSERT_EQ(*f->Write(0, Pattern(100, 1)), 100u);
  EXPECT_EQ(f->EnableVerity(std::vector<uint8_t>(33, 1)).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(*f->Write(0, Pattern(100, 3)), 100u);  // still writable
}

TEST_P(VerityTest, DirtyPagesAreSealedAsWritten) {
  auto f = Open("a");
  const auto plain = Pattern(3 * 4096 + 17, 4);
  ASSERT_EQ(*f->Write(0, plain), plain.size());  // still in the cache, not written back
  auto digest = f->EnableVerity({});
  ASSERT_TRUE(digest.ok());
  EXPECT_EQ(*digest, OracleDigest(plain, {}));
}

// Flips one byte of the cipher file at `offset`.
void Flip(TestBackend& b, const std::string& name, uint64_t offset) {
  auto raw = b.Raw(name);
  raw.at(offset) ^= 0x40;
  b.SetRaw(name, raw);
}

TEST_P(VerityTest, ATamperedDataPageFailsOnlyItsReads) {
  const auto plain = Pattern(130 * 4096, 5);
  MakeSealed("a", plain);
  Flip(backend_, "a", geometry().UnitOffset(7) + 100);
  auto f = Open("a");
  EXPECT_FALSE(ReadRange(*f, 7 * 4096, 10).ok());
  auto before = ReadRange(*f, 0, 7 * 4096);
  ASSERT_TRUE(before.ok());
  EXPECT_TRUE(std::equal(before->begin(), before->end(), plain.begin()));
  EXPECT_TRUE(ReadRange(*f, 8 * 4096, 4096).ok());
  EXPECT_FALSE(f->VerifyAll().ok());
}

TEST_P(VerityTest, ATamperedTreeBlockFailsThePagesBelowIt) {
  const auto plain = Pattern(130 * 4096, 6);  // level 0: two blocks, level 1: one
  MakeSealed("a", plain);
  const auto layout = verity::LayoutOf(geometry(), plain.size(), pins());
  const verity::TreeLayout tree(plain.size());
  ASSERT_EQ(tree.levels(), 2);
  // Level-0 block 1 covers pages 128 and 129.
  Flip(backend_, "a", geometry().UnitOffset(layout.tree_first_unit + tree.level_start(0) + 1) + 50);
  auto f = Open("a");
  EXPECT_TRUE(ReadRange(*f, 0, 4096).ok());
  auto bad = ReadRange(*f, 128 * 4096, 4096);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kAuthFailed);
  // A read that runs into the damaged block returns the pages before it.
  auto partial = ReadRange(*f, 126 * 4096, 4 * 4096);
  ASSERT_TRUE(partial.ok()) << partial.status().ToString();
  EXPECT_TRUE(*partial ==
              std::vector<uint8_t>(plain.begin() + 126 * 4096, plain.begin() + 128 * 4096));
  auto all = f->VerifyAll();
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.code(), Code::kAuthFailed);
}

// Tests of the pins themselves: only with a layer that seals with pins.
class VerityPinsTest : public VerityTest {};

// A pin block covers PinsPerBlock() pages: damage to it fails exactly those.
TEST_P(VerityPinsTest, ATamperedPinBlockFailsThePagesItCovers) {
  const size_t per = verity::PinsPerBlock(geometry());
  const auto plain = Pattern((2 * per + 3) * 4096, 22);
  MakeSealed("a", plain);
  const auto layout = verity::LayoutOf(geometry(), plain.size(), true);
  ASSERT_EQ(layout.pin_blocks, 3u);
  Flip(backend_, "a", geometry().UnitOffset(layout.pin_first_unit + 1) + 100);
  auto f = Open("a");
  EXPECT_TRUE(ReadRange(*f, 0, per * 4096).ok());
  EXPECT_TRUE(ReadRange(*f, 2 * per * 4096, 3 * 4096).ok());
  for (uint64_t page : {per, 2 * per - 1}) {
    auto bad = ReadRange(*f, page * 4096, 4096);
    ASSERT_FALSE(bad.ok()) << page;
    EXPECT_EQ(bad.status().code(), Code::kAuthFailed);
  }
  // A read that runs into the damaged block returns the pages before it.
  auto partial = ReadRange(*f, (per - 2) * 4096, 4 * 4096);
  ASSERT_TRUE(partial.ok()) << partial.status().ToString();
  EXPECT_TRUE(*partial == std::vector<uint8_t>(plain.begin() + static_cast<long>((per - 2) * 4096),
                                               plain.begin() + static_cast<long>(per * 4096)));
  EXPECT_FALSE(f->VerifyAll().ok());
}

// Files whose pages fill their last pin block exactly, or spill one page into a new one.
TEST_P(VerityPinsTest, PinBlocksFilledExactlyOrByOnePage) {
  const uint64_t per = verity::PinsPerBlock(geometry());
  for (uint64_t bytes : {per * 4096 - 1, per * 4096, per * 4096 + 1, (per + 1) * 4096}) {
    SCOPED_TRACE(bytes);
    const std::string name = "f" + std::to_string(bytes);
    const auto plain = Pattern(bytes, static_cast<uint32_t>(bytes));
    EXPECT_EQ(MakeSealed(name, plain), OracleDigest(plain, {}));
    const auto layout = verity::LayoutOf(geometry(), plain.size(), true);
    EXPECT_EQ(layout.pin_blocks, bytes > per * 4096 ? 2u : 1u);
    EXPECT_EQ(backend_.Raw(name).size(), layout.cipher_size);
    auto f = Open(name);
    EXPECT_TRUE(*ReadRange(*f, 0, plain.size()) == plain);
    EXPECT_TRUE(f->VerifyAll().ok());
  }
}

// A file sealed without pins cannot be made to claim some: the flag and an extra unit give the
// length of a pinned file, but the record says there are none.
TEST_P(VerityPinsTest, PinsCannotBeClaimedForAFileSealedWithout) {
  const auto plain = Pattern(5000, 27);
  SealWithoutPins("a", plain);
  auto raw = backend_.Raw("a");
  const auto layout = verity::LayoutOf(geometry(), plain.size(), true);
  std::vector<uint8_t> unit(geometry().unit_size());
  crypt::RandomBytes(unit);
  raw.insert(raw.end() - verity::kTrailerSize, unit.begin(), unit.end());
  ASSERT_EQ(raw.size(), layout.cipher_size);
  for (uint8_t flags : {kFileFlagsSeal, kFileFlagSealed}) {
    raw[10] = flags;
    backend_.SetRaw("a", raw);
    EXPECT_FALSE(layer_->Open(backend_.Open("a"), "a").ok()) << int{flags};
  }
}

// A page that was a hole when the file was sealed is pinned as zeros: a unit of that page
// written before (which still opens under the file key) is refused.
TEST_P(VerityPinsTest, DataWhereAHoleWasSealedIsRefused) {
  auto plain = Pattern(4 * 4096, 28);
  {
    auto f = Open("a");
    ASSERT_EQ(*f->Write(0, plain), plain.size());
    ASSERT_TRUE(f->Flush().ok());
  }
  const auto written = backend_.Raw("a");
  auto raw = written;
  const uint64_t at = geometry().UnitOffset(1);
  std::fill(raw.begin() + static_cast<long>(at),
            raw.begin() + static_cast<long>(at + geometry().unit_size()), 0);
  backend_.SetRaw("a", raw);  // page 1 a hole
  std::fill(plain.begin() + 4096, plain.begin() + 2 * 4096, 0);
  {
    auto f = Open("a");
    ASSERT_TRUE(f->EnableVerity({}).ok());
    EXPECT_TRUE(*ReadRange(*f, 0, plain.size()) == plain);
  }
  raw = backend_.Raw("a");
  CopyUnit(written, raw, 1);
  backend_.SetRaw("a", raw);
  auto f = Open("a");
  auto r = ReadRange(*f, 4096, 4096);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kAuthFailed);
}

// The length, the header flag and the (authenticated) record must agree on the pins: a table
// cut off, or a flag changed, fails the open instead of reading unchecked.
TEST_P(VerityPinsTest, PinsCannotBeStrippedOrClaimed) {
  const auto plain = Pattern(5000, 23);
  MakeSealed("a", plain);
  const auto good = backend_.Raw("a");
  const auto layout = verity::LayoutOf(geometry(), plain.size(), true);
  ASSERT_EQ(layout.pin_blocks, 1u);
  ASSERT_EQ(good.size(), layout.cipher_size);
  ASSERT_EQ(good[10], kFileFlagsSeal);
  // The pin block cut out, the trailer kept: the length of a file sealed without pins.
  auto stripped = good;
  stripped.erase(stripped.begin() + static_cast<long>(geometry().UnitOffset(layout.pin_first_unit)),
                 stripped.end() - verity::kTrailerSize);
  ASSERT_EQ(stripped.size(), verity::LayoutOf(geometry(), plain.size(), false).cipher_size);
  for (uint8_t flags : {kFileFlagsSeal, kFileFlagSealed}) {
    stripped[10] = flags;
    backend_.SetRaw("a", stripped);
    EXPECT_FALSE(layer_->Open(backend_.Open("a"), "a").ok()) << int{flags};
  }
  // The flag alone cleared: the header and the length disagree.
  auto unflagged = good;
  unflagged[10] = kFileFlagSealed;
  backend_.SetRaw("a", unflagged);
  EXPECT_FALSE(layer_->Open(backend_.Open("a"), "a").ok());
  backend_.SetRaw("a", good);
  auto f = Open("a");
  ASSERT_TRUE(f);
  EXPECT_TRUE(*ReadRange(*f, 0, plain.size()) == plain);
}

// Pins are bound to their seal's root: those of an earlier, interrupted seal of the same file
// (same key, other data) are refused, and so is the page they pinned.
TEST_P(VerityPinsTest, PinsOfAnEarlierSealAreRefused) {
  const auto plain = Pattern(6 * 4096, 24);
  MakeSealed("a", plain);
  const auto first_seal = backend_.Raw("a");
  // Interrupted before its commit point: no flags, the last page not yet bound.
  backend_.SetRaw("a", BeforeCommit(first_seal));
  {
    auto f = Open("a");
    ASSERT_FALSE(f->sealed());
    ASSERT_EQ(*f->Write(2 * 4096, Pattern(4096, 25)), 4096u);
    ASSERT_TRUE(f->EnableVerity({}).ok());
  }
  const auto layout = verity::LayoutOf(geometry(), plain.size(), true);
  auto mixed = backend_.Raw("a");
  ASSERT_EQ(mixed.size(), first_seal.size());
  CopyUnit(first_seal, mixed, layout.pin_first_unit);
  // Page 2 as the first seal had it, which its old pin would vouch for.
  CopyUnit(first_seal, mixed, 2);
  backend_.SetRaw("a", mixed);
  auto g = Open("a");
  auto r = ReadRange(*g, 2 * 4096, 4096);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kAuthFailed);
}

// Files sealed before pins existed (without them) still open, read checked against the tree,
// and refuse an older version of a page, in a layer that seals with pins.
TEST_P(VerityPinsTest, FilesSealedWithoutPinsReadThroughTheTree) {
  const auto plain = Pattern(200 * 4096 + 7, 26);
  SealWithoutPins("a", plain);
  const auto raw = backend_.Raw("a");
  EXPECT_EQ(raw.size(), verity::LayoutOf(geometry(), plain.size(), false).cipher_size);
  EXPECT_EQ(raw[10], kFileFlagSealed);
  auto f = Open("a");
  ASSERT_TRUE(f && f->sealed());
  EXPECT_TRUE(*ReadRange(*f, 0, plain.size()) == plain);
  EXPECT_GT(f->counters().Get(PageCounter::kVerityTreeBlocksRead), 0u);
  EXPECT_EQ(f->counters().Get(PageCounter::kVerityPinBlocksRead), 0u);
  EXPECT_TRUE(f->VerifyAll().ok());
}

TEST_P(VerityTest, ATamperedRecordOrTrailerFailsTheOpen) {
  const auto plain = Pattern(5000, 7);
  MakeSealed("a", plain);
  const auto layout = verity::LayoutOf(geometry(), plain.size(), pins());
  const auto good = backend_.Raw("a");
  Flip(backend_, "a", geometry().UnitOffset(layout.record_unit) + 60);
  EXPECT_FALSE(layer_->Open(backend_.Open("a"), "a").ok());
  backend_.SetRaw("a", good);
  Flip(backend_, "a", good.size() - 8);  // trailer: the size no longer matches the length
  EXPECT_FALSE(layer_->Open(backend_.Open("a"), "a").ok());
  backend_.SetRaw("a", good);
  auto cut = good;
  cut.resize(cut.size() - 100);
  backend_.SetRaw("a", cut);
  EXPECT_FALSE(layer_->Open(backend_.Open("a"), "a").ok());
}

TEST_P(VerityTest, AnOlderVersionOfAPageIsRefused) {
  // Rollback: a page's earlier ciphertext still opens under the file key, but not against
  // the tree.
  auto f = Open("a");
  ASSERT_EQ(*f->Write(0, Pattern(8 * 4096, 8)), 8u * 4096);
  ASSERT_TRUE(f->Flush().ok());
  const auto raw_old = backend_.Raw("a");
  ASSERT_EQ(*f->Write(3 * 4096, Pattern(4096, 9)), 4096u);
  ASSERT_TRUE(f->EnableVerity({}).ok());
  f.reset();
  auto raw = backend_.Raw("a");
  CopyUnit(raw_old, raw, 3);
  backend_.SetRaw("a", raw);
  auto g = Open("a");
  auto r = ReadRange(*g, 3 * 4096, 4096);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kAuthFailed);
  // A page zeroed into a hole is refused the same way.
  auto raw2 = backend_.Raw("a");
  std::fill(raw2.begin() + static_cast<long>(geometry().UnitOffset(5)),
            raw2.begin() + static_cast<long>(geometry().UnitOffset(6)), 0);
  backend_.SetRaw("a", raw2);
  auto h = Open("a");
  EXPECT_FALSE(ReadRange(*h, 5 * 4096, 4096).ok());
}

TEST_P(VerityTest, ZerosSealedAsAHoleReadBack) {
  auto f = Open("a");
  ASSERT_EQ(*f->Write(10 * 4096, Pattern(100, 10)), 100u);  // pages 0..9 are holes
  auto digest = f->EnableVerity({});
  ASSERT_TRUE(digest.ok());
  std::vector<uint8_t> plain(10 * 4096 + 100, 0);
  const auto tail = Pattern(100, 10);
  std::copy(tail.begin(), tail.end(), plain.begin() + 10 * 4096);
  EXPECT_EQ(*digest, OracleDigest(plain, {}));
  auto g = Open("a");
  EXPECT_TRUE(*ReadRange(*g, 0, plain.size()) == plain);
}

// A seal interrupted before its commit point (the last page not yet bound) leaves the file it
// was: it opens unsealed with its data, the open cuts nothing (it may only be reading), and the
// first change cuts the tail first.
TEST_P(VerityTest, ASealInterruptedBeforeItsCommitPointOpensUnsealedAndIsCutAtTheFirstChange) {
  const auto plain = Pattern(20000, 11);
  MakeSealed("a", plain);
  const auto interrupted = BeforeCommit(backend_.Raw("a"));
  backend_.SetRaw("a", interrupted);
  auto f = Open("a");
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->sealed());
  EXPECT_EQ(f->size(), plain.size());
  EXPECT_TRUE(*ReadRange(*f, 0, plain.size()) == plain);
  EXPECT_EQ(backend_.Raw("a"), interrupted) << "an open changes nothing";
  EXPECT_EQ(*f->Write(0, Pattern(10, 12)), 10u);  // an ordinary file again
  ASSERT_TRUE(f->Flush().ok());
  EXPECT_EQ(backend_.Raw("a").size(), geometry().CipherSize(plain.size()));
  ASSERT_TRUE(f->EnableVerity({}).ok());
}

// Clearing a sealed file's flags (what an attacker may do, and what a stop after the commit
// point leaves) does not unseal it: it opens sealed, reads its data, refuses an older version of
// a page, and the open changes nothing.
TEST_P(VerityTest, ASealedFileWhoseFlagsWereClearedStaysSealed) {
  auto plain = Pattern(6 * 4096 + 100, 31);
  std::vector<uint8_t> older;
  {
    auto f = Open("a");
    ASSERT_EQ(*f->Write(0, plain), plain.size());
    ASSERT_TRUE(f->Flush().ok());
    older = backend_.Raw("a");
    const auto page1 = Pattern(4096, 32);
    ASSERT_EQ(*f->Write(4096, page1), 4096u);
    std::copy(page1.begin(), page1.end(), plain.begin() + 4096);
    ASSERT_TRUE(f->EnableVerity({}).ok());
  }
  auto raw = backend_.Raw("a");
  raw[10] = 0;
  raw[11] = 0;
  backend_.SetRaw("a", raw);
  {
    auto f = Open("a");
    ASSERT_TRUE(f);
    EXPECT_TRUE(f->sealed());
    EXPECT_TRUE(*ReadRange(*f, 0, plain.size()) == plain);
    EXPECT_EQ(f->Write(0, Pattern(1, 1)).status().code(), Code::kPermissionDenied);
  }
  EXPECT_EQ(backend_.Raw("a"), raw) << "an open changes nothing";
  CopyUnit(older, raw, 1);  // and page 1 as it was before
  backend_.SetRaw("a", raw);
  auto f = Open("a");
  ASSERT_TRUE(f && f->sealed());
  auto r = ReadRange(*f, 4096, 4096);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kAuthFailed);
  EXPECT_TRUE(*ReadRange(*f, 0, 4096) == std::vector<uint8_t>(plain.begin(), plain.begin() + 4096));
  EXPECT_FALSE(f->VerifyAll().ok());
}

// A sealed file stripped of what follows its data (tree, record, pins, trailer: cut at its
// data's end, or so as to leave a torn tail) or with its record damaged, and its flags cleared,
// fails the open: its last page is bound, so it cannot pass for an unsealed file.
TEST_P(VerityTest, ASealedFileStrippedOfItsSealFailsTheOpen) {
  for (size_t size : {size_t{100}, size_t{4096}, size_t{5 * 4096 + 7}, size_t{130 * 4096}}) {
    SCOPED_TRACE(size);
    const auto plain = Pattern(size, 33);
    (void)backend_.Open("a");
    backend_.SetRaw("a", {});
    MakeSealed("a", plain);
    const auto sealed = backend_.Raw("a");
    const auto layout = verity::LayoutOf(geometry(), size, pins());
    auto cut = sealed;
    cut.resize(geometry().CipherSize(size));
    cut[10] = 0;
    auto torn = cut;
    torn.insert(torn.end(), {1, 2, 3, 4, 5});
    auto damaged = sealed;
    damaged[10] = 0;
    damaged[geometry().UnitOffset(layout.record_unit) + 40] ^= 1;
    for (const auto* raw : {&cut, &torn, &damaged}) {
      // Five bytes past a short last page make a longer, damaged page rather than a torn tail:
      // what a damaged end leaves readable is docs/threat-model.md's to say.
      if (raw == &torn && size % 4096 != 0) continue;
      backend_.SetRaw("a", *raw);
      auto f = layer_->Open(backend_.Open("a"), "a");
      ASSERT_FALSE(f.ok());
      EXPECT_EQ(f.status().code(), Code::kCorrupt) << f.status().ToString();
      EXPECT_EQ(backend_.Raw("a"), *raw) << "an open changes nothing";
    }
  }
}

// A sealed file cannot change, so its next version is a new file under the same name. Put back
// whole, the older version is a sealed file in its own right (not caught): it opens and reads,
// and its digest, the older one, is what tells the two apart.
TEST_P(VerityTest, AnOlderSealedVersionOfAWholeFileOpensWithTheOlderDigest) {
  const auto v1 = Pattern(3 * 4096 + 10, 36);
  const verity::Digest digest_v1 = MakeSealed("a", v1);
  const auto raw_v1 = backend_.Raw("a");
  backend_.SetRaw("a", {});
  auto v2 = v1;
  const auto page1 = Pattern(4096, 37);
  std::copy(page1.begin(), page1.end(), v2.begin() + 4096);
  const verity::Digest digest_v2 = MakeSealed("a", v2);
  ASSERT_NE(digest_v2, digest_v1);
  backend_.SetRaw("a", raw_v1);
  auto f = Open("a");
  ASSERT_TRUE(f && f->sealed());
  EXPECT_TRUE(*ReadRange(*f, 0, v1.size() + 10) == v1);
  auto descriptor = f->VerityDescriptor();
  ASSERT_TRUE(descriptor.ok()) << descriptor.status().ToString();
  EXPECT_EQ(verity::FileDigest(*descriptor), digest_v1);
  EXPECT_TRUE(f->VerifyAll().ok());
}

// Files sealed before binding (the last page as in any file) whose flags were cleared open
// sealed too: a record that authenticates finishes the seal rather than undoing it.
TEST_P(VerityTest, FilesSealedBeforeBindingWhoseFlagsWereClearedStaySealed) {
  const auto plain = Pattern(3 * 4096, 34);
  PageLayerOptions o = Options(pins());
  o.verity_bind = false;
  PageLayer old_layer(std::get<1>(GetParam()), key_, o);
  {
    auto f = std::move(old_layer.Open(backend_.Open("a"), "a")).value();
    ASSERT_EQ(*f->Write(0, plain), plain.size());
    ASSERT_TRUE(f->EnableVerity({}).ok());
  }
  auto raw = backend_.Raw("a");
  EXPECT_EQ(raw[10] & kFileFlagBound, 0);
  raw[10] = 0;
  backend_.SetRaw("a", raw);
  auto f = Open("a");
  ASSERT_TRUE(f && f->sealed());
  EXPECT_TRUE(*ReadRange(*f, 0, plain.size()) == plain);
  EXPECT_TRUE(f->VerifyAll().ok());
}

// How a backing store fails: one change fails (storing nothing, or half of a write), or every
// change from one on fails (a disk gone bad: nothing more reaches it).
enum class Failure { kOnce, kOnceTorn, kFailingDisk };

// A backing file whose `fail_at`-th change (write, sync or truncate, counted from 1) fails with
// EIO, as `failure` says.
class StepFailingBackingFile final : public test::ForwardingBackingFile {
 public:
  StepFailingBackingFile(std::unique_ptr<BackingFile> inner, int fail_at, Failure failure)
      : ForwardingBackingFile(std::move(inner)), fail_at_(fail_at), failure_(failure) {}
  Status WriteAt(std::span<const ByteSpan> bufs, uint64_t offset) override {
    if (!Fails()) return ForwardingBackingFile::WriteAt(bufs, offset);
    if (failure_ == Failure::kOnceTorn && !bufs.empty() && bufs[0].size() > 1) {
      const ByteSpan half[] = {bufs[0].first(bufs[0].size() / 2)};
      (void)ForwardingBackingFile::WriteAt(half, offset);
    }
    return Status::FromErrno(EIO, "injected");
  }
  Status Sync(bool data_only) override {
    return Fails() ? Status::FromErrno(EIO, "injected") : ForwardingBackingFile::Sync(data_only);
  }
  Status Truncate(uint64_t size) override {
    return Fails() ? Status::FromErrno(EIO, "injected") : ForwardingBackingFile::Truncate(size);
  }
  int changes() const { return changes_; }

 private:
  bool Fails() {
    ++changes_;
    return changes_ == fail_at_ || (failure_ == Failure::kFailingDisk && changes_ > fail_at_);
  }
  const int fail_at_;
  const Failure failure_;
  int changes_ = 0;
};

// Sealing fails at every one of its steps in turn (once, once with half a write stored, or for
// good as on a failing disk): the seal reports it, and the file then opens with its data, sealed
// or not, and is never left flagged sealed with a length that is not a sealed file's. Sealed, it
// verifies; unsealed, it takes writes and seals again.
TEST_P(VerityTest, EverySealStepThatFailsLeavesAFileThatOpensWithItsData) {
  for (size_t size : {size_t{0}, size_t{5000}, size_t{40 * 4096 + 3}}) {
    for (Failure failure : {Failure::kOnce, Failure::kOnceTorn, Failure::kFailingDisk}) {
      const bool failing_disk = failure == Failure::kFailingDisk;
      for (int step = 1;; ++step) {
        SCOPED_TRACE(::testing::Message() << size << " bytes, step " << step << ", failure "
                                          << static_cast<int>(failure));
        const auto plain = Pattern(size, 35);
        (void)backend_.Open("a");
        backend_.SetRaw("a", {});
        {
          auto f = Open("a");
          if (size > 0) {
            ASSERT_EQ(*f->Write(0, plain), size);
          }
          ASSERT_TRUE(f->Flush().ok());
        }
        const auto before = backend_.Raw("a");
        auto faulty = std::make_unique<StepFailingBackingFile>(backend_.Open("a"), step, failure);
        StepFailingBackingFile* fault = faulty.get();
        auto f = std::move(layer_->Open(std::move(faulty), "a")).value();
        const bool sealed_ok = f->EnableVerity({}).ok();
        const bool reached = fault->changes() >= step;
        f.reset();
        if (reached && !failing_disk) {
          // One failure: the undo went through, and the length is back.
          EXPECT_EQ(backend_.Raw("a").size(), before.size());
        }
        auto g = Open("a");
        ASSERT_TRUE(g) << "the file no longer opens";
        EXPECT_TRUE(*ReadRange(*g, 0, size) == plain);
        if (g->sealed()) {
          EXPECT_TRUE(g->VerifyAll().ok());
        } else {
          ASSERT_EQ(*g->Write(size, Pattern(3, 36)), 3u);
          ASSERT_TRUE(g->EnableVerity({}).ok());
        }
        if (!reached) {
          EXPECT_TRUE(sealed_ok);
          break;  // past the seal's last step
        }
        EXPECT_FALSE(sealed_ok);
      }
    }
  }
}

// A file with a torn tail cannot be sealed (its torn page does not open), and the failed seal
// leaves it exactly as it was: not longer, not cut.
TEST_P(VerityTest, AFailedSealOfATornFileChangesNothing) {
  const auto plain = Pattern(3 * 4096, 37);
  {
    auto f = Open("a");
    ASSERT_EQ(*f->Write(0, Pattern(4 * 4096, 37)), 4 * 4096u);
  }
  auto raw = backend_.Raw("a");
  raw.resize(geometry().UnitOffset(3) + 3);  // a torn tail: a crash while the file grew
  backend_.SetRaw("a", raw);
  auto f = Open("a");
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->EnableVerity({}).ok());
  EXPECT_EQ(backend_.Raw("a"), raw);
  EXPECT_TRUE(*ReadRange(*f, 0, plain.size()) == plain);
}

TEST_P(VerityTest, ReadsCountVerifiedPagesAndCacheTreeBlocks) {
  const auto plain = Pattern(300 * 4096, 13);
  MakeSealed("a", plain);
  auto f = Open("a");
  ASSERT_TRUE(ReadRange(*f, 0, plain.size()).ok());
  EXPECT_GE(f->counters().Get(PageCounter::kVerityPagesVerified), 300u);
  const uint64_t tree_blocks = f->counters().Get(PageCounter::kVerityTreeBlocksRead);
  const uint64_t pin_blocks = f->counters().Get(PageCounter::kVerityPinBlocksRead);
  EXPECT_EQ(tree_blocks, verity::TreeLayout(plain.size()).total_blocks());  // each read once
  EXPECT_EQ(pin_blocks, pins() ? verity::PinBlockCount(geometry(), 300) : 0u);
  EXPECT_TRUE(f->VerifyAll().ok());
}

// The level-0 tree blocks and the pin blocks sit after the data, far from it. A sequential
// reader asks for the next chunk of each while it reads the current one, so it never waits for
// a seek there; a read that starts in the middle asks for nothing beyond what it reads.
TEST_P(VerityTest, SequentialReadsAskForTheNextSideBlocksAhead) {
  // 80 level-0 blocks (chunks of 32, 32 and 16); with pins also 31 (GCM) or 61 pin blocks.
  const auto plain = Pattern(80 * verity::kHashesPerBlock * 4096, 21);
  MakeSealed("a", plain);
  const auto layout = verity::LayoutOf(geometry(), plain.size(), pins());
  const verity::TreeLayout tree(plain.size());
  const uint64_t data_end = geometry().CipherSize(plain.size());
  const uint64_t pins_start = geometry().UnitOffset(layout.pin_first_unit);
  // What a sequential reader asks for in a run of n blocks: each chunk of 32 after the first.
  auto expected = [&](uint64_t n, uint64_t first_unit) {
    std::vector<std::pair<uint64_t, uint64_t>> out;  // offset, length
    for (uint64_t b = 32; b < n; b += 32)
      out.emplace_back(geometry().UnitOffset(first_unit + b),
                       std::min<uint64_t>(32, n - b) * geometry().unit_size());
    return out;
  };
  using Hints = std::vector<std::pair<uint64_t, uint64_t>>;
  auto side_hints = [&](bool from_start, uint64_t offset, size_t length) {
    auto recording = std::make_unique<test::RecordingBackingFile>(backend_.Open("a"));
    test::RecordingBackingFile* rec = recording.get();
    auto opened = layer_->Open(std::move(recording), "a");
    EXPECT_TRUE(opened.ok());
    auto f = std::move(opened).value();
    if (from_start) {
      for (uint64_t at = 0; at < plain.size(); at += 1 << 20)
        EXPECT_TRUE(ReadRange(*f, at, 1 << 20).ok());
    } else {
      EXPECT_TRUE(ReadRange(*f, offset, length).ok());
    }
    std::pair<Hints, Hints> out;  // tree, pins
    for (const auto& h : rec->hints())
      if (h.offset >= data_end)
        (h.offset >= pins_start ? out.second : out.first).emplace_back(h.offset, h.length);
    return out;
  };
  const auto [tree_hints, pin_hints] = side_hints(true, 0, 0);
  EXPECT_EQ(tree_hints,
            expected(tree.blocks_in_level(0), layout.tree_first_unit + tree.level_start(0)));
  EXPECT_EQ(tree_hints.size(), 2u);
  EXPECT_EQ(pin_hints, expected(layout.pin_blocks, layout.pin_first_unit));
  if (pins() && geometry().nonce_size() == 24) {
    EXPECT_EQ(pin_hints.size(), 1u);  // 61 pin blocks: the second chunk
  }
  const auto middle = side_hints(false, 70 * verity::kHashesPerBlock * 4096, 4096);
  EXPECT_TRUE(middle.first.empty());
  EXPECT_TRUE(middle.second.empty());
}

std::string ParamName(
    const ::testing::TestParamInfo<std::tuple<BackendKind, crypt::AeadAlgorithm, bool>>& info) {
  return test::BackendName(std::get<0>(info.param)) + crypt::AeadName(std::get<1>(info.param)) +
         (std::get<2>(info.param) ? "Pins" : "TreeOnly");
}

INSTANTIATE_TEST_SUITE_P(
    All, VerityTest,
    ::testing::Combine(::testing::Values(BackendKind::kMemory, BackendKind::kPosix),
                       ::testing::Values(crypt::AeadAlgorithm::kAes256Gcm,
                                         crypt::AeadAlgorithm::kXChaCha20Poly1305),
                       ::testing::Values(true, false)),
    ParamName);
INSTANTIATE_TEST_SUITE_P(
    All, VerityPinsTest,
    ::testing::Combine(::testing::Values(BackendKind::kMemory, BackendKind::kPosix),
                       ::testing::Values(crypt::AeadAlgorithm::kAes256Gcm,
                                         crypt::AeadAlgorithm::kXChaCha20Poly1305),
                       ::testing::Values(true)),
    ParamName);

}  // namespace
}  // namespace sigilfs::core
