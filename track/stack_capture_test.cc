#include "track/stack_capture.h"

#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "track/stack_capture_test_chain.h"
#include "track/symbolizer.h"
#include "track/test_debug_info.h"

namespace poolscope {
namespace track {
namespace {

using testchain::ChainA;

std::string FunctionAt(Symbolizer* s, uintptr_t ra) { return s->SymbolizeReturnAddress(ra).function; }

TEST(StackCaptureTest, ChainWithoutFramePointersComesOutInOrder) {
  uintptr_t pcs[kMaxCaptureDepth];
  int n = ChainA(pcs, kMaxCaptureDepth, 0);
  ASSERT_GE(n, 5);
  Symbolizer sym;
  const bool lines = ObjectHasLineTables(reinterpret_cast<void*>(&ChainA));
  if (!lines) std::cout << "the chain's object has no .debug_line (--strip=sometimes): file:line not checked\n";
  const char* expected[] = {"testchain::ChainD(", "testchain::ChainC(", "testchain::ChainB(",
                            "testchain::ChainA(", "StackCaptureTest_ChainWithoutFramePointersComesOutInOrder_Test::TestBody"};
  for (int i = 0; i < 5; ++i) {
    SymbolizedFrame f = sym.SymbolizeReturnAddress(pcs[i]);
    EXPECT_NE(f.function.find(expected[i]), std::string::npos) << "frame " << i << ": " << f.function;
    if (i < 4 && lines) {
      EXPECT_NE(f.file.find("track/stack_capture_test_chain.cc"), std::string::npos) << f.file;
    }
  }
  // The stack goes on to main through gtest.
  bool saw_main = false;
  for (int i = 5; i < n; ++i) saw_main |= FunctionAt(&sym, pcs[i]) == "main";
  EXPECT_TRUE(saw_main);
}

TEST(StackCaptureTest, SkipDropsInnerFrames) {
  uintptr_t pcs[8];
  Symbolizer sym;
  int n = ChainA(pcs, 8, 2);
  ASSERT_GE(n, 3);
  EXPECT_NE(FunctionAt(&sym, pcs[0]).find("testchain::ChainB("), std::string::npos) << FunctionAt(&sym, pcs[0]);
  EXPECT_NE(FunctionAt(&sym, pcs[1]).find("testchain::ChainA("), std::string::npos) << FunctionAt(&sym, pcs[1]);
}

TEST(StackCaptureTest, DepthIsClamped) {
  uintptr_t pcs[kMaxCaptureDepth];
  EXPECT_EQ(CaptureStack(pcs, 0, 0), 0);
  EXPECT_EQ(CaptureStack(pcs, -3, 0), 0);
  EXPECT_EQ(ChainA(pcs, 2, 0), 2);
  uintptr_t before[3];
  ASSERT_EQ(ChainA(before, 3, 0), 3);
  ASSERT_EQ(ChainA(pcs, 3, 0), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pcs[i], before[i]);
}

__attribute__((noinline)) int Recurse(int depth, uintptr_t* pcs, int max_depth) {
  if (depth == 0) return CaptureStack(pcs, max_depth, 0);
  int n = Recurse(depth - 1, pcs, max_depth);
  __asm__ volatile("" ::: "memory");
  return n;
}

TEST(StackCaptureTest, DeepStackFillsTheBufferAndNoMore) {
  uintptr_t pcs[kMaxCaptureDepth + 8];
  pcs[kMaxCaptureDepth] = 0xdead;
  EXPECT_EQ(Recurse(100, pcs, kMaxCaptureDepth + 8), kMaxCaptureDepth);
  EXPECT_EQ(pcs[kMaxCaptureDepth], 0xdeadu);
  // 64 frames of Recurse: every one the same return address, past the first.
  for (int i = 2; i < kMaxCaptureDepth; ++i) EXPECT_EQ(pcs[i], pcs[1]);
}

#if defined(__SANITIZE_THREAD__)
constexpr bool kParkThreads = true;
#else
constexpr bool kParkThreads = false;
#endif

TEST(StackCaptureTest, ThreadsCaptureConcurrently) {
  // Under TSan the workers never exit: libunwind frees a thread's frame cache from a pthread key
  // destructor that takes a mutex, and TSan crashes on a lock taken after it has torn the thread
  // down (a TSan teardown limitation, not a race). Parked, they are still checked while they run.
  static uintptr_t reference[4];
  ASSERT_EQ(ChainA(reference, 4, 0), 4);
  std::vector<std::thread> threads;
  static std::vector<int> bad;
  bad.assign(8, 0);
  std::atomic<int> finished{0};
  static std::mutex park;
  if (kParkThreads) park.lock();  // never unlocked: the workers wait on it until the process exits
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &finished] {
      for (int i = 0; i < 2000; ++i) {
        uintptr_t pcs[16];
        int n = ChainA(pcs, 16, 0);
        if (n < 5) ++bad[t];
        // ChainD..ChainA are the same in every thread; the frame below ChainA differs (the lambda).
        for (int k = 0; k < 4 && k < n; ++k) bad[t] += pcs[k] != reference[k];
      }
      finished.fetch_add(1);
      if (kParkThreads) std::lock_guard<std::mutex> wait_forever(park);
    });
  }
  if (kParkThreads) {
    while (finished.load() < 8) std::this_thread::yield();
    for (auto& th : threads) th.detach();
  } else {
    for (auto& th : threads) th.join();
  }
  for (int t = 0; t < 8; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace track
}  // namespace poolscope
