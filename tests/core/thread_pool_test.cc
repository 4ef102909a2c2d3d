// Tests of the worker pool that splits batches across cores: every item runs once, and batches
// started from inside a worker (a seal's pieces reading their pages) finish.
#include "thread_pool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <vector>

namespace sigilfs::core {
namespace {

// Runs `body` and fails (ending the process) if it has not returned within a minute: a
// deadlock would otherwise hang the suite until CTest's timeout.
template <typename F>
void WithinAMinute(F body) {
  auto done = std::async(std::launch::async, body);
  if (done.wait_for(std::chrono::minutes(1)) != std::future_status::ready) {
    ADD_FAILURE() << "deadlocked";
    _exit(1);
  }
  done.get();
}

TEST(ThreadPoolTest, ParallelForRunsEveryItemOnce) {
  for (unsigned workers : {0u, 1u, 3u}) {
    ThreadPool pool(workers);
    for (size_t n : {size_t{1}, size_t{7}, size_t{100}, size_t{1089}}) {
      std::vector<std::atomic<int>> runs(n);
      pool.ParallelFor(n, 4, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) runs[i].fetch_add(1);
      });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(runs[i].load(), 1) << n << " items, item " << i;
    }
  }
}

// Every worker busy with an outer item that starts a batch of its own and waits for it: with
// nobody left to take the inner chunks, each caller must run its own.
TEST(ThreadPoolTest, ParallelBatchesStartedInsideWorkersFinish) {
  WithinAMinute([] {
    for (unsigned workers : {1u, 3u}) {
      ThreadPool pool(workers);
      std::atomic<size_t> inner{0};
      pool.ForEachDynamic(
          8, [&](size_t) { pool.ForEachDynamic(16, [&](size_t) { inner.fetch_add(1); }); });
      EXPECT_EQ(inner.load(), 8u * 16u);
    }
  });
}

}  // namespace
}  // namespace sigilfs::core
