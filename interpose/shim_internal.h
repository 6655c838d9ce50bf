// File: interpose/shim_internal.h
//
// What the shim's files share among themselves, and nothing else of the library uses: the pool
// backend's state (pool_backend.cc), the process-wide configuration, the thread registry and the
// limits state machine (threads.cc), and the entry every slow path starts with (Enter, Scope).
#ifndef POOLSCOPE_INTERPOSE_SHIM_INTERNAL_H_
#define POOLSCOPE_INTERPOSE_SHIM_INTERNAL_H_

#include <pthread.h>
#include <valgrind/valgrind.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "interpose/internal.h"
#include "interpose/options.h"
#include "interpose/real.h"
#include "interpose/shim.h"
#include "interpose/snapshot.h"

#include "interpose/thread_state.h"
#include "interpose/timeline.h"
#include "pool/pool.h"
#include "track/stack_capture.h"

// Hidden, as their definitions are (-fvisibility=hidden): the compiler then reaches them directly rather
// than through the GOT.
#pragma GCC visibility push(hidden)

namespace poolscope {

// ---- pool_backend.cc ----------------------------------------------------------------------------------

// Which pool an address lies in (free tells pooled blocks from real ones with it), and its root.
extern pool::PoolMap g_pool_map;
extern std::atomic<pool::PoolMap::Leaf*> g_map_root[pool::PoolMap::kRootSize];
// With valgrind=1 every pool starts with this many bytes where nothing is carved: pooled blocks then
// never share an address with the pool's real block, and memcheck has a chunk for the pool itself.
constexpr size_t kValgrindPoolHead = 16;
// Under valgrind (valgrind=1): pools and pooled blocks are described to memcheck (pool_backend.cc).
extern bool g_valgrind;
extern char g_valgrind_anchor;
// The pools; nullptr until InitGlobal has made the Domain in g_domain_storage.
extern char g_domain_storage[sizeof(pool::Domain)];
extern pool::Domain* g_domain;
// Every pool's real allocation and free (ShimBackend): counted in the thread's real ledger.
pool::Backend* ShimPoolBackend();
// Takes the pools' memory from `memory` (its AllocPool and FreePool) instead of the next allocator,
// counted as before; for tests, before the first pool is made. nullptr: the next allocator again.
void UsePoolMemory(pool::Backend* memory);
// A pooled block as memcheck sees it bare: `n` bytes, undefined until written (defined for calloc,
// `zeroed`), the rest of its last 16-byte granule no-access (an overflow into it is reported).
__attribute__((noinline)) void ValgrindDescribeAlloc(void* p, size_t n, bool zeroed);
// Makes the bytes of [p, p + usable) that memcheck holds no-access addressable (undefined): the
// program was told it may use them (malloc_usable_size; under valgrind only).
void ValgrindOpenUsable(void* p, size_t usable);
// Its free: no-access from then on (a use after free is reported).
void ValgrindDescribeFree(const pool::PoolHeader* h, void* p);
// poolscope's own work in pooled memory under valgrind (zeroing freed blocks and emptied pools, which
// memcheck holds no-access): memcheck reports nothing of it. Nothing when not under valgrind.
class ValgrindQuiet {
 public:
  explicit ValgrindQuiet(bool on) : on_(on) {
    if (on_) VALGRIND_DISABLE_ERROR_REPORTING;
  }
  ~ValgrindQuiet() {
    if (on_) VALGRIND_ENABLE_ERROR_REPORTING;
  }
  ValgrindQuiet(const ValgrindQuiet&) = delete;
  ValgrindQuiet& operator=(const ValgrindQuiet&) = delete;

 private:
  const bool on_;
};
__attribute__((noinline)) void WipeStackBelow();
// The live pooled blocks, for tracking (TrackingInit); on_pool(arg), when not null, before each pool's
// blocks (each pool that exists, with live blocks or none).
void ForEachPooledBlock(void (*fn)(uintptr_t ptr, uint32_t size, uint32_t stack_id, void* arg), void* arg,
                        void (*on_pool)(void* arg) = nullptr);

// ---- threads.cc ---------------------------------------------------------------------------------------

extern Options g_options;
extern bool g_pooling;
extern size_t g_pool_size;
extern size_t g_pool_capacity;
extern size_t g_max_align;
extern std::atomic<int> g_init;
extern pthread_key_t g_key;
extern SpinLock g_registry_lock;
extern ThreadState* g_threads;
extern ThreadCounters g_ended;
extern pool::PoolStats g_ended_pool;
extern ThreadRecord* g_records;
extern ThreadRecord** g_records_tail;
extern int g_nrecords;
extern uint64_t g_records_omitted;
extern uint64_t g_bootstrap_allocs, g_bootstrap_bytes;
extern std::atomic<uint64_t> g_passthrough_allocs, g_passthrough_frees;
extern ProcessInfo g_process;
extern int64_t g_fork_carryover;
extern uint64_t g_threads_lost_at_fork;
extern uint64_t g_drained_at_exit;

int GetTid();
// The limits the inline paths test (ThreadState), recomputed from the thread's state and the
// process's configuration.
void SetLimits(ThreadState& ts);
void WarnLine(void*, const char* line);
void EmitLine(void*, const char* line);
// A thread's counters and pool stats, copied and settled (counters.h Settle): what a snapshot reads of
// a thread that keeps counting meanwhile. Under the registry's lock.
void SettledCopy(const ThreadState& ts, ThreadCounters* c, pool::PoolStats* stats);
void SettleOwn(ThreadState& ts);
void FoldDead(ThreadState& ts);
// track=1: the tracked bytes (counters.h TrackedBytes) of every thread, ended ones included; under the
// registry's lock.
TrackedBytes TrackedBytesNow();
// Where a thread without a carve table (dead, or none could be had) counts its tracked bytes: under
// the registry's lock.
TrackedBytes* StrayBytes();
// Where the calling thread counts its tracked bytes: its carve table's, or the stray ones, locked.
class TrackedBytesOf {
 public:
  explicit TrackedBytesOf(ThreadState& ts) : own_(ts.carves != nullptr) {
    if (own_) {
      bytes_ = &ts.carves->bytes;
    } else {
      g_registry_lock.Lock();
      bytes_ = StrayBytes();
    }
  }
  ~TrackedBytesOf() {
    if (!own_) g_registry_lock.Unlock();
  }
  TrackedBytesOf(const TrackedBytesOf&) = delete;
  TrackedBytesOf& operator=(const TrackedBytesOf&) = delete;
  TrackedBytes* operator->() { return bytes_; }

 private:
  bool own_;
  TrackedBytes* bytes_;
};
void ForkPrepare();
void ForkParent();
void ForkChild();
void InitGlobal(ThreadState& ts);
bool EnsureGlobal(ThreadState& ts);
void InitThread(ThreadState& ts);

// ---- the slow paths' common entry ---------------------------------------------------------------------

enum class Mode { kCounted, kPassthrough, kBootstrap };

// Every slow path starts here.
inline Mode Enter(ThreadState& ts) {
  if (POOLSCOPE_LIKELY(ts.phase == kActive && ts.guard == 0)) return Mode::kCounted;
  if (ts.guard > 0 || InResolve()) return RealResolved() ? Mode::kPassthrough : Mode::kBootstrap;
  if (ts.phase == kFresh) {
    InitThread(ts);
    if (ts.phase != kActive) return RealResolved() ? Mode::kPassthrough : Mode::kBootstrap;
    SetLimits(ts);
    return Mode::kCounted;
  }
  return Mode::kCounted;  // kDead: counted, then folded by Scope
}

// Folds a dead thread's counts after each call.
class Scope {
 public:
  explicit Scope(ThreadState& ts) : ts_(ts) {}
  ~Scope() {
    if (POOLSCOPE_UNLIKELY(ts_.phase == kDead)) FoldDead(ts_);
  }

 private:
  ThreadState& ts_;
};

inline void CountAlloc(Ledger& l, Api api, size_t n, bool ok) {
  ++l.ncalls[api];
  if (ok) {
    ++l.nallocs;
    l.nbytes += n;
  }
}

inline void CountFree(Ledger& l, Api api, bool freed) {
  ++l.ncalls[api];
  if (freed) ++l.nfrees;
}

// The program's frame that called an entry point, for a capture that starts there (CaptureStackFrom),
// seen from a slow path that the entry point reached by tail calls only: then its return address slot,
// at its CFA - 8, holds `ra` (the entry point's __builtin_return_address), its CFA is rsp after the
// program's call returns, and the rbp it saved is the program's (callee-saved registers are restored
// before a tail call). Anything else (a build that made calls of those jumps) gives nullptr, and the
// capture walks up from itself instead. `cfa` and `fp`: __builtin_dwarf_cfa() and
// __builtin_frame_address(0) of that slow path (the latter makes it keep a frame pointer).
// The reads are of the function's own frame.
#define POOLSCOPE_PROGRAM_FRAME(frame, ra) \
  (g_tracking ? ProgramFrame(&(frame), (ra), __builtin_dwarf_cfa(), __builtin_frame_address(0)) : nullptr)
inline const track::StartFrame* ProgramFrame(track::StartFrame* f, const void* ra, void* cfa, void* fp) {
  const uintptr_t c = reinterpret_cast<uintptr_t>(cfa);
  if (*reinterpret_cast<const uintptr_t*>(c - 8) != reinterpret_cast<uintptr_t>(ra)) return nullptr;
  f->ra = reinterpret_cast<uintptr_t>(ra);
  f->sp = c;
  f->bp = *static_cast<const uintptr_t*>(fp);
  return f;
}

}  // namespace poolscope

#pragma GCC visibility pop

#endif  // POOLSCOPE_INTERPOSE_SHIM_INTERNAL_H_
