// File: track/stack_capture.cc
//
// The walk: CaptureStack reads its own pc, rsp and rbp, then steps frame by frame with the rules of
// frame_rules.h (one table probe and two or three loads a frame). A frame whose rule is unsupported,
// or a step that would leave the stack (a CFA not above the previous one, or more than 64 MiB
// above it), hands the whole capture to libunwind's unw_backtrace, which copes with signal frames and
// CFI expressions, and whose answer is the reference the tests hold the walk to.
#include "track/stack_capture.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <atomic>

#include "track/frame_rules.h"

namespace poolscope {
namespace track {

namespace {

constexpr uintptr_t kMaxFrameBytes = uintptr_t{1} << 26;
std::atomic<uint64_t> g_fallbacks{0};

// True when addr lies in (sp, sp + kMaxFrameBytes]: one compare.
inline bool Above(uintptr_t sp, uintptr_t addr) { return addr - sp - 1 < kMaxFrameBytes; }

// True when rbp points into the stack at or above sp (it may equal sp in a frame without locals).
inline bool RbpOnStack(uintptr_t sp, uintptr_t bp) { return bp - sp < kMaxFrameBytes; }

inline uintptr_t Load(uintptr_t addr) { return *reinterpret_cast<const uintptr_t*>(addr); }

// Steps from the frame at (pc, sp, bp) and writes up to `n` return addresses into `out`. Returns
// how many it wrote, or -1 when libunwind must answer instead. Reads other frames' return-address
// and saved-rbp slots, which the sanitizers would take for out-of-bounds stack reads.
__attribute__((no_sanitize("address", "thread"))) int Walk(uintptr_t pc, uintptr_t sp, uintptr_t bp,
                                                            uintptr_t* out, int n) {
  uintptr_t key = pc;
  for (int i = 0; i < n; ++i) {
    const FrameRule r = LookupFrameRule(key);
    uintptr_t cfa;
    if (__builtin_expect((r & (kRuleKindMask | kRuleCfaOnRbp)) == kRuleStep, 1)) {
      cfa = sp + RuleCfaOffset(r);
    } else {
      if (RuleKind(r) != kRuleStep) return RuleKind(r) == kRuleOutermost ? i : -1;
      // rbp + offset, or the word there.
      if (!RbpOnStack(sp, bp)) return -1;
      cfa = bp + RuleCfaOffset(r);
      if (r & kRuleCfaDeref) {
        if (!Above(sp, cfa)) return -1;
        cfa = Load(cfa);
      }
    }
    if (!Above(sp, cfa)) return -1;
    const uintptr_t ra = Load(cfa - 8);
    const uint64_t rbp_rule = RuleRbp(r);
    if (rbp_rule == kRbpAtCfa) {
      bp = Load(cfa + RuleRbpOffset(r));
    } else if (rbp_rule == kRbpAtRbp) {
      if (!RbpOnStack(sp, bp)) return -1;
      bp = Load(bp + RuleRbpOffset(r));
    }
    sp = cfa;
    if (ra == 0) return i;
    out[i] = ra;
    key = ra - 1;
  }
  return n;
}

// Clamps the arguments of CaptureStack and CaptureStackWithLibunwind; false when there is nothing to
// capture.
bool ClampArgs(int* max_depth, int* skip) {
  if (*max_depth <= 0) return false;
  if (*max_depth > kMaxCaptureDepth) *max_depth = kMaxCaptureDepth;
  if (*skip < 0) *skip = 0;
  if (*skip > kMaxCaptureSkip) *skip = kMaxCaptureSkip;
  return true;
}

// unw_backtrace's buffer starts with the return address into this function's caller: two frames of
// our own (this one and CaptureStack or CaptureStackWithLibunwind), dropped along with `skip` more.
__attribute__((noinline)) int CaptureWithLibunwind(uintptr_t* pcs, int max_depth, int skip) {
  constexpr int kOwnFrames = 2;  // CaptureWithLibunwind, CaptureStack
  const int drop = kOwnFrames + skip;
  void* buf[kMaxCaptureDepth + kMaxCaptureSkip + kOwnFrames];
  int n = unw_backtrace(buf, max_depth + drop);
  int out = 0;
  for (int i = drop; i < n; ++i) pcs[out++] = reinterpret_cast<uintptr_t>(buf[i]);
  __asm__ volatile("" ::: "memory");
  return out;
}

}  // namespace

__attribute__((noinline)) int CaptureStack(uintptr_t* pcs, int max_depth, int skip) {
  if (!ClampArgs(&max_depth, &skip)) return 0;
  uintptr_t pc, sp, bp;
  // One asm, so the pc is the address of the instruction that reads rsp: the rule found for that
  // pc describes exactly this rsp.
  __asm__ volatile(
      "lea 0(%%rip), %0\n\t"
      "mov %%rsp, %1\n\t"
      "mov %%rbp, %2"
      : "=&r"(pc), "=&r"(sp), "=&r"(bp));
  uintptr_t buf[kMaxCaptureDepth + kMaxCaptureSkip];
  int n = Walk(pc, sp, bp, buf, max_depth + skip);
  if (n >= 0) {
    n = n > skip ? n - skip : 0;
    for (int i = 0; i < n; ++i) pcs[i] = buf[skip + i];
  } else {
    g_fallbacks.fetch_add(1, std::memory_order_relaxed);
    n = CaptureWithLibunwind(pcs, max_depth, skip);
  }
  // Keeps this frame a real one: the walk and the copy must not be folded into the caller.
  __asm__ volatile("" ::: "memory");
  return n;
}

__attribute__((noinline)) int CaptureStackWithLibunwind(uintptr_t* pcs, int max_depth, int skip) {
  if (!ClampArgs(&max_depth, &skip)) return 0;
  int n = CaptureWithLibunwind(pcs, max_depth, skip);
  __asm__ volatile("" ::: "memory");
  return n;
}

uint64_t CaptureFallbacks() { return g_fallbacks.load(std::memory_order_relaxed); }

void WarmUpStackCapture() {
  uintptr_t pcs[4];
  CaptureStack(pcs, 4, 0);
  CaptureStackWithLibunwind(pcs, 4, 0);
}

}  // namespace track
}  // namespace poolscope
