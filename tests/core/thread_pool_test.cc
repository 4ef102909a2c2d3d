// Tests of the worker pool that splits batches across cores: every item runs once, batches
// started from inside a worker (a seal's pieces reading their pages) finish, and posted work
// runs in the background, with a waiting thread helping, and before the pool goes.
#include "thread_pool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
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

// Posted work runs on a worker while the poster goes on; without workers it runs at once.
TEST(ThreadPoolTest, PostedWorkRunsInTheBackgroundOrAtOnceWithoutWorkers) {
  WithinAMinute([] {
    {
      ThreadPool pool(0);
      bool ran = false;
      pool.Post([&] { ran = true; });
      EXPECT_TRUE(ran) << "no workers: runs in Post";
    }
    std::mutex mu;
    std::condition_variable cv;
    bool release = false;
    std::thread::id ran_on;
    std::atomic<bool> started{false};
    std::atomic<bool> done{false};
    ThreadPool pool(1);  // declared last: it goes (joining its worker) before what the task uses
    pool.Post([&] {
      ran_on = std::this_thread::get_id();
      started = true;
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return release; });  // Post returned while this waits
      done = true;
      lock.unlock();
      pool.Wake();
    });
    while (!started.load()) std::this_thread::yield();
    {
      std::lock_guard lock(mu);
      release = true;
    }
    cv.notify_all();
    pool.HelpUntil([&] { return done.load(); }, nullptr);
    EXPECT_TRUE(done.load());
    EXPECT_NE(ran_on, std::this_thread::get_id());
  });
}

// A thread waiting for posted work runs the work posted for it itself while the workers are
// busy, and joins the batches that work starts; work posted for nobody waits for a worker.
TEST(ThreadPoolTest, AWaitingThreadRunsItsQueuedWorkOnly) {
  WithinAMinute([] {
    std::mutex mu;
    std::condition_variable cv;
    bool release = false;
    std::atomic<bool> worker_busy{false};
    std::atomic<bool> other_ran{false};
    std::atomic<int> items{0};
    std::thread::id batch_ran_on;
    std::atomic<bool> done{false};
    const int owner = 0;
    ThreadPool pool(1);  // declared last: it goes (joining its worker) before what the tasks use
    pool.Post([&] {      // holds the only worker
      worker_busy = true;
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return release; });
    });
    while (!worker_busy.load()) std::this_thread::yield();
    pool.Post([&] { other_ran = true; });  // nobody's: only a worker may run it
    pool.Post(
        [&] {
          batch_ran_on = std::this_thread::get_id();
          pool.ForEachDynamic(50, [&](size_t) { items.fetch_add(1); });
          done = true;
          pool.Wake();
        },
        &owner);
    pool.HelpUntil([&] { return done.load(); }, &owner);
    EXPECT_EQ(items.load(), 50);
    EXPECT_EQ(batch_ran_on, std::this_thread::get_id()) << "the worker was busy all along";
    EXPECT_FALSE(other_ran.load()) << "the helper ran work posted for nobody";
    {
      std::lock_guard lock(mu);
      release = true;
    }
    cv.notify_all();
  });
}

// Work still queued when the pool is destroyed runs first.
TEST(ThreadPoolTest, PostedWorkFinishesBeforeThePoolGoes) {
  WithinAMinute([] {
    std::atomic<int> ran{0};
    {
      ThreadPool pool(1);
      for (int i = 0; i < 100; ++i) pool.Post([&] { ran.fetch_add(1); });
    }
    EXPECT_EQ(ran.load(), 100);
  });
}

}  // namespace
}  // namespace sigilfs::core
