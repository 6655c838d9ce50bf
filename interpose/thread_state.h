// File: interpose/thread_state.h
//
// Each thread's own state (static TLS): the limits the inline paths test, the thread's counters and
// pool cache, its place in the registry of live threads, and the reentrancy guard that marks
// poolscope's own work on the thread.
//
// Thread-safety: a thread's state is written by that thread only, but for the registry links (under
// the registry's lock) and the copies a snapshot settles.
#ifndef POOLSCOPE_INTERPOSE_THREAD_STATE_H_
#define POOLSCOPE_INTERPOSE_THREAD_STATE_H_

#include <cstddef>

#include "interpose/counters.h"
#include "pool/thread_cache.h"

namespace poolscope {

enum ThreadPhase : int { kFresh = 0, kActive = 1, kDead = 2 };

struct ThreadState {
  // Requests of 1..fast_limit bytes try the inline pooled path (TryPooled); 0 turns it off. At most
  // pool_limit and kFastSizes, and 0 with malloc_align=8; 0 inside poolscope (Guard).
  size_t fast_limit;
  // Requests of 1..pool_limit bytes are pooled without asking Decide, when guard is 0 (Guard leaves
  // this alone: its users test guard as well); 0: ask Decide.
  size_t pool_limit;
  // 1 + a miss reason: a request of n >= 1 bytes that fails the pool_limit test takes the regular path
  // without further checks and counts as a miss with that reason (pooling off, or tag=small and too
  // large); 0 (as every thread starts): such requests go through the slow path (uninitialised, inside
  // poolscope, dead, tag=explicit or caller).
  int regular_miss;
  // Explicit arena requests of 1..arena_limit bytes try the inline carve (ArenaAlloc), and nonzero lets
  // ArenaOpen and ArenaClose take their inline paths: at most pool_size and kFastSizes. 0 (as every
  // thread starts) sends all three to their slow paths: uninitialised or dead thread, pooling off,
  // tracking on (a tracked arena records every block's stack). The Guard leaves it alone (poolscope
  // never calls the arena API itself), which keeps the Guard as cheap as it was.
  size_t arena_limit;
  // The inline paths' counts (counters.h), settled with c (Settle): 4 KiB, so in InternalAlloc memory
  // made when the thread starts counting (InitThread) rather than in this struct, which is static TLS
  // and so comes out of the thread's stack. Non-null while fast_limit or arena_limit is, or pool_limit
  // (MallocPooled counts there too); nullptr before, after the thread's end, and if it could not be had.
  FastCarves* carves;
  int guard;          // > 0 while poolscope itself runs on this thread
  int phase;          // ThreadPhase
  int tag_depth;      // poolscope_tag_push nesting
  int tid;
  ThreadCounters c;
  pool::ThreadCache tc;
  ThreadState* next;  // the registry of live threads
  ThreadState* prev;
  int busy;  // > 0 while tracking's bookkeeping runs on this thread (Busy)
  // SIGTERM, SIGINT or SIGHUP that arrived while poolscope ran on this thread (guard or busy > 0),
  // perhaps inside the allocator below: its report is written when the outermost Guard or Busy ends
  // (signals.h).
  int pending_signal;
};

// __thread, not thread_local: the state is constant-initialised (all zero), and __thread tells every
// translation unit so, which keeps the access a single %fs-relative load with no TLS-init wrapper call.
extern __thread ThreadState t_state __attribute__((tls_model("initial-exec")));

inline ThreadState& CurrentThread() { return t_state; }

// The report of a signal deferred on this thread (pending_signal), once poolscope's work there is
// done: it writes the report and ends the process with the signal. Cold; set up by the signal code.
void RunPendingSignal(ThreadState& ts);
extern void (*g_pending_signal_report)(int sig);

// Marks poolscope's own work on this thread: calls it makes into libc pass straight through.
class Guard {
 public:
  // The two fields that the inline shortcuts test (pool_limit's users test the guard itself; the
  // arena paths' arena_limit is left alone: poolscope's own code never calls the arena API).
  explicit Guard(ThreadState& ts) : ts_(ts), limit_(ts.fast_limit), reason_(ts.regular_miss) {
    ++ts_.guard;
    ts_.fast_limit = 0;
    ts_.regular_miss = 0;
  }
  ~Guard() {
    ts_.fast_limit = limit_;
    ts_.regular_miss = reason_;
    if (--ts_.guard == 0 && __builtin_expect(ts_.pending_signal != 0, 0) && ts_.busy == 0) RunPendingSignal(ts_);
  }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  ThreadState& ts_;
  size_t limit_;
  int reason_;
};

// Marks tracking's bookkeeping on this thread, which may hold a lock of its tables that the report
// needs: a report signal that lands meanwhile is written when it ends, as under a Guard. Unlike a
// Guard it leaves the thread's allocations alone: a signal handler of the program's that allocates
// meanwhile is still counted and tracked.
class Busy {
 public:
  explicit Busy(ThreadState& ts) : ts_(ts) { ++ts_.busy; }
  ~Busy() {
    if (--ts_.busy == 0 && __builtin_expect(ts_.pending_signal != 0, 0) && ts_.guard == 0) RunPendingSignal(ts_);
  }
  Busy(const Busy&) = delete;
  Busy& operator=(const Busy&) = delete;

 private:
  ThreadState& ts_;
};

// For a thread poolscope makes for itself: everything the thread does from now on to its end passes
// straight through.
inline void BecomeOwnThread(ThreadState& ts) { ++ts.guard; }

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_THREAD_STATE_H_
