// File: track/stack_capture_test_chain.cc
//
// The writes to g_sink after each call keep the calls from becoming tail calls (which would drop the
// caller's frame) and make each function's code distinct (so -O2's identical code folding keeps four).
#include "track/stack_capture_test_chain.h"

#include <atomic>

#include "track/stack_capture.h"

namespace poolscope {
namespace track {
namespace testchain {

std::atomic<int> g_sink{0};

__attribute__((noinline)) int ChainD(uintptr_t* pcs, int max_depth, int skip) {
  int n = CaptureStack(pcs, max_depth, skip);
  g_sink.fetch_add(4, std::memory_order_relaxed);
  return n;
}

__attribute__((noinline)) int ChainC(uintptr_t* pcs, int max_depth, int skip) {
  int n = ChainD(pcs, max_depth, skip);
  g_sink.fetch_add(3, std::memory_order_relaxed);
  return n;
}

__attribute__((noinline)) int ChainB(uintptr_t* pcs, int max_depth, int skip) {
  int n = ChainC(pcs, max_depth, skip);
  g_sink.fetch_add(2, std::memory_order_relaxed);
  return n;
}

__attribute__((noinline)) int ChainA(uintptr_t* pcs, int max_depth, int skip) {
  int n = ChainB(pcs, max_depth, skip);
  g_sink.fetch_add(1, std::memory_order_relaxed);
  return n;
}

}  // namespace testchain
}  // namespace track
}  // namespace poolscope
