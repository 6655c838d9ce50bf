// File: track/stack_capture_test_chain.cc
//
// The writes to g_sink after each call keep the calls from becoming tail calls (which would drop the
// caller's frame) and make each function's code distinct (so -O2's identical code folding keeps four).
#include "track/stack_capture_test_chain.h"

#include <alloca.h>
#include <stdlib.h>
#include <string.h>

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

__attribute__((noinline)) void CaptureBoth(BothCaptures* out) {
  out->n_walk = CaptureStack(out->walk, 64, 0);
  g_sink.fetch_add(5, std::memory_order_relaxed);
  out->n_unw = CaptureStackWithUnwinder(out->unw, 64, 0);
  g_sink.fetch_add(6, std::memory_order_relaxed);
}

__attribute__((noinline)) int AllocaFrames(int depth, BothCaptures* out) {
  const size_t n = 16 + static_cast<size_t>(g_sink.load(std::memory_order_relaxed) & 7) * 8 + depth;
  char* scratch = static_cast<char*>(alloca(n));
  memset(scratch, depth, n);
  __asm__ volatile("" : : "r"(scratch) : "memory");
  if (depth == 0) {
    CaptureBoth(out);
  } else {
    AllocaFrames(depth - 1, out);
  }
  return scratch[n - 1] + g_sink.fetch_add(1, std::memory_order_relaxed);
}

// A 64-byte aligned local together with an alloca makes GCC realign through a saved copy of the
// incoming stack pointer: the CFA becomes an expression (the word at rbp - 8), rbp is saved at rbp + 0.
__attribute__((noinline)) int Realigned(BothCaptures* out) {
  alignas(64) char block[128];
  const size_t n = 8 + static_cast<size_t>(g_sink.load(std::memory_order_relaxed) & 7);
  char* extra = static_cast<char*>(alloca(n));
  memset(block, 1, sizeof(block));
  memset(extra, 2, n);
  __asm__ volatile("" : : "r"(block), "r"(extra) : "memory");
  CaptureBoth(out);
  return block[5] + extra[n - 1] + g_sink.fetch_add(1, std::memory_order_relaxed);
}

namespace {
BothCaptures* g_qsort_out;
int CompareAndCapture(const void* a, const void* b) {
  if (g_qsort_out != nullptr) {
    CaptureBoth(g_qsort_out);
    g_qsort_out = nullptr;
  }
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}
}  // namespace

__attribute__((noinline)) int ThroughQsort(BothCaptures* out) {
  int values[4] = {4, 3, 2, 1};
  g_qsort_out = out;
  qsort(values, 4, sizeof(int), CompareAndCapture);
  return values[0] + g_sink.fetch_add(1, std::memory_order_relaxed);
}

namespace {
struct BranchyArgs {
  int max_depth;
  int skip;  // -1: capture from the caller's frame
  CaptureMemo* memo;
  MemoCaptures* out;
};

// The caller's frame as the preload library's slow paths find it (ProgramFrame in interpose/shim_internal.h), captured
// from there with the memo, and plainly by CaptureStack, whose frame 0 is the call site in here.
__attribute__((noinline)) void CaptureFromAndPlain(const BranchyArgs& a) {
  StartFrame f;
  f.ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  f.sp = reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa());
  f.bp = *static_cast<const uintptr_t*>(__builtin_frame_address(0));
  a.out->repeats = a.memo != nullptr && RepeatsLastCapture(f, a.max_depth, *a.memo);
  a.out->n_memo = CaptureStackFrom(f, a.out->memo, a.max_depth, a.memo);
  g_sink.fetch_add(9, std::memory_order_relaxed);
  uintptr_t plain[kMaxCaptureDepth + 1];
  const int n = CaptureStack(plain, a.max_depth + 1, 0);
  a.out->n_plain = n > 0 ? n - 1 : 0;
  for (int i = 1; i < n; ++i) a.out->plain[i - 1] = plain[i];
  g_sink.fetch_add(10, std::memory_order_relaxed);
}

__attribute__((noinline)) void CaptureMemoAndPlain(const BranchyArgs& a) {
  a.out->n_memo = CaptureStack(a.out->memo, a.max_depth, a.skip, a.memo);
  g_sink.fetch_add(7, std::memory_order_relaxed);
  a.out->n_plain = CaptureStack(a.out->plain, a.max_depth, a.skip);
  g_sink.fetch_add(8, std::memory_order_relaxed);
}

int BranchyLevel(int depth, uint64_t path, const BranchyArgs& a);

__attribute__((noinline)) int WithAlloca(int depth, uint64_t path, const BranchyArgs& a) {
  const size_t n = 8 + (path & 0x30);
  char* scratch = static_cast<char*>(alloca(n));
  memset(scratch, depth, n);
  __asm__ volatile("" : : "r"(scratch) : "memory");
  int r = BranchyLevel(depth, path, a);
  return r + scratch[n - 1];
}

__attribute__((noinline)) int BranchyLevel(int depth, uint64_t path, const BranchyArgs& a) {
  if (depth == 0) {
    if (a.skip < 0) {
      CaptureFromAndPlain(a);
    } else {
      CaptureMemoAndPlain(a);
    }
    return g_sink.fetch_add(1, std::memory_order_relaxed);
  }
  int r;
  switch (path & 3) {
    case 0:
      r = BranchyLevel(depth - 1, path >> 2, a);
      g_sink.fetch_add(2, std::memory_order_relaxed);
      break;
    case 1:
      r = BranchyLevel(depth - 1, path >> 2, a);
      g_sink.fetch_add(3, std::memory_order_relaxed);
      break;
    case 2:
      r = WithAlloca(depth - 1, path >> 2, a);
      g_sink.fetch_add(4, std::memory_order_relaxed);
      break;
    default:
      r = WithAlloca(depth - 1, (path >> 2) ^ 0x10, a);
      g_sink.fetch_add(5, std::memory_order_relaxed);
      break;
  }
  return r;
}
}  // namespace

int Branchy(int depth, uint64_t path, int max_depth, int skip, CaptureMemo* memo, MemoCaptures* out) {
  return BranchyLevel(depth, path, BranchyArgs{max_depth, skip, memo, out});
}

int BranchyFrom(int depth, uint64_t path, int max_depth, CaptureMemo* memo, MemoCaptures* out) {
  return BranchyLevel(depth, path, BranchyArgs{max_depth, -1, memo, out});
}

}  // namespace testchain
}  // namespace track
}  // namespace poolscope
