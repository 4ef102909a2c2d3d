// Internal: worker threads for batch encryption and decryption.
#include "thread_pool.h"

#include <algorithm>
#include <latch>

namespace sigilfs::core {

ThreadPool::ThreadPool(unsigned workers) {
  for (unsigned i = 0; i < workers; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void ThreadPool::ParallelFor(size_t n, size_t min_chunk,
                             const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  const size_t max_parts = threads_.size() + 1;
  const size_t parts = std::clamp<size_t>(n / std::max<size_t>(min_chunk, 1), 1, max_parts);
  if (parts == 1) {
    fn(0, n);
    return;
  }
  const size_t chunk = (n + parts - 1) / parts;
  std::latch done(static_cast<std::ptrdiff_t>(parts - 1));
  {
    std::lock_guard lock(mu_);
    for (size_t p = 1; p < parts; ++p) {
      const size_t begin = p * chunk, end = std::min(n, begin + chunk);
      tasks_.emplace_back([&fn, &done, begin, end] {
        if (begin < end) fn(begin, end);
        done.count_down();
      });
    }
  }
  cv_.notify_all();
  fn(0, std::min(n, chunk));
  done.wait();
}

}  // namespace sigilfs::core
