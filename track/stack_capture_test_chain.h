// File: track/stack_capture_test_chain.h
//
// ChainA -> ChainB -> ChainC -> ChainD -> CaptureStack, each noinline and built with -O2
// -fomit-frame-pointer (see BUILD), for the stack capture tests; and frames of the shapes an unwinder
// must read differently (alloca, a realigned stack, libc's qsort calling back), each ending in
// CaptureBoth, which captures the same stack with the walk and with the unwinder (_Unwind_Backtrace).
#ifndef POOLSCOPE_TRACK_STACK_CAPTURE_TEST_CHAIN_H_
#define POOLSCOPE_TRACK_STACK_CAPTURE_TEST_CHAIN_H_

#include <cstdint>

#include "track/stack_capture.h"

namespace poolscope {
namespace track {
namespace testchain {

int ChainA(uintptr_t* pcs, int max_depth, int skip);
int ChainB(uintptr_t* pcs, int max_depth, int skip);
int ChainC(uintptr_t* pcs, int max_depth, int skip);
int ChainD(uintptr_t* pcs, int max_depth, int skip);

// One stack seen by both unwinders. walk[0] and unw[0] are return addresses into CaptureBoth from
// its two call sites; from index 1 on they must agree.
struct BothCaptures {
  uintptr_t walk[64];
  int n_walk;
  uintptr_t unw[64];
  int n_unw;
};
void CaptureBoth(BothCaptures* out);

// `depth` nested frames, each with an alloca of a size the compiler cannot know (so the frame's CFA
// is on rbp), then CaptureBoth.
int AllocaFrames(int depth, BothCaptures* out);

// A frame whose stack pointer is realigned through a copy of the incoming one (a CFA expression),
// then CaptureBoth.
int Realigned(BothCaptures* out);

// qsort (libc, no frame pointers) calling a comparator that calls CaptureBoth once.
int ThroughQsort(BothCaptures* out);

// The same stack captured with a memo and without one (from two call sites: [0] differs, from
// index 1 on they must agree).
struct MemoCaptures {
  uintptr_t memo[64];
  int n_memo;
  uintptr_t plain[64];
  int n_plain;
  bool repeats;  // BranchyFrom: what RepeatsLastCapture said just before the capture from the caller
};

// `depth` nested frames, level i calling the next from one of four call sites chosen by bits 2i..2i+1
// of `path` (two of them through frames with an alloca of a path-dependent size, whose CFA is on
// rbp), then both captures, each with `max_depth` and `skip`.
int Branchy(int depth, uint64_t path, int max_depth, int skip, CaptureMemo* memo, MemoCaptures* out);
// The same frames, then a capture from the frame that called the last one (CaptureStackFrom, with
// `memo`) and the plain CaptureStack's frames above that call site: all must agree, index 0 too.
int BranchyFrom(int depth, uint64_t path, int max_depth, CaptureMemo* memo, MemoCaptures* out);

}  // namespace testchain
}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_STACK_CAPTURE_TEST_CHAIN_H_
