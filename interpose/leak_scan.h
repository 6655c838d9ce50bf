// File: interpose/leak_scan.h
//
// The reachability scan at exit (reachability=1, with track=1): classifies every live logical block as
// memcheck does with --leak-check=full --leak-check-heuristics=none (track/reachability.h), over the
// roots a program has: the writable mappings of the process that hold no allocator's block (data and
// bss of every object, the program's own mmaps, thread stacks from the stack pointer up where it is
// known, whole otherwise), never poolscope's own memory (its mappings, its data and bss, its thread-local
// state), which points at blocks and must not make them reachable. Then a second classification of what
// a detector below poolscope sees with pooling on and no pool descriptions: the real blocks (unpooled
// blocks and pools), with poolscope's own memory scanned as such a detector scans it.
//
// Threads still running are not stopped: their stacks are scanned whole (threads_not_stopped says how
// many). The stacks glibc keeps cached for threads that ended are left out, as a detector that follows
// the stack pointer leaves them out.
//
// Thread-safety: ScanAtExit runs once, from the thread writing the exit report, under its guard.
#ifndef POOLSCOPE_INTERPOSE_LEAK_SCAN_H_
#define POOLSCOPE_INTERPOSE_LEAK_SCAN_H_

#include <cstddef>
#include <cstdint>

#include "track/reachability.h"
#include "track/stack_capture.h"

namespace poolscope {
namespace track {
class ProcMaps;
}  // namespace track

// A live thread of the registry: where its poolscope thread-local state lies, and its thread pointer.
struct ScanThread {
  int tid;
  uintptr_t state;  // its ThreadState
};

// What the shim tells the scan (it owns the threads, the pools and the exit).
struct ScanInputs {
  const ScanThread* threads;
  int nthreads;
  uintptr_t exit_sp;     // the exiting thread's stack pointer where poolscope's exit work began
  uintptr_t self_state;  // the exiting thread's ThreadState (each thread's static TLS block of
                         // libpoolscope.so and thread pointer lie at the same offsets from its own)
  // Pools: calls pool_fn(real_block, real_bytes, base, pool_bytes, explicit_arena, arg) for each, then
  // block_fn(block, size, arg) for each live block in it, in address order. Pools come in the order
  // they were made, in `parts` parts of about equal size: the call walks part `part` (0-based). The
  // parts may be walked at once while no other thread of the program runs.
  void (*for_each_pool)(void (*pool_fn)(uintptr_t real, size_t real_bytes, uintptr_t base, size_t pool_bytes,
                                        bool explicit_arena, void* arg),
                        void (*block_fn)(uintptr_t block, uint64_t size, void* arg), void* arg, int part,
                        int parts);
  // How many pools part `part` of `parts` of the walk above may find at most while no other thread
  // of the program runs (the pool list's entries there, free ones included). Null: not known.
  size_t (*pools_listed)(int part, int parts);
  // The program's callee-saved registers at its call into exit() (6 words), or null when it did not
  // call it (a return from main restores its caller's): roots of the program's views, as the exit
  // path's frames that save them are for a detector below.
  const uintptr_t* exit_registers;
  // The pool list's chunks: calls fn(begin, end, arg) for each. The detector's view does not read
  // them: what they hold of the heap is each pool's real block's start, and the view takes every pool
  // as reachable. Null: read as they are.
  void (*for_each_meta_chunk)(void (*fn)(uintptr_t begin, uintptr_t end, void* arg), void* arg);
  // How many pooled blocks the counters say are live: the room the program's view's array starts
  // with (a wrong figure costs time, not truth).
  size_t pooled_blocks_hint;
  // CLOCK_MONOTONIC ns past which the scan gives up (scanned false), for a signal's report; 0: none.
  uint64_t deadline_ns;
};

struct ScanOutcome {
  bool scanned;
  const char* not_scanned_why;  // when !scanned
  track::ReachabilityResult program;   // the program's logical blocks
  track::ReachabilityResult detector;  // the real blocks, as a detector below sees them
  track::LeakTotal hidden_in_pools;    // the program's lost blocks that sit in pools
  // LeakSanitizer below poolscope (its roots: loaded objects' globals, thread stacks and TLS; no other
  // memory; any pointer into a block keeps it): the real blocks it reports leaked, and of those the
  // ones another leaked block points into (indirect) and the rest (direct); and the program's blocks
  // it would call leaked that sit in pools, where it cannot see them.
  bool lsan_scanned;
  const char* lsan_not_scanned_why;
  track::LeakTotal lsan_leaked, lsan_direct, lsan_indirect, lsan_hidden_in_pools;
  uint64_t roots_bytes;
  uint64_t roots_read_bytes;  // of every view's roots, each byte once
  uint64_t unreadable_bytes;  // of the program's blocks, read as zeros: not readable (a PROT_NONE page)
  uint64_t scan_ms;
  int threads_stopped;
  int threads_not_stopped;
  bool parallel;  // the detector's view was classified on a second thread
};

// Where the exiting thread's live stack begins when the process ends, as a detector that follows the
// stack pointer sees it: the stack pointer of the program's call into libc's exit() (a return from
// main calls it as well), found by walking up from `from` (the frame of poolscope's exit hook); else
// the stack pointer of the first frame of libc's exit path; from.sp when the walk cannot tell.
uintptr_t ExitPathSp(const track::StartFrame& from);

// Looks up, at load, what the scan needs and must not allocate for at exit (libc's exit()).
void PrepareScan();

// Scans once; later calls return the first outcome.
const ScanOutcome& ScanAtExit(const ScanInputs& in);
// Gives back the scan's memory once the report is written: it holds every block's address, which a
// detector below poolscope would otherwise read as pointers to the blocks. ScannedKind then answers
// still reachable; LastScan's totals stay.
void ReleaseScan();
// The outcome of the scan, or nullptr before it ran.
const ScanOutcome* LastScan();
// The mappings the scan read (/proc/self/maps), until ReleaseScan; nullptr when it read none.
const track::ProcMaps* ScanMaps();
// After ScanAtExit: the kind of the live block that starts at p (still reachable when the scan did not
// see it, as for an arena's blocks, which have no address of their own).
track::LeakKind ScannedKind(uintptr_t p);

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_LEAK_SCAN_H_
