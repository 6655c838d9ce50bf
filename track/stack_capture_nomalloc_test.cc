// Checks that CaptureStack never calls the allocator: this binary defines malloc and its family,
// which interposes them for every object in the process (libgcc_s.so and glibc included), and counts
// the calls made on a thread while it is inside CaptureStack. `-Wl,--wrap=malloc` would not do: it
// rewrites only the references in this link's own objects, not libgcc_s.so's.
#include <errno.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "track/stack_capture.h"
#include "track/stack_capture_test_chain.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define POOLSCOPE_SANITIZER 1  // the sanitizer owns malloc: nothing to count with
#else
#define POOLSCOPE_SANITIZER 0

namespace {
__thread int t_counting;
std::atomic<long> g_calls{0};
inline void Count() {
  if (t_counting) g_calls.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);

void* malloc(size_t n) {
  Count();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  Count();
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  Count();
  return __libc_realloc(p, n);
}
void free(void* p) {
  Count();
  __libc_free(p);
}
void* memalign(size_t a, size_t n) {
  Count();
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  Count();
  return __libc_memalign(a, n);
}
void* valloc(size_t n) {
  Count();
  return __libc_memalign(sysconf(_SC_PAGESIZE), n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  Count();
  void* p = __libc_memalign(a, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
}  // extern "C"
#endif

namespace poolscope {
namespace track {
namespace {

int CountedCapture(uintptr_t* pcs, int depth) {
#if !POOLSCOPE_SANITIZER
  t_counting = 1;
#endif
  int n = testchain::ChainA(pcs, depth, 0);
#if !POOLSCOPE_SANITIZER
  t_counting = 0;
#endif
  return n;
}

// Must run first: the process's first capture initialises the unwinder.
TEST(StackCaptureNoMallocTest, FirstCaptureInTheProcess) {
  if (POOLSCOPE_SANITIZER) GTEST_SKIP() << "malloc belongs to the sanitizer";
#if !POOLSCOPE_SANITIZER
  // The interposition works: a malloc while counting is seen.
  t_counting = 1;
  free(malloc(16));
  t_counting = 0;
  ASSERT_EQ(g_calls.exchange(0), 2);

  uintptr_t pcs[16];
  EXPECT_GE(CountedCapture(pcs, 16), 5);
  EXPECT_EQ(g_calls.load(), 0);
#endif
}

TEST(StackCaptureNoMallocTest, ColdThreadsAndManyCaptures) {
  if (POOLSCOPE_SANITIZER) GTEST_SKIP() << "malloc belongs to the sanitizer";
#if !POOLSCOPE_SANITIZER
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t] {
      uintptr_t pcs[kMaxCaptureDepth];
      for (int i = 0; i < 1250; ++i) CountedCapture(pcs, 1 + (i + t) % kMaxCaptureDepth);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(g_calls.load(), 0);
#endif
}

}  // namespace
}  // namespace track
}  // namespace poolscope
