// Internal: worker threads for batch encryption and decryption.
#include "thread_pool.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <system_error>

namespace sigilfs::core {

ThreadPool::ThreadPool(unsigned workers) : workers_(workers) {}

void ThreadPool::StartOnce() {
  std::call_once(started_, [this] {
    started_pid_ = ::getpid();
    // A system out of threads gets fewer workers, perhaps none: batches then run their chunks
    // on the caller (which takes back what no worker started), and posted work runs in Post.
    try {
      for (unsigned i = 0; i < workers_; ++i) threads_.emplace_back([this] { WorkerLoop(); });
    } catch (const std::system_error&) {
    }
  });
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(mu_);
      while (!stopping_ && tasks_.empty()) cv_.Wait(mu_);
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front().fn);
      tasks_.pop_front();
    }
    task();
  }
}

void ThreadPool::ParallelFor(size_t n, size_t min_chunk,
                             const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  const size_t max_parts = workers_ + 1;
  const size_t parts = std::clamp<size_t>(n / std::max<size_t>(min_chunk, 1), 1, max_parts);
  if (parts == 1) {
    fn(0, n);
    return;
  }
  StartOnce();
  if (started_pid_ != ::getpid()) {  // forked since the workers started: they are not here
    fn(0, n);
    return;
  }
  const size_t chunk = (n + parts - 1) / parts;
  // Completion is counted under a mutex rather than with std::latch: libstdc++'s latch notifies
  // after its decrement, so this frame could return (destroying it) while a worker still
  // touches it. Here the last worker signals while holding the lock the caller waits on.
  struct Batch {
    Mutex mu;
    CondVar cv;
    size_t remaining SIGILFS_GUARDED_BY(mu);
  } batch;
  {
    MutexLock done_lock(batch.mu);
    batch.remaining = parts - 1;
  }
  {
    MutexLock lock(mu_);
    for (size_t p = 1; p < parts; ++p) {
      const size_t begin = p * chunk, end = std::min(n, begin + chunk);
      tasks_.push_back({[&fn, &batch, begin, end] {
                          if (begin < end) fn(begin, end);
                          MutexLock done_lock(batch.mu);
                          if (--batch.remaining == 0) batch.cv.NotifyOne();
                        },
                        &batch});
    }
  }
  cv_.NotifyAll();
  fn(0, std::min(n, chunk));
  // Then run the chunks no worker has taken yet. The workers may be busy with other batches,
  // or be waiting themselves: a batch started from inside a worker would otherwise wait for a
  // free worker that never comes.
  for (;;) {
    std::function<void()> mine;
    {
      MutexLock lock(mu_);
      auto it = std::find_if(tasks_.begin(), tasks_.end(),
                             [&batch](const Task& t) { return t.batch == &batch; });
      if (it == tasks_.end()) break;
      mine = std::move(it->fn);
      tasks_.erase(it);
    }
    mine();
  }
  MutexLock done_lock(batch.mu);
  while (batch.remaining != 0) batch.cv.Wait(batch.mu);
}

void ThreadPool::Post(std::function<void()> fn, const void* owner) {
  StartOnce();
  if (threads_.empty() || started_pid_ != ::getpid()) {
    fn();
    return;
  }
  {
    MutexLock lock(mu_);
    tasks_.push_back({std::move(fn), nullptr, owner});
  }
  cv_.NotifyOne();
}

void ThreadPool::HelpUntil(const std::function<bool()>& done, const void* owner) {
  MutexLock lock(mu_);
  for (;;) {
    if (done()) return;
    auto it = std::find_if(tasks_.begin(), tasks_.end(), [owner](const Task& t) {
      return t.batch != nullptr || (owner != nullptr && t.owner == owner);
    });
    if (it == tasks_.end()) {
      cv_.Wait(mu_);
      continue;
    }
    std::function<void()> task = std::move(it->fn);
    tasks_.erase(it);
    lock.Unlock();
    task();
    lock.Lock();
  }
}

void ThreadPool::Wake() {
  { MutexLock lock(mu_); }  // a helper between its check and its wait sees the change
  cv_.NotifyAll();
}

void ThreadPool::ForEachDynamic(size_t n, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  const size_t helpers = std::min<size_t>(workers_, n > 0 ? n - 1 : 0);
  ParallelFor(helpers + 1, 1, [&](size_t, size_t) {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  });
}

}  // namespace sigilfs::core
