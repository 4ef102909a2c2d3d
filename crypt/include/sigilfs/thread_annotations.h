// Clang thread-safety annotations (-Wthread-safety): lock rules the compiler checks.
#pragma once

// Under Clang each macro marks a capability (a mutex), what it guards, or what a function
// needs held; the analysis then rejects an access or a call without the lock. Other compilers
// see nothing. Prefixed so that a program using the library and another annotated library
// (Abseil's GUARDED_BY, for one) can include both.
#if defined(__clang__)
#define SIGILFS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SIGILFS_THREAD_ANNOTATION(x)
#endif

#define SIGILFS_CAPABILITY(name) SIGILFS_THREAD_ANNOTATION(capability(name))
#define SIGILFS_SCOPED_CAPABILITY SIGILFS_THREAD_ANNOTATION(scoped_lockable)
#define SIGILFS_GUARDED_BY(mu) SIGILFS_THREAD_ANNOTATION(guarded_by(mu))
#define SIGILFS_PT_GUARDED_BY(mu) SIGILFS_THREAD_ANNOTATION(pt_guarded_by(mu))
#define SIGILFS_ACQUIRED_BEFORE(...) SIGILFS_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define SIGILFS_ACQUIRED_AFTER(...) SIGILFS_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define SIGILFS_REQUIRES(...) SIGILFS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define SIGILFS_REQUIRES_SHARED(...) \
  SIGILFS_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define SIGILFS_ACQUIRE(...) SIGILFS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define SIGILFS_ACQUIRE_SHARED(...) \
  SIGILFS_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define SIGILFS_RELEASE(...) SIGILFS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define SIGILFS_RELEASE_SHARED(...) \
  SIGILFS_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define SIGILFS_RELEASE_GENERIC(...) \
  SIGILFS_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define SIGILFS_TRY_ACQUIRE(...) SIGILFS_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define SIGILFS_EXCLUDES(...) SIGILFS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define SIGILFS_ASSERT_CAPABILITY(x) SIGILFS_THREAD_ANNOTATION(assert_capability(x))
#define SIGILFS_ASSERT_SHARED_CAPABILITY(x) SIGILFS_THREAD_ANNOTATION(assert_shared_capability(x))
#define SIGILFS_RETURN_CAPABILITY(x) SIGILFS_THREAD_ANNOTATION(lock_returned(x))
#define SIGILFS_NO_THREAD_SAFETY_ANALYSIS SIGILFS_THREAD_ANNOTATION(no_thread_safety_analysis)
