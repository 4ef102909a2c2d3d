// Tests of the page layer's shared mode: several processes' objects on one cipher file (each its
// own PageLayer and open file, as separate mounts have), against a model of what each wrote.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "sigilfs/core/page_layer.h"
#include "sigilfs/core/source.h"
#include "sigilfs/crypt/random.h"
#include "test_support/backends.h"
#include "test_support/contents.h"
#include "test_support/forwarding_backing_file.h"
#include "test_support/pattern.h"

namespace sigilfs::core {
namespace {

using test::BackendKind;
using test::Pattern;
using test::ReadAll;
using test::TestBackend;
using test::WriteAll;

// One process's view: its own page layer (as a mount has), opening files of the shared backend.
struct Process {
  Process(ByteSpan key, bool shared) {
    PageLayerOptions o;
    o.shared = shared;
    o.crypto_threads = 2;
    layer = std::make_unique<PageLayer>(crypt::AeadAlgorithm::kAes256Gcm, key, o);
  }
  std::unique_ptr<PageLayer> layer;
};

class SharedContentsTest : public ::testing::TestWithParam<BackendKind> {
 protected:
  SharedContentsTest() : backend_(GetParam()) { crypt::RandomBytes(key_); }

  std::unique_ptr<FileContents> Open(Process& p, const std::string& name) {
    auto f = p.layer->Open(backend_.Open(name), name);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(f).value() : nullptr;
  }

  TestBackend backend_;
  std::array<uint8_t, 32> key_{};
};

TEST_P(SharedContentsTest, PartialWritesOfOnePageByTwoProcessesBothStay) {
  Process a(key_, true), b(key_, true);
  auto fa = Open(a, "f");
  auto fb = Open(b, "f");  // opened while the file is empty: its idea of the file is stale
  ASSERT_TRUE(fa && fb);
  const auto x = Pattern(100, 1), y = Pattern(100, 2);
  WriteAll(*fa, 0, x);
  WriteAll(*fb, 200, y);  // a read-modify-write of the page a's write made
  std::vector<uint8_t> want(300, 0);
  std::copy(x.begin(), x.end(), want.begin());
  std::copy(y.begin(), y.end(), want.begin() + 200);
  EXPECT_EQ(ReadAll(*fa), want);
  EXPECT_EQ(ReadAll(*fb), want);
  Process c(key_, false);
  auto fc = Open(c, "f");
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(ReadAll(*fc), want) << "as stored";
}

TEST_P(SharedContentsTest, ChangesByAnotherProcessShowInTheNextCall) {
  Process a(key_, true), b(key_, true);
  auto fa = Open(a, "f");
  ASSERT_NE(fa, nullptr);
  WriteAll(*fa, 0, Pattern(5 * kPageSize + 7, 3));
  auto fb = Open(b, "f");
  ASSERT_NE(fb, nullptr);
  EXPECT_EQ(ReadAll(*fb), Pattern(5 * kPageSize + 7, 3));
  // Rewritten in place (the same length: only the pages differ), shrunk, truncated to nothing
  // and written again (a new file key), grown past a hole: b reads each as a reads it.
  WriteAll(*fa, kPageSize + 3, Pattern(kPageSize, 4));
  EXPECT_EQ(ReadAll(*fb), ReadAll(*fa));
  ASSERT_TRUE(fa->Truncate(2 * kPageSize + 1).ok());
  EXPECT_EQ(fb->size(), 2 * kPageSize + 1);
  EXPECT_EQ(ReadAll(*fb), ReadAll(*fa));
  ASSERT_TRUE(fa->Truncate(0).ok());
  WriteAll(*fa, 0, Pattern(300, 5));
  EXPECT_EQ(ReadAll(*fb), Pattern(300, 5));
  WriteAll(*fb, 9 * kPageSize, Pattern(10, 6));
  auto want = Pattern(300, 5);
  want.resize(9 * kPageSize);
  const auto tail = Pattern(10, 6);
  want.insert(want.end(), tail.begin(), tail.end());
  EXPECT_EQ(ReadAll(*fa), want);
  EXPECT_GE(fb->outside_changes(), 3u);
}

TEST_P(SharedContentsTest, AppendsOfTwoProcessesGoToTheEnd) {
  Process a(key_, true), b(key_, true);
  auto fa = Open(a, "log");
  auto fb = Open(b, "log");
  ASSERT_TRUE(fa && fb);
  std::vector<uint8_t> want;
  for (int i = 0; i < 40; ++i) {
    const auto rec = Pattern(100 + static_cast<size_t>(i), static_cast<uint32_t>(i));
    MemorySource src(rec);
    auto n = (i % 2 == 0 ? fa : fb)->Append(src, rec.size());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    want.insert(want.end(), rec.begin(), rec.end());
  }
  EXPECT_EQ(ReadAll(*fa), want);
}

TEST_P(SharedContentsTest, ASealedFileChangedUnderneathFailsItsReads) {
  Process a(key_, true), b(key_, true);
  auto fa = Open(a, "f");
  ASSERT_NE(fa, nullptr);
  WriteAll(*fa, 0, Pattern(3 * kPageSize, 7));
  auto fb = Open(b, "f");
  ASSERT_NE(fb, nullptr);
  ASSERT_TRUE(fa->EnableVerity({}).ok());
  // b saw the file unsealed; the seal is taken in (writes refused), reads check it.
  EXPECT_EQ(fb->Write(0, Pattern(10, 8)).status().sys_errno(), EPERM);
  EXPECT_TRUE(fb->sealed());
  EXPECT_EQ(ReadAll(*fb), Pattern(3 * kPageSize, 7));
  // Someone without the key changes a byte and cuts the file: never taken in.
  auto raw = backend_.Raw("f");
  raw[40] ^= 1;
  raw.resize(raw.size() - 1);
  backend_.SetRaw("f", raw);
  std::vector<uint8_t> out(kPageSize);
  auto n = fb->Read(0, out);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().sys_errno(), EIO);
}

// A store whose lock fails (NFS without its lock service, a lock lost with the server): every
// call fails with its error and changes nothing.
class NoLockFile : public test::ForwardingBackingFile {
 public:
  using ForwardingBackingFile::ForwardingBackingFile;
  Status Lock(FileLock kind) override {
    if (fail.load() && kind != FileLock::kUnlocked) return Status::FromErrno(ENOLCK, "lock");
    return ForwardingBackingFile::Lock(kind);
  }
  static inline std::atomic<bool> fail{false};
};

TEST_P(SharedContentsTest, ALockThatFailsFailsTheCallAndChangesNothing) {
  Process a(key_, true);
  auto f = a.layer->Open(std::make_unique<NoLockFile>(backend_.Open("f")), "f");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  WriteAll(**f, 0, Pattern(5000, 9));
  const auto stored = backend_.Raw("f");
  NoLockFile::fail = true;
  EXPECT_EQ((*f)->Write(10, Pattern(10, 10)).status().sys_errno(), ENOLCK);
  EXPECT_EQ((*f)->Truncate(1).sys_errno(), ENOLCK);
  std::vector<uint8_t> out(10);
  EXPECT_EQ((*f)->Read(0, out).status().sys_errno(), ENOLCK);
  NoLockFile::fail = false;
  EXPECT_EQ(backend_.Raw("f"), stored);
  EXPECT_EQ(ReadAll(**f), Pattern(5000, 9));
}

// A write that the store refuses (a full disk) fails, and the file is as it was for this
// process and for the others: nothing of it stays cached or half-stored in the view of either.
TEST_P(SharedContentsTest, AWriteTheStoreRefusesChangesNothing) {
  Process a(key_, true), b(key_, true);
  auto faulty = std::make_unique<FaultyBackingFile>(backend_.Open("f"), FaultPlan{});
  FaultyBackingFile* fault = faulty.get();
  auto fa = std::move(a.layer->Open(std::move(faulty), "f")).value();
  const auto before = Pattern(3 * kPageSize + 100, 11);
  WriteAll(*fa, 0, before);
  auto fb = Open(b, "f");
  ASSERT_NE(fb, nullptr);
  const auto stored = backend_.Raw("f");
  FaultPlan full;
  full.write_budget = 0;  // every byte that grows or changes the file fails with ENOSPC
  fault->set_plan(full);
  for (uint64_t offset : {uint64_t{10}, uint64_t{kPageSize}, uint64_t{3 * kPageSize + 50}}) {
    auto n = fa->Write(offset, Pattern(kPageSize, 12));
    ASSERT_FALSE(n.ok()) << offset;
    EXPECT_EQ(n.status().sys_errno(), ENOSPC);
    EXPECT_EQ(backend_.Raw("f"), stored) << "nothing stored, at " << offset;
    EXPECT_EQ(ReadAll(*fa), before) << "as stored, for the writer";
    EXPECT_EQ(ReadAll(*fb), before) << "and for the others";
  }
  fault->set_plan(FaultPlan{});
  WriteAll(*fa, 10, Pattern(20, 13));  // and it takes writes again
  auto after = before;
  const auto patch = Pattern(20, 13);
  std::copy(patch.begin(), patch.end(), after.begin() + 10);
  EXPECT_EQ(ReadAll(*fb), after);
}

// The checker: processes write 512-byte records into slots of shared pages (each slot owned by
// one writer, so neighbours in a page belong to others), append records to a shared log, and
// read slots back, all at once. Every read must be a whole record of that slot, never older
// than one the same reader saw before; at the end every slot holds its owner's last record and
// the log holds every append exactly once, whole.
constexpr size_t kSlot = 512;
constexpr size_t kSlots = 16 * kPageSize / kSlot;  // 16 pages
constexpr size_t kLogRecord = 200;

std::vector<uint8_t> SlotRecord(uint32_t writer, uint32_t seq, uint32_t slot) {
  std::vector<uint8_t> r = Pattern(kSlot, writer * 1000003u + seq * 31u + slot);
  std::memcpy(r.data(), &writer, 4);
  std::memcpy(r.data() + 4, &seq, 4);
  std::memcpy(r.data() + 8, &slot, 4);
  return r;
}

struct Seen {
  uint32_t writer = 0, seq = 0;
  bool zero = false;
};
// What slot `slot` holds: zeros (never written) or the record a writer wrote (else a failure).
::testing::AssertionResult DecodeSlot(ByteSpan bytes, uint32_t slot, Seen& out) {
  if (bytes.size() != kSlot) return ::testing::AssertionFailure() << "short slot " << slot;
  if (std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; })) {
    out = {0, 0, true};
    return ::testing::AssertionSuccess();
  }
  uint32_t w, s, sl;
  std::memcpy(&w, bytes.data(), 4);
  std::memcpy(&s, bytes.data() + 4, 4);
  std::memcpy(&sl, bytes.data() + 8, 4);
  if (sl != slot || SlotRecord(w, s, sl) != std::vector<uint8_t>(bytes.begin(), bytes.end()))
    return ::testing::AssertionFailure() << "slot " << slot << " holds no record of its own";
  out = {w, s, false};
  return ::testing::AssertionSuccess();
}

TEST_P(SharedContentsTest, ConcurrentProcessesMatchAModel) {
  const bool long_run = std::getenv("SIGILFS_LONG") != nullptr;
  const auto duration = std::chrono::seconds(long_run ? 60 : 3);
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  constexpr uint32_t kWriters = 4;
  std::vector<std::unique_ptr<Process>> procs;
  std::vector<std::unique_ptr<FileContents>> data, log;
  for (uint32_t w = 0; w < kWriters; ++w) {
    procs.push_back(std::make_unique<Process>(key_, true));
    data.push_back(Open(*procs[w], "data"));
    log.push_back(Open(*procs[w], "log"));
    ASSERT_TRUE(data.back() && log.back());
  }
  std::vector<std::vector<uint32_t>> last(kWriters, std::vector<uint32_t>(kSlots, 0));
  std::vector<uint32_t> appended(kWriters, 0);
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> reads{0}, writes{0};
  const auto deadline = std::chrono::steady_clock::now() + duration;
  auto worker = [&](uint32_t w) {
    std::mt19937 rng(seed + w);
    std::vector<uint32_t> newest(kSlots, 0);  // per slot, the newest seq this reader saw
    uint32_t seq = 0;
    while (!failed && std::chrono::steady_clock::now() < deadline) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 4) {
        // A slot of its own, or (one in four) a run of its slots across pages.
        uint32_t slot = static_cast<uint32_t>(rng() % (kSlots / kWriters)) * kWriters + w;
        const auto rec = SlotRecord(w, ++seq, slot);
        auto n = data[w]->Write(uint64_t{slot} * kSlot, rec);
        if (!n.ok() || *n != kSlot) {
          ADD_FAILURE() << "write: " << (n.ok() ? "short" : n.status().ToString());
          failed = true;
        }
        last[w][slot] = seq;
        ++writes;
      } else if (op < 6) {
        const uint32_t index = appended[w]++;
        std::vector<uint8_t> rec = Pattern(kLogRecord, w * 7919u + index);
        std::memcpy(rec.data(), &w, 4);
        std::memcpy(rec.data() + 4, &index, 4);
        MemorySource src(rec);
        auto n = log[w]->Append(src, rec.size());
        if (!n.ok() || *n != rec.size()) {
          ADD_FAILURE() << "append: " << (n.ok() ? "short" : n.status().ToString());
          failed = true;
        }
        ++writes;
      } else {
        const uint32_t first = static_cast<uint32_t>(rng() % kSlots);
        const uint32_t count =
            1 + static_cast<uint32_t>(rng() % std::min<size_t>(24, kSlots - first));
        std::vector<uint8_t> out(count * kSlot);
        auto n = data[w]->Read(uint64_t{first} * kSlot, out);
        if (!n.ok()) {
          ADD_FAILURE() << "read: " << n.status().ToString();
          failed = true;
          continue;
        }
        out.resize(*n);
        for (uint32_t i = 0; i < count; ++i) {
          const uint32_t slot = first + i;
          std::vector<uint8_t> bytes(kSlot, 0);  // past the end: as never written
          if ((i + 1) * kSlot <= out.size())
            std::copy_n(out.begin() + i * kSlot, kSlot, bytes.begin());
          Seen seen;
          auto ok = DecodeSlot(bytes, slot, seen);
          if (!ok) {
            ADD_FAILURE() << ok.message();
            failed = true;
            break;
          }
          if (!seen.zero && seen.writer != slot % kWriters) {
            ADD_FAILURE() << "slot " << slot << " written by " << seen.writer;
            failed = true;
          }
          const uint32_t s = seen.zero ? 0 : seen.seq;
          if (s < newest[slot]) {
            ADD_FAILURE() << "slot " << slot << " went back from " << newest[slot] << " to " << s;
            failed = true;
          }
          newest[slot] = std::max(newest[slot], s);
        }
        ++reads;
      }
    }
  };
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < kWriters; ++w) threads.emplace_back(worker, w);
  for (auto& t : threads) t.join();
  ASSERT_FALSE(failed);
  // The end: read by a process of its own, not in shared mode (the stored state).
  Process check(key_, false);
  auto final_data = Open(check, "data");
  ASSERT_NE(final_data, nullptr);
  const auto bytes = ReadAll(*final_data);
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    std::vector<uint8_t> s(kSlot, 0);
    if ((slot + 1) * kSlot <= bytes.size())
      std::copy_n(bytes.begin() + slot * kSlot, kSlot, s.begin());
    Seen seen;
    ASSERT_TRUE(DecodeSlot(s, slot, seen));
    EXPECT_EQ(seen.zero ? 0 : seen.seq, last[slot % kWriters][slot]) << "slot " << slot;
  }
  auto final_log = Open(check, "log");
  ASSERT_NE(final_log, nullptr);
  const auto logged = ReadAll(*final_log);
  ASSERT_EQ(logged.size() % kLogRecord, 0u);
  std::vector<uint32_t> next(kWriters, 0);
  for (size_t at = 0; at < logged.size(); at += kLogRecord) {
    uint32_t w, index;
    std::memcpy(&w, logged.data() + at, 4);
    std::memcpy(&index, logged.data() + at + 4, 4);
    ASSERT_LT(w, kWriters) << "log record at " << at;
    ASSERT_EQ(index, next[w]) << "log record at " << at << " of writer " << w;
    std::vector<uint8_t> want = Pattern(kLogRecord, w * 7919u + index);
    std::memcpy(want.data(), &w, 4);
    std::memcpy(want.data() + 4, &index, 4);
    ASSERT_TRUE(std::equal(want.begin(), want.end(), logged.begin() + static_cast<long>(at)));
    ++next[w];
  }
  EXPECT_EQ(next, appended);
  std::printf("[ shared  ] seed %u: %llu writes, %llu reads, %zu log bytes\n", seed,
              static_cast<unsigned long long>(writes.load()),
              static_cast<unsigned long long>(reads.load()), logged.size());
}

INSTANTIATE_TEST_SUITE_P(Backends, SharedContentsTest,
                         ::testing::Values(BackendKind::kMemory, BackendKind::kPosix),
                         [](const auto& info) { return test::BackendName(info.param); });

}  // namespace
}  // namespace sigilfs::core
