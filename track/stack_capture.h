// File: track/stack_capture.h
//
// The return addresses of the calling thread's stack, for the allocation path (called from inside
// malloc with poolscope's reentrancy guard held).
//
// Guarantees: correct on code built without frame pointers (Debian's own -O2 -fomit-frame-pointer
// binaries); does not call malloc nor take a lock that malloc takes; async-signal-safe as far as
// GCC's unwinder is (it takes no lock while no object registered its frames by hand).
//
// The unwinder, and why: our own walk over .eh_frame call frame information (frame_rules.h), with
// GCC's unwinder (`_Unwind_Backtrace`, <unwind.h>) behind it for the frames the walk does not
// understand (signal frames, unusual CFI). Both unwind through CFI, so frame pointers are not needed.
// The walk exists for speed: a general unwinder interprets each frame's CFI again on every capture
// (about 1,900 instructions on python3's 16-frame stacks with nongnu libunwind's cached
// unw_backtrace); the walk costs a table probe and two or three loads a frame, and its rule table is
// shared by all threads, so a new thread does not pay the CFI interpretation again.
// The alternatives:
//  - glibc `backtrace()` unwinds with libgcc_s, which it dlopens on first use in the process (dlopen
//    mallocs and takes the loader lock): unusable inside malloc unless warmed up first.
//  - nongnu libunwind (`unw_backtrace`, heaptrack's unwinder): Debian ships it as a shared library
//    only (its libunwind.a is not PIC), so it would be one more object mapped into every process.
//  - walking frame pointers (rbp chains) costs a few ns per frame but returns garbage or stops after one
//    frame in code built with -fomit-frame-pointer, which is all of Debian's libraries: stacks would
//    lose exactly the frames a leak report needs.
//  - libdw's dwfl_thread_getframes needs a Dwfl with every module reported (mallocs, opens files).
// Neither the walk nor the unwinder calls malloc: stack_capture_nomalloc_test counts every
// malloc/calloc/realloc/free the process makes (by defining them in the test binary, which
// interposes them for libgcc_s.so too) during 10,000 captures on 8 threads, cold threads included,
// and finds none.
//
// Cost: `bazel run -c opt //track:track_benchmark -- --benchmark_filter=Capture` compares the walk
// with _Unwind_Backtrace on the same 16-frame stack.
//
// Integration notes:
//  - Call WarmUpStackCapture() once from the preload constructor, before the first tracked allocation
//    (the unwinder's one-time set-up runs there rather than inside the first tracked malloc).
//  - Linking: the unwinder is libgcc's. The preload library links it statically (libgcc_eh.a, with
//    -static-libgcc) and keeps its symbols local (interpose/exports.lds), so it adds no shared object
//    to the process and takes no C++ exception unwinding over from libgcc_s; other binaries use
//    libgcc_s.so's. It finds a pc's FDE through glibc's _dl_find_object, without the loader lock.
//  - Returned pcs are return addresses: the call instruction is at pc - 1. The symbolizer's
//    SymbolizeReturnAddress does that subtraction.
//  - Frames of code loaded with dlopen are unwound like any other. After dlclose, call
//    InvalidateFrameRules() (frame_rules.h): another object may later be mapped where the closed one
//    was. Frames of JIT code without CFI go to the unwinder, which ends the stack there.
//  - The walk's rule table is 2 MiB of .bss, touched only as distinct pcs arrive (16 bytes each).
//
// Thread-safety: any thread, any time, concurrently.
#ifndef POOLSCOPE_TRACK_STACK_CAPTURE_H_
#define POOLSCOPE_TRACK_STACK_CAPTURE_H_

#include <cstdint>

namespace poolscope {
namespace track {

// The most frames CaptureStack returns, and the most it will skip.
constexpr int kMaxCaptureDepth = 64;
constexpr int kMaxCaptureSkip = 32;

// Writes up to `max_depth` (clamped to kMaxCaptureDepth) return addresses into `pcs`, innermost
// first, and returns how many. With skip == 0, pcs[0] is the return address into the function that
// called CaptureStack; each unit of `skip` (clamped to kMaxCaptureSkip) drops one more frame (the
// preload library passes the frames of its own entry points). Returns 0 when max_depth <= 0.
//
// With a memo (the calling thread's own, see CaptureMemo below), the capture reuses what it says of
// frames that have not changed since the last capture with it, and updates it; the answer is exactly
// the one without.
struct CaptureMemo;
int CaptureStack(uintptr_t* pcs, int max_depth, int skip, CaptureMemo* memo = nullptr);

// A frame of the calling thread's stack, given by the state a return into it restores: `ra`, the return
// address; `sp`, rsp after the return (the callee's CFA); `bp`, rbp at the call (callee-saved, so what
// the caller will find). The preload library takes it from its entry point's frame, so that a capture
// starts at the program's call instead of walking up through its own frames (five of them on malloc's
// tracked path, each a step of the walk).
struct StartFrame {
  uintptr_t ra, sp, bp;
};
// Writes up to `max_depth` (clamped to kMaxCaptureDepth) return addresses into `pcs`: `from.ra` first,
// then those of the frames above it, exactly as CaptureStack would list them after from.ra. Returns
// how many, or -1 when the walk cannot go on from `from` by the rules (the unwinder cannot start from a
// given state): the caller captures with CaptureStack instead. The memo is used as CaptureStack uses it.
int CaptureStackFrom(const StartFrame& from, uintptr_t* pcs, int max_depth, CaptureMemo* memo = nullptr);
// True when CaptureStackFrom(from, pcs, max_depth, memo) would now return exactly what the last capture
// with `memo` returned, provided that one was CaptureStackFrom with the same max_depth (the caller
// knows): the memo's steps from its first start at `from` and all still hold. Reads the stack words
// the memo's steps read, writes nothing: for a caller that keeps what it made of the last capture
// (its stack id), the repeated stack costs these checks alone. False whenever it cannot tell (a memo
// in use, of another rules generation, or a capture deeper than the memo keeps).
bool RepeatsLastCapture(const StartFrame& from, int max_depth, const CaptureMemo& memo);

// A thread's memo of its last capture, so that the next capture on that thread reads again only what
// may have changed. Each step of a walk is a function of the registers it starts from (pc, rsp, rbp)
// and of the words it reads (the return address at CFA-8, the caller's saved rbp); the memo keeps,
// for each step, that state, where it read and what it found. A capture that reaches a state the
// memo holds (same rsp, same pc) re-reads those words: while each still holds what it held, the
// step's answer is the memo's, with no rule lookup and no address arithmetic; at the first word that
// changed (a frame returned and another call took its place), the walk goes on by the rules from
// there, and may meet the memo again further up. A frame that returned and was replaced by an
// identical one reads back identical words and gives the identical answer, so a reused step is
// exactly the step the rules would take; the rules themselves are reused only while
// FrameRulesGeneration() is the memo's. Steps whose CFA is read from memory (realigned stacks) are
// never reused; a capture that went to the unwinder leaves the memo empty.
//
// Why: a program allocates from the same few dozen outer frames over and over (main, the event
// loop, the interpreter's dispatch), and re-checking a frame is two independent loads, where walking
// it is a chain of dependent ones (pc -> rule -> CFA -> return address -> next pc). See
// track_benchmark's BM_CaptureStack16Memo.
//
// Zero-initialised is empty: a `__thread` CaptureMemo needs no set-up. Not thread-safe: one per
// thread. A capture that finds the memo in use (a signal handler that interrupted one) walks without it.
// About 3 KiB.
struct CaptureMemo {
  static constexpr int kSteps = 32;
  // Steps sit in a ring: step i of the last capture is step[(base + i) % kRing], so that when a
  // capture keeps the old outer frames under more or fewer new inner ones, only `base` moves.
  static constexpr int kRing = 64;
  struct Step {
    uintptr_t key;      // the pc whose rule the step applied (a return address - 1)
    uintptr_t sp, bp;   // rsp and rbp (its top bit flipped: never a pointer) on entering the step
    uintptr_t ra;       // what it read at the next step's sp - 8; 0: the stack ended there
    uintptr_t bp_addr;  // where it read the next step's rbp; 0: rbp passed through unchanged
    uintptr_t flags;    // kStep* in stack_capture.cc (a whole word: steps are copied word by word)
  };
  uint32_t n;           // steps recorded; step[n] holds only the state after the last one
  uint32_t generation;  // FrameRulesGeneration() when they were recorded
  uint32_t busy;        // a capture on this thread is using the memo
  uint32_t reused;      // steps the last capture took from the memo (tests and benchmarks)
  // 1 when the last capture took every step from the memo, in place, and as many steps as the one
  // before it: with the same max_depth and skip, it returned exactly what the one before returned.
  uint32_t same;
  uint32_t last_steps;  // steps of the last capture
  uint32_t base;
  Step step[kRing];
};

// The same capture, always through _Unwind_Backtrace (the reference the walk is tested against).
int CaptureStackWithUnwinder(uintptr_t* pcs, int max_depth, int skip);

// How many captures the walk handed to the unwinder since the process started.
uint64_t CaptureFallbacks();

// Captures one stack with the walk and one with the unwinder, so that their one-time set-up is done. Call once at start-up; safe to call again.
void WarmUpStackCapture();

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_STACK_CAPTURE_H_
