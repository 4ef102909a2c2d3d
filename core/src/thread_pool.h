// Internal: a fixed pool of worker threads for splitting one batch (pages to seal or open)
// across cores; the calling thread works on the batch too.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "sigilfs/mutex.h"

namespace sigilfs::core {

// Thread-safety: safe for concurrent access without external synchronization.
class ThreadPool {
 public:
  // `workers` helper threads (0: none; every batch then runs on the caller). They start on first
  // use, not here: a daemon that forks after building its volume (fuse_daemonize) would
  // otherwise lose them, since threads do not survive fork(). In a process forked after they
  // started, batches run on the calling thread.
  explicit ThreadPool(unsigned workers);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Calls fn(begin, end) over disjoint chunks covering [0, n), at least `min_chunk` items per
  // chunk, and returns when all have run.
  void ParallelFor(size_t n, size_t min_chunk, const std::function<void(size_t, size_t)>& fn);

  // Calls fn(i) for every i in [0, n), handing items out one at a time to whichever thread is
  // free (the caller included): for pieces of uneven cost such as "seal, then write".
  void ForEachDynamic(size_t n, const std::function<void(size_t)>& fn);

  // Runs fn on a worker some time later, and returns at once (runs it here if there are no
  // workers in this process, none asked for or none could be started). Work queued this way
  // finishes before the pool is destroyed. `owner` marks work that HelpUntil(…, owner) may run;
  // null: only workers run it.
  void Post(std::function<void()> fn, const void* owner = nullptr);

  // Runs queued work on the calling thread until done() holds: a thread that would wait for
  // posted work helps with it instead, running the work `owner` posted and the chunks of any
  // batch (such as the ones that work starts), not other posted work, which might wait for
  // locks of its own. Whatever makes done() true must call Wake() afterwards. The caller must
  // hold no lock that such work may take.
  void HelpUntil(const std::function<bool()>& done, const void* owner);
  void Wake();

 private:
  void WorkerLoop();
  void StartOnce();

  Mutex mu_;
  CondVar cv_;
  struct Task {
    std::function<void()> fn;
    const void* batch;            // the ParallelFor call it belongs to, which may take it back
    const void* owner = nullptr;  // posted work: who may help with it (see HelpUntil)
  };
  std::deque<Task> tasks_ SIGILFS_GUARDED_BY(mu_);
  bool stopping_ SIGILFS_GUARDED_BY(mu_) = false;
  const unsigned workers_;
  std::once_flag started_;
  pid_t started_pid_ = 0;  // the process the workers live in
  std::vector<std::thread> threads_;
};

}  // namespace sigilfs::core
