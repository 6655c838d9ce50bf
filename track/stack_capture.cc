// File: track/stack_capture.cc
//
// The walk: CaptureStack reads its own pc, rsp and rbp, then steps frame by frame with the rules of
// frame_rules.h (one table probe and two or three loads a frame). A frame whose rule is unsupported,
// or a step that would leave the stack (a CFA not above the previous one, or more than 64 MiB
// above it), hands the whole capture to GCC's unwinder (_Unwind_Backtrace), which copes with signal
// frames and CFI expressions, and whose answer is the reference the tests hold the walk to.
#include "track/stack_capture.h"

#include <unwind.h>

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

enum StepFlags : uint32_t {
  kStepUsesBp = 1,     // the step read rbp (CFA on rbp, or the caller's rbp saved at rbp + k)
  kStepOutermost = 2,  // the rule said the stack ends here (nothing read)
  kStepNoReuse = 4,    // the CFA itself was read from memory: never taken from a memo
};

enum class StepResult { kFrame, kEnd, kFail };

// One step by the rules from the frame at (key, sp, bp) to its caller: updates the three, sets *ra
// and, when kRecord, describes the step in *rec (flags, bp_addr, ra; the caller fills the state).
// kEnd: the stack ends (outermost frame, or a zero return address); kFail: the unwinder must answer.
// Reads other frames' return-address and saved-rbp slots, which the sanitizers would take for
// out-of-bounds stack reads.
template <bool kRecord>
__attribute__((always_inline, no_sanitize("address", "thread"))) inline StepResult StepFrame(
    uintptr_t* key, uintptr_t* sp, uintptr_t* bp, uintptr_t* ra_out, CaptureMemo::Step* rec) {
  const FrameRule r = LookupFrameRule(*key);
  uint32_t flags = 0;
  uintptr_t cfa;
  if (__builtin_expect((r & (kRuleKindMask | kRuleCfaOnRbp)) == kRuleStep, 1)) {
    cfa = *sp + RuleCfaOffset(r);
  } else {
    if (RuleKind(r) != kRuleStep) {
      if (RuleKind(r) != kRuleOutermost) return StepResult::kFail;
      if (kRecord) {
        rec->flags = kStepOutermost;
        rec->ra = 0;
        rec->bp_addr = 0;
      }
      return StepResult::kEnd;
    }
    // rbp + offset, or the word there.
    if (!RbpOnStack(*sp, *bp)) return StepResult::kFail;
    flags = kStepUsesBp;
    cfa = *bp + RuleCfaOffset(r);
    if (r & kRuleCfaDeref) {
      if (!Above(*sp, cfa)) return StepResult::kFail;
      cfa = Load(cfa);
      flags |= kStepNoReuse;
    }
  }
  if (!Above(*sp, cfa)) return StepResult::kFail;
  const uintptr_t ra = Load(cfa - 8);
  const uint64_t rbp_rule = RuleRbp(r);
  uintptr_t bp_addr = 0;
  if (rbp_rule == kRbpAtCfa) {
    bp_addr = cfa + RuleRbpOffset(r);
    *bp = Load(bp_addr);
  } else if (rbp_rule == kRbpAtRbp) {
    if (!RbpOnStack(*sp, *bp)) return StepResult::kFail;
    flags |= kStepUsesBp;
    bp_addr = *bp + RuleRbpOffset(r);
    *bp = Load(bp_addr);
  }
  *sp = cfa;
  if (kRecord) {
    rec->flags = flags;
    rec->ra = ra;
    rec->bp_addr = bp_addr;
  }
  *ra_out = ra;
  if (ra == 0) return StepResult::kEnd;
  *key = ra - 1;
  return StepResult::kFrame;
}

// Steps from the frame at (pc, sp, bp) and writes up to `n` return addresses into `out`. Returns
// how many it wrote, or -1 when the unwinder must answer instead.
__attribute__((no_sanitize("address", "thread"))) int Walk(uintptr_t pc, uintptr_t sp, uintptr_t bp,
                                                            uintptr_t* out, int n) {
  uintptr_t key = pc;
  for (int i = 0; i < n; ++i) {
    uintptr_t ra;
    switch (StepFrame<false>(&key, &sp, &bp, &ra, nullptr)) {
      case StepResult::kFrame: out[i] = ra; break;
      case StepResult::kEnd: return i;
      case StepResult::kFail: return -1;
    }
  }
  return n;
}

using Step = CaptureMemo::Step;

// rbp may hold anything, a heap pointer too; kept as is in a thread's memo, it would make a leaked
// block look reachable to a conservative leak checker below us (memcheck scans TLS). Kept with its
// top bit flipped, it is never a valid address.
inline uintptr_t HideWord(uintptr_t v) { return v ^ (uintptr_t{1} << 63); }
constexpr int kMemoSteps = CaptureMemo::kSteps;

enum class StepCheck { kHolds, kEnds, kChanged };

// Whether memo step `s` (whose next state is `next`) still holds from rbp *bp: it re-reads the word its
// rule read (the return address at the next state's sp - 8) and, where the step read rbp, compares rbp
// too. kHolds: its answer, s.ra, is the walk's; kEnds: it holds and ends the stack (an outermost rule,
// or a zero return address); kChanged: the rules must answer. Updates *bp as the step did.
__attribute__((always_inline, no_sanitize("address", "thread"))) inline StepCheck CheckStep(
    const CaptureMemo::Step& s, const CaptureMemo::Step& next, uintptr_t* bp) {
  if (__builtin_expect(s.flags != 0, 0)) {
    if (s.flags & kStepOutermost) return StepCheck::kEnds;
    if (s.flags & kStepNoReuse) return StepCheck::kChanged;
    // kStepUsesBp, and rbp is not what the step was recorded with.
    if (s.bp != HideWord(*bp)) return StepCheck::kChanged;
  }
  // Where the rules would read the return address: this step's CFA - 8, the next sp - 8.
  const uintptr_t ra = Load(next.sp - 8);
  if (ra != s.ra) return StepCheck::kChanged;
  // The caller's rbp changes nothing of this step's answer; a later step that reads rbp compares it
  // with the rbp it was recorded with.
  if (s.bp_addr != 0) *bp = Load(s.bp_addr);
  return ra == 0 ? StepCheck::kEnds : StepCheck::kHolds;
}

// Takes steps from the memo's ring while they hold (CheckStep), from old step `j` (which starts at the
// current state) up to old step `stop`. Writes the return addresses to `out`, updates `*bp`, sets
// `*ended` when a taken step ended the stack. Returns the old index it stopped at: old(result) is the
// state after the last step taken.
__attribute__((always_inline, no_sanitize("address", "thread"))) inline int TakeRun(
    CaptureMemo::Step* ring, uint32_t base, int j, int stop, uintptr_t* bp, uintptr_t* out, bool* ended) {
  constexpr uint32_t kMask = CaptureMemo::kRing - 1;
  const CaptureMemo::Step* next = &ring[(base + static_cast<uint32_t>(j)) & kMask];
  int k = j;
  for (; k < stop; ++k) {
    const CaptureMemo::Step& s = *next;
    next = next + 1 == ring + CaptureMemo::kRing ? ring : next + 1;
    const StepCheck c = CheckStep(s, *next, bp);
    if (c == StepCheck::kChanged) break;
    if (c == StepCheck::kEnds) {
      ++k;
      *ended = true;
      break;
    }
    out[k - j] = s.ra;
  }
  return k;
}

// Walk, with a memo: takes every step it can from `memo`, then records this walk in it. The steps of
// the new walk come in runs, each either taken from the memo (a run of old steps, checked word by
// word) or walked by the rules (written to `fresh` at their new index). At the end the longest
// reused run stays where it is in the ring (the memo's base moves instead), other runs are copied,
// and the fresh steps are written: in the steady case (the program's outer frames unchanged under
// new inner ones) only the fresh steps are written. The steadiest case, the memo's steps from its
// first on answering the whole capture, returns before any of that (about 60 instructions and the
// checks, where the general bookkeeping costs some 250).
__attribute__((no_sanitize("address", "thread"))) int WalkMemo(uintptr_t pc, uintptr_t sp, uintptr_t bp,
                                                                uintptr_t* out, int want,
                                                                CaptureMemo* memo) {
  constexpr uint32_t kMask = CaptureMemo::kRing - 1;
  Step* const ring = memo->step;
  const uint32_t base = memo->base;
  auto old = [ring, base](int k) -> Step& { return ring[(base + static_cast<uint32_t>(k)) & kMask]; };
  const uint32_t generation = FrameRulesGeneration();
  const int old_n = memo->generation == generation ? static_cast<int>(memo->n) : 0;
  const int cap = want < kMemoSteps ? want : kMemoSteps;  // steps the memo may answer
  // The first run, when the walk starts where the memo's first step did.
  int first_run = 0;
  bool ended = false;
  if (old_n > 0 && old(0).sp == sp && old(0).key == pc) {
    first_run = TakeRun(ring, base, 0, cap < old_n ? cap : old_n, &bp, out, &ended);
    if (ended || first_run == want) {
      // Every step came from the memo, in place: nothing moves and nothing is written (the state
      // after the last step is old(steps) already; only a step's own rbp is ever compared, and a
      // stack that ended keeps no steps past its end).
      const int steps = first_run;
      memo->same = memo->last_steps == static_cast<uint32_t>(steps);
      memo->last_steps = static_cast<uint32_t>(steps);
      memo->n = static_cast<uint32_t>(ended ? steps : old_n);
      memo->reused = static_cast<uint32_t>(steps);
      return ended ? steps - 1 : steps;
    }
  }
  Step fresh[kMemoSteps + 1];
  uint64_t fresh_mask = 0;  // indices written in `fresh`
  struct Run {
    int at, from, len;
  } runs[kMemoSteps];
  int nruns = 0;
  uintptr_t key = pc;
  int t = 0;  // steps taken (each but a final kEnd step gives one frame)
  int j = 0;  // memo cursor: the first old step whose sp is not below ours
  bool ended_in_run = false;  // the step that ended the stack was taken from the memo
  bool try_memo = true;
  int extra = 0;  // frames walked past what the memo keeps
  if (first_run > 0) {
    // It stopped at a step that no longer holds, or where the memo ends: on by the rules from there.
    runs[nruns++] = Run{0, 0, first_run};
    t = j = first_run;
    sp = old(t).sp;
    key = old(t).key;
    try_memo = false;
  }
  while (t < want && !ended) {
    if (try_memo) {
      while (j < old_n && old(j).sp < sp) ++j;
      if (j < old_n && old(j).sp == sp && old(j).key == key) {
        const int start = t;
        // Steps this run may take: what the memo holds from j, what is wanted, what the memo keeps.
        int limit = cap - t;
        if (limit > old_n - j) limit = old_n - j;
        const int k = TakeRun(ring, base, j, j + limit, &bp, out + start, &ended);
        ended_in_run = ended;
        t = start + (k - j);
        sp = old(k).sp;  // old(k) is the state after the last step taken (or the same state, if none)
        key = old(k).key;
        if (k > j) runs[nruns++] = Run{start, j, k - j};
        j = k;
        try_memo = false;  // old(k) (if any) did not match from this state: step by the rules
        continue;
      }
    }
    try_memo = true;
    if (t == kMemoSteps) {  // the memo keeps no more: the rest by the plain walk
      extra = Walk(key, sp, bp, out + t, want - t);
      if (extra < 0) return -1;
      break;
    }
    Step* rec = &fresh[t];
    rec->key = key;
    rec->sp = sp;
    rec->bp = HideWord(bp);
    fresh_mask |= uint64_t{1} << t;
    uintptr_t ra;
    const StepResult r = StepFrame<true>(&key, &sp, &bp, &ra, rec);
    if (r == StepResult::kFail) return -1;
    ++t;
    if (r == StepResult::kEnd) {
      ended = true;
    } else {
      out[t - 1] = ra;
    }
  }
  const int steps = t;
  // A walk that ended did so with a step that gave no frame (a zero return address, an outermost rule).
  const int frames = t - (ended ? 1 : 0) + extra;

  // The longest run stays in place: the new base maps its new index to its old slot.
  int longest = -1;
  for (int r = 0; r < nruns; ++r) {
    if (longest < 0 || runs[r].len > runs[longest].len) longest = r;
  }
  uint32_t new_base = base;
  int keep = steps;  // steps the memo holds afterwards
  bool tail_needed = true;
  int reused = 0;
  if (longest >= 0) {
    const Run& l = runs[longest];
    new_base = (base + static_cast<uint32_t>(l.from - l.at)) & kMask;
    // Runs that move are copied out first (their slots may be written below).
    for (int r = 0; r < nruns; ++r) {
      reused += runs[r].len;
      if (runs[r].from - runs[r].at == l.from - l.at) continue;
      for (int i = 0; i < runs[r].len; ++i) fresh[runs[r].at + i] = old(runs[r].from + i);
      fresh_mask |= ((uint64_t{1} << runs[r].len) - 1) << runs[r].at;
    }
    // When the walk stopped inside the last run (it had all the frames it wanted), the old steps past
    // it stay where they are: they are checked like any other when used. When the memo's own last
    // step ended the stack, the state after it is in place already.
    const Run& last = runs[nruns - 1];
    if (nruns - 1 == longest && extra == 0 && last.at + last.len == steps) {
      if (ended_in_run) {
        tail_needed = false;
      } else if (!ended && last.from + last.len < old_n) {
        keep = old_n - last.from + last.at;
        if (keep > kMemoSteps) keep = kMemoSteps;
        tail_needed = false;
      }
    }
  }
  for (uint64_t m = fresh_mask; m != 0; m &= m - 1) {
    const int i = __builtin_ctzll(m);
    ring[(new_base + static_cast<uint32_t>(i)) & kMask] = fresh[i];
  }
  // The state after the last step, which the next capture's check of that step reads. Written
  // straight where it goes: copying a just-written Step with wider loads would stall on store
  // forwarding.
  if (tail_needed) {
    ring[(new_base + static_cast<uint32_t>(steps)) & kMask] = Step{key, sp, HideWord(bp), 0, 0, 0};
  }
  // (A memo of another generation had no steps to reuse: nruns is 0 then.)
  memo->same = fresh_mask == 0 && nruns == 1 && runs[0].from == 0 && runs[0].at == 0 && extra == 0 &&
               memo->last_steps == static_cast<uint32_t>(steps);
  memo->last_steps = static_cast<uint32_t>(steps);
  memo->base = new_base;
  memo->n = static_cast<uint32_t>(keep);
  memo->generation = generation;
  memo->reused = static_cast<uint32_t>(reused);
  return frames;
}

// Walk or WalkMemo from the frame at (pc, sp, bp), as the memo allows (one in use by the capture a
// signal handler interrupted is left alone); a failed walk leaves the memo empty.
inline int WalkFrom(uintptr_t pc, uintptr_t sp, uintptr_t bp, uintptr_t* out, int want, CaptureMemo* memo) {
  if (memo == nullptr || memo->busy != 0) return Walk(pc, sp, bp, out, want);
  memo->busy = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const int n = WalkMemo(pc, sp, bp, out, want, memo);
  if (n < 0) {
    memo->n = 0;
    memo->same = 0;
    memo->last_steps = 0;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  memo->busy = 0;
  return n;
}

// Clamps the arguments of CaptureStack and CaptureStackWithUnwinder; false when there is nothing to
// capture.
bool ClampArgs(int* max_depth, int* skip) {
  if (*max_depth <= 0) return false;
  if (*max_depth > kMaxCaptureDepth) *max_depth = kMaxCaptureDepth;
  if (*skip < 0) *skip = 0;
  if (*skip > kMaxCaptureSkip) *skip = kMaxCaptureSkip;
  return true;
}

struct UnwindBuffer {
  void** pcs;
  int n, max;
};

_Unwind_Reason_Code CollectFrame(struct _Unwind_Context* ctx, void* arg) {
  auto* b = static_cast<UnwindBuffer*>(arg);
  const uintptr_t ip = _Unwind_GetIP(ctx);
  if (ip == 0) return _URC_END_OF_STACK;
  b->pcs[b->n++] = reinterpret_cast<void*>(ip);
  return b->n == b->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

// _Unwind_Backtrace's first frame is the caller of _Unwind_Backtrace, so the buffer starts with two
// frames of our own (this one and CaptureStack or CaptureStackWithUnwinder), dropped along with
// `skip` more.
__attribute__((noinline)) int CaptureWithUnwinder(uintptr_t* pcs, int max_depth, int skip) {
  constexpr int kOwnFrames = 2;  // CaptureWithUnwinder, CaptureStack
  const int drop = kOwnFrames + skip;
  void* buf[kMaxCaptureDepth + kMaxCaptureSkip + kOwnFrames];
  UnwindBuffer b{buf, 0, max_depth + drop};
  _Unwind_Backtrace(CollectFrame, &b);
  const int n = b.n;
  int out = 0;
  for (int i = drop; i < n; ++i) pcs[out++] = reinterpret_cast<uintptr_t>(buf[i]);
  __asm__ volatile("" ::: "memory");
  return out;
}

}  // namespace

__attribute__((noinline)) int CaptureStack(uintptr_t* pcs, int max_depth, int skip, CaptureMemo* memo) {
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
  int n = WalkFrom(pc, sp, bp, buf, max_depth + skip, memo);
  if (n >= 0) {
    n = n > skip ? n - skip : 0;
    for (int i = 0; i < n; ++i) pcs[i] = buf[skip + i];
  } else {
    g_fallbacks.fetch_add(1, std::memory_order_relaxed);
    n = CaptureWithUnwinder(pcs, max_depth, skip);
  }
  // Keeps this frame a real one: the walk and the copy must not be folded into the caller.
  __asm__ volatile("" ::: "memory");
  return n;
}

int CaptureStackFrom(const StartFrame& from, uintptr_t* pcs, int max_depth, CaptureMemo* memo) {
  if (max_depth <= 0) return 0;
  if (max_depth > kMaxCaptureDepth) max_depth = kMaxCaptureDepth;
  pcs[0] = from.ra;
  if (max_depth == 1 || from.ra == 0) {
    // Nothing walked: the memo cannot say this capture repeated its last one.
    if (memo != nullptr && memo->busy == 0) {
      memo->same = 0;
      memo->reused = 0;
    }
    return 1;
  }
  // The state after the return: the rule is the one of the call instruction, at ra - 1.
  const int n = WalkFrom(from.ra - 1, from.sp, from.bp, pcs + 1, max_depth - 1, memo);
  return n < 0 ? -1 : n + 1;
}

__attribute__((no_sanitize("address", "thread"))) bool RepeatsLastCapture(const StartFrame& from, int max_depth,
                                                                           const CaptureMemo& memo) {
  const int steps = static_cast<int>(memo.last_steps);
  if (memo.busy != 0 || steps == 0 || steps > static_cast<int>(memo.n) || max_depth - 1 > kMemoSteps ||
      memo.generation != FrameRulesGeneration()) {
    return false;
  }
  constexpr uint32_t kMask = CaptureMemo::kRing - 1;
  const uint32_t base = memo.base & kMask;
  const Step* s = &memo.step[base];
  if (s->sp != from.sp || s->key != from.ra - 1) return false;
  // The same steps, each reading what it read: the same frames, ending where they ended (by the
  // stack's end, or at max_depth). CheckStep as TakeRun, without the copy of the frames; the steps are
  // in one piece of the ring unless they wrap around its end.
  if (base + static_cast<uint32_t>(steps) >= CaptureMemo::kRing) {
    uintptr_t bp = from.bp;
    bool ended = false;
    uintptr_t scratch[kMemoSteps];
    return TakeRun(const_cast<Step*>(memo.step), memo.base, 0, steps, &bp, scratch, &ended) == steps;
  }
  uintptr_t bp = from.bp;
  for (const Step* const end = s + steps; s != end; ++s) {
    const StepCheck c = CheckStep(s[0], s[1], &bp);
    if (c == StepCheck::kChanged) return false;
    if (c == StepCheck::kEnds) return s + 1 == end;
  }
  return true;
}

__attribute__((noinline)) int CaptureStackWithUnwinder(uintptr_t* pcs, int max_depth, int skip) {
  if (!ClampArgs(&max_depth, &skip)) return 0;
  int n = CaptureWithUnwinder(pcs, max_depth, skip);
  __asm__ volatile("" ::: "memory");
  return n;
}

uint64_t CaptureFallbacks() { return g_fallbacks.load(std::memory_order_relaxed); }

void WarmUpStackCapture() {
  uintptr_t pcs[4];
  CaptureStack(pcs, 4, 0);
  CaptureStackWithUnwinder(pcs, 4, 0);
}

}  // namespace track
}  // namespace poolscope
