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
// The unwinder, and why: nongnu libunwind's `unw_backtrace` (Debian libunwind-dev, `-lunwind`; heaptrack
// uses it the same way). It unwinds through .eh_frame CFI, so frame pointers are not needed, and on
// x86-64 it keeps a per-thread cache of frame shapes keyed by pc ("fast trace"), so a repeated stack costs
// a hash probe per frame instead of a CFI interpretation. Its memory comes from its own mmap pools, never
// malloc: stack_capture_nomalloc_test counts every malloc/calloc/realloc/free the process makes (by
// defining them in the test binary, which interposes them for libunwind.so too; `-Wl,--wrap=malloc` would
// only see calls from objects in the test's own link) during 10,000 captures on 8 threads, cold
// threads included, and finds none. The alternatives:
//  - glibc `backtrace()` unwinds with libgcc_s, which it dlopens on first use in the process (dlopen
//    mallocs and takes the loader lock): unusable inside malloc unless warmed up first, and its unwinder
//    takes libgcc's own mutex on every call. Once warm it is no faster (135 ns vs 144 ns CPU below).
//  - walking frame pointers (rbp chains) costs a few ns per frame but returns garbage or stops after one
//    frame in code built with -fomit-frame-pointer, which is all of Debian's libraries: stacks would
//    lose exactly the frames a leak report needs.
//  - libdw's dwfl_thread_getframes needs a Dwfl with every module reported (mallocs, opens files).
//
// Cost (`bazel run -c opt //track:track_benchmark -- --benchmark_filter=Capture`, Debian 12, GCC 12,
// 2-vCPU VM): 144 ns CPU (200 ns wall) for a 16-frame stack once the thread's frame cache knows the
// pcs, about 9 ns per frame. A thread's first capture of a new pc interprets its CFI (a few us).
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
//  - Frames of code loaded with dlopen are unwound like any other; frames of JIT code without CFI end
//    the stack early (libunwind stops at the first frame it cannot unwind).
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

// Initialises libunwind by capturing one stack. Call once at start-up; safe to call again.
void WarmUpStackCapture();

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_STACK_CAPTURE_H_
