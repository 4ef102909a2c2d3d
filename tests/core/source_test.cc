// Tests of the write-data sources: a descriptor read a step at a time, and the page layer fed
// from it as import does.
#include "sigilfs/core/source.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "sigilfs/core/page_layer.h"
#include "sigilfs/crypt/random.h"
#include "test_support/backends.h"
#include "test_support/contents.h"
#include "test_support/pattern.h"
#include "test_support/temp_dir.h"

namespace sigilfs::core {
namespace {

constexpr size_t kStep = 3 * 4096;

int WriteFile(const std::string& path, const std::vector<uint8_t>& data) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size()))
    return -1;
  return ::lseek(fd, 0, SEEK_SET) == 0 ? fd : -1;
}

TEST(StepSourceTest, FillReadsAStepAtATimeAndEveryCallWorksOnIt) {
  test::TempDir tmp;
  const auto data = test::Pattern(2 * kStep + 1000, 7);
  const int fd = WriteFile(tmp.path() / "plain", data);
  ASSERT_GE(fd, 0);
  StepSource source(fd, kStep);
  std::vector<uint8_t> got;
  std::vector<size_t> steps;
  for (;;) {
    auto n = source.Fill();
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    steps.push_back(*n);
    if (*n == 0) break;
    // Straight from the buffer, then a copy with the last bytes handed back and read again.
    ByteSpan whole = source.Peek(512);
    ASSERT_EQ(whole.size(), 512u);
    got.insert(got.end(), whole.begin(), whole.end());
    source.Consume(whole.size());
    std::vector<uint8_t> rest(*n - whole.size());
    auto r = source.Read(rest);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(*r, rest.size());
    source.Unread(10);
    std::vector<uint8_t> again(20);
    ASSERT_EQ(*source.Read(again), 10u) << "only what was handed back is left of the step";
    ASSERT_TRUE(std::equal(again.begin(), again.begin() + 10, rest.end() - 10));
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_TRUE(source.Peek(4096).empty());
  }
  EXPECT_EQ(steps, (std::vector<size_t>{kStep, kStep, 1000, 0}));
  EXPECT_EQ(got, data);
  ::close(fd);
}

// A backing file is read by offset from its start, whatever its own position.
TEST(StepSourceTest, ABackingFileIsReadFromItsStartInWholeSteps) {
  const auto data = test::Pattern(2 * kStep + 77, 5);
  auto file = NewMemoryBackingFile(std::make_shared<MemoryFileData>());
  const ByteSpan parts[] = {data};
  ASSERT_TRUE(file->WriteAt(parts, 0).ok());
  StepSource source(*file, kStep);
  for (const size_t at : {size_t{0}, kStep, 2 * kStep}) {
    const size_t want = std::min(kStep, data.size() - at);
    ASSERT_EQ(*source.Fill(), want);
    const ByteSpan step = source.Peek(kStep);
    ASSERT_EQ(step.size(), want);
    EXPECT_TRUE(std::equal(step.begin(), step.end(), data.begin() + static_cast<long>(at)));
  }
  EXPECT_EQ(*source.Fill(), 0u);
}

// A pipe delivers in pieces: a step is still whole, short only at the end.
TEST(StepSourceTest, APipeFillsWholeSteps) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  const auto data = test::Pattern(kStep + 5000, 3);
  std::thread writer([&] {
    for (size_t at = 0; at < data.size(); at += 700) {
      const size_t n = std::min<size_t>(700, data.size() - at);
      if (::write(p[1], data.data() + at, n) != static_cast<ssize_t>(n)) break;
    }
    ::close(p[1]);
  });
  StepSource source(p[0], kStep);
  EXPECT_EQ(*source.Fill(), kStep);
  EXPECT_EQ(*source.Fill(), 5000u);
  EXPECT_EQ(*source.Fill(), 0u);
  writer.join();
  ::close(p[0]);
}

TEST(StepSourceTest, AReadErrorFailsTheFill) {
  const int fd = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // read(2) gives EISDIR
  ASSERT_GE(fd, 0);
  StepSource source(fd, kStep);
  auto n = source.Fill();
  EXPECT_FALSE(n.ok());
  EXPECT_EQ(n.status().sys_errno(), EISDIR);
  ::close(fd);
}

// As import feeds the page layer: a step filled, then written whole from the source. With the
// default step (256 pages) the middle of each step is sealed straight from the source's buffer.
TEST(StepSourceTest, ThePageLayerStoresAFileFedStepByStep) {
  test::TempDir tmp;
  const auto data = test::Pattern(2 * StepSource::kDefaultStep + 5000, 9);
  const int fd = WriteFile(tmp.path() / "plain", data);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> key(32);
  crypt::RandomBytes(key);
  PageLayer layer(crypt::AeadAlgorithm::kAes256Gcm, key);
  test::TestBackend backend(test::BackendKind::kMemory);
  auto file = layer.Open(backend.Open("f"), "f");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  StepSource source(fd);
  for (uint64_t offset = 0;;) {
    auto n = source.Fill();
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    if (*n == 0) break;
    auto written = (*file)->Write(offset, source, *n);
    ASSERT_TRUE(written.ok()) << written.status().ToString();
    ASSERT_EQ(*written, *n);
    offset += *n;
  }
  ASSERT_TRUE((*file)->Sync(false).ok());
  EXPECT_EQ(test::ReadAll(**file), data);
  ::close(fd);
}

}  // namespace
}  // namespace sigilfs::core
