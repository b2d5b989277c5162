// Clang's thread-safety annotations (-Wthread-safety), as LevelDB and Abseil use them: a member
// marked GUARDED_BY(mu_) may only be touched with mu_ held, a function marked REQUIRES(mu_) only
// be called with it held, and Clang checks both at compile time. Other compilers see nothing.
// The capability they name must be annotated itself: use cohort::Mutex (common/mutex.h), not
// std::mutex, which libstdc++ leaves unannotated.
#pragma once

#if defined(__clang__)
#define COHORT_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define COHORT_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(name) COHORT_THREAD_ANNOTATION(capability(name))
#define SCOPED_CAPABILITY COHORT_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(mu) COHORT_THREAD_ANNOTATION(guarded_by(mu))
#define PT_GUARDED_BY(mu) COHORT_THREAD_ANNOTATION(pt_guarded_by(mu))
#define REQUIRES(...) COHORT_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) COHORT_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) COHORT_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) COHORT_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(mu) COHORT_THREAD_ANNOTATION(assert_capability(mu))
#define NO_THREAD_SAFETY_ANALYSIS COHORT_THREAD_ANNOTATION(no_thread_safety_analysis)
