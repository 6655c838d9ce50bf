// File: track/stack_capture.cc
//
// unw_backtrace's buffer starts with the return address into the function that called it, that is
// a pc inside CaptureStack itself: one frame of our own, dropped along with `skip` more.
#include "track/stack_capture.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

namespace poolscope {
namespace track {

namespace {
constexpr int kOwnFrames = 1;  // CaptureStack
}  // namespace

__attribute__((noinline)) int CaptureStack(uintptr_t* pcs, int max_depth, int skip) {
  if (max_depth <= 0) return 0;
  if (max_depth > kMaxCaptureDepth) max_depth = kMaxCaptureDepth;
  if (skip < 0) skip = 0;
  if (skip > kMaxCaptureSkip) skip = kMaxCaptureSkip;
  const int drop = kOwnFrames + skip;
  void* buf[kMaxCaptureDepth + kMaxCaptureSkip + kOwnFrames];
  int n = unw_backtrace(buf, max_depth + drop);
  int out = 0;
  for (int i = drop; i < n; ++i) pcs[out++] = reinterpret_cast<uintptr_t>(buf[i]);
  // Keeps this frame a real one (no tail call into unw_backtrace could drop it anyway, but the copy
  // loop must not be hoisted into the caller).
  __asm__ volatile("" ::: "memory");
  return out;
}

void WarmUpStackCapture() {
  uintptr_t pcs[4];
  CaptureStack(pcs, 4, 0);
}

}  // namespace track
}  // namespace poolscope
