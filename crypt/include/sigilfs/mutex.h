// Mutexes, scoped locks and condition variables that carry Clang's thread-safety annotations.
#pragma once

#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "sigilfs/thread_annotations.h"

namespace sigilfs {

// std::mutex as a capability: members annotated SIGILFS_GUARDED_BY(mu) can then only be touched
// with mu held, and functions annotated SIGILFS_REQUIRES(mu) only be called so.
class SIGILFS_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() SIGILFS_ACQUIRE() { mu_.lock(); }
  void Unlock() SIGILFS_RELEASE() { mu_.unlock(); }
  bool TryLock() SIGILFS_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the checker the caller holds it (a lambda run under the lock, which the checker
  // looks at on its own); checks nothing at run time.
  void AssertHeld() const SIGILFS_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// std::shared_mutex as a capability, held exclusively (Lock) or shared (LockShared).
class SIGILFS_CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() SIGILFS_ACQUIRE() { mu_.lock(); }
  void Unlock() SIGILFS_RELEASE() { mu_.unlock(); }
  void LockShared() SIGILFS_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() SIGILFS_RELEASE_SHARED() { mu_.unlock_shared(); }
  void AssertHeld() const SIGILFS_ASSERT_CAPABILITY(this) {}  // as Mutex::AssertHeld

 private:
  friend class SharedCondVar;
  std::shared_mutex mu_;
};

// Holds a Mutex for its scope; Unlock and Lock let go of it and take it again inside.
class SIGILFS_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) SIGILFS_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  // Takes the lock only if free; owns_lock() says whether it did.
  MutexLock(Mutex& mu, std::try_to_lock_t) SIGILFS_TRY_ACQUIRE(true, mu)
      : mu_(mu), held_(mu.TryLock()) {}
  ~MutexLock() SIGILFS_RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() SIGILFS_RELEASE() {
    mu_.Unlock();
    held_ = false;
  }
  void Lock() SIGILFS_ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }
  bool owns_lock() const { return held_; }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// Holds a SharedMutex exclusively for its scope.
class SIGILFS_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) SIGILFS_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~WriterLock() SIGILFS_RELEASE() { mu_.Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds a SharedMutex shared for its scope.
class SIGILFS_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) SIGILFS_ACQUIRE_SHARED(mu) : mu_(mu) { mu_.LockShared(); }
  ~ReaderLock() SIGILFS_RELEASE() { mu_.UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

// A condition variable over a Mutex the caller holds (std::condition_variable underneath).
class CondVar {
 public:
  // Lets go of `mu` until notified (or spuriously woken), then takes it again.
  void Wait(Mutex& mu) SIGILFS_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: the caller's
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A condition variable over a SharedMutex the caller holds exclusively.
class SharedCondVar {
 public:
  void Wait(SharedMutex& mu) SIGILFS_REQUIRES(mu) {
    std::unique_lock<std::shared_mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable_any cv_;
};

}  // namespace sigilfs
