// File: track/stack_capture.h
//
// The return addresses of the calling thread's stack, for the allocation path (called from inside
// malloc with poolscope's reentrancy guard held).
//
// Guarantees: correct on code built without frame pointers (Debian's own -O2 -fomit-frame-pointer
// binaries); does not call malloc nor take a lock that malloc takes (see WarmUpStackCapture for the one
// caveat); async-signal-safe as far as libunwind's local unwinder is (it blocks signals
// around its own caches).
//
// The unwinder, and why: our own walk over .eh_frame call frame information (frame_rules.h), with
// nongnu libunwind's `unw_backtrace` (Debian libunwind-dev, `-lunwind`; heaptrack's unwinder) behind
// it for the frames the walk does not understand (signal frames, unusual CFI). Both unwind through
// CFI, so frame pointers are not needed. The walk exists for speed: per allocation, unw_backtrace
// cost about 1,900 instructions on python3's 16-frame stacks (cursor set-up plus ~110 a frame in its
// per-thread frame cache); the walk costs a table probe and two or three loads a frame, and its rule
// table is shared by all threads, so a new thread does not pay the CFI interpretation again.
// The alternatives:
//  - glibc `backtrace()` unwinds with libgcc_s, which it dlopens on first use in the process (dlopen
//    mallocs and takes the loader lock): unusable inside malloc unless warmed up first, and its unwinder
//    takes libgcc's own mutex on every call.
//  - walking frame pointers (rbp chains) costs a few ns per frame but returns garbage or stops after one
//    frame in code built with -fomit-frame-pointer, which is all of Debian's libraries: stacks would
//    lose exactly the frames a leak report needs.
//  - libdw's dwfl_thread_getframes needs a Dwfl with every module reported (mallocs, opens files).
// Neither the walk nor libunwind calls malloc: stack_capture_nomalloc_test counts every
// malloc/calloc/realloc/free the process makes (by defining them in the test binary, which
// interposes them for libunwind.so too) during 10,000 captures on 8 threads, cold threads included,
// and finds none.
//
// Cost: `bazel run -c opt //track:track_benchmark -- --benchmark_filter=Capture` compares the walk
// with unw_backtrace on the same 16-frame stack.
//
// Integration notes:
//  - Call WarmUpStackCapture() once from the preload constructor, before the first tracked allocation.
//    libunwind creates its per-thread cache key (pthread_key_create) on first use. glibc's
//    pthread_setspecific callocs a second-level array for key indexes >= 32, so if libunwind's key were
//    created late (after the program made 32 keys), every new thread's first capture would call calloc
//    (harmless under the reentrancy guard, but a real allocation). Created early, its index is small.
//  - Memory: per thread that captures, libunwind mmaps a frame cache (2^14 slots, ~256 KiB virtual,
//    touched as it fills; grows x4 when half full) and frees it from a pthread key destructor at thread
//    exit (which takes a libunwind mutex; no malloc). None of it goes through malloc.
//  - Linking: -lunwind is Debian's libunwind.so.8, which also exports the _Unwind_* API; preloaded,
//    it can take C++ exception unwinding over from libgcc_s for objects resolved after it (heaptrack's
//    preload library has the same property). Debian's libunwind.a is not PIC, so static linking with
//    hidden symbols is not an option without rebuilding it.
//  - Returned pcs are return addresses: the call instruction is at pc - 1. The symbolizer's
//    SymbolizeReturnAddress does that subtraction.
//  - Frames of code loaded with dlopen are unwound like any other. After dlclose, call
//    InvalidateFrameRules() (frame_rules.h): another object may later be mapped where the closed one
//    was. Frames of JIT code without CFI go to libunwind, which ends the stack there.
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
int CaptureStack(uintptr_t* pcs, int max_depth, int skip);

// The same capture, always through libunwind (the reference the walk is tested against).
int CaptureStackWithLibunwind(uintptr_t* pcs, int max_depth, int skip);

// How many captures the walk handed to libunwind since the process started.
uint64_t CaptureFallbacks();

// Initialises libunwind by capturing one stack. Call once at start-up; safe to call again.
void WarmUpStackCapture();

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_STACK_CAPTURE_H_
