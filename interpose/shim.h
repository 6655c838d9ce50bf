// File: interpose/shim.h
//
// The logic behind every interposed entry point. libc_override.cc only forwards to these functions.
//
// Each entry point has one inlined fast path and leaves through named NOINLINE slow paths. The pooled
// fast path of malloc and operator new assumes: the thread is initialised and not inside poolscope's
// own code (fast_limit is 0 otherwise, so an uninitialised thread, a thread inside poolscope, and a
// process with pooling off all fall through to the slow path without testing anything else), and
// 1 <= n <= fast_limit (at most the pool capacity and kFastSizes; 0 with malloc_align=8). It costs one
// TLS-relative compare, the pool carve (a compare, three stores, the mark, the live count) and one
// counter increment, by entry point and size, in the thread's carve table (it stands for the call, the
// logical block, its bytes and size bucket, and the pool hit; see Settle in counters.h): no lock, no
// atomic read-modify-write, no call. 21 instructions for malloc(5) (one of them loads the table's
// address; the mark's index is the address shifted, and its address is kept for the LIFO free), 18 for
// the LIFO free after it (FreeLast in pool/thread_cache.h): with the benchmark loop's 9, 48 per pair
// (bench/callgrind_pair.sh).
//
// Thread-safety: every function may be called from any thread, re-entrantly from poolscope's own libc
// calls (those pass straight through, uncounted as logical or real), from signal handlers no more safely
// than malloc itself.
#ifndef POOLSCOPE_INTERPOSE_SHIM_H_
#define POOLSCOPE_INTERPOSE_SHIM_H_

#include <cstddef>
#include <cstdint>
#include <new>

#include "interpose/counters.h"
#include "interpose/options.h"
#include "interpose/thread_state.h"
#include "pool/thread_cache.h"

namespace poolscope {

// Slow paths.
void* AllocSlow(Api api, size_t n, void* ra);
void* MallocRegular(size_t n, void* ra);
// malloc's slow path when g_tracked_malloc (track=1, tag=small, no valgrind): reached by jumps only
// from the exported malloc, so its stack capture starts at the program's frame. Hidden, as its
// definition is (-fvisibility=hidden): the exported entry points then test it with one instruction, not
// through the GOT's address first (as g_tracking below).
extern bool g_tracked_malloc __attribute__((visibility("hidden")));
void* MallocTracked(size_t n, void* ra);
void FreeSlow(Api api, void* p, pool::PoolHeader* h);
void* NewSlow(Api api, size_t n, void* ra);

// n >= 1 and at most the pool size, so the bucket is the index of the highest bit of 2n - 1.
inline size_t PooledSizeBucket(size_t n) { return 63 ^ static_cast<size_t>(__builtin_clzll(2 * n - 1)); }

// A pooled allocation made by the slow paths (the pool counted the hit).
inline void CountPooled(ThreadState& ts, Api api, size_t n) {
  ++ts.c.logical.ncalls[api];
  ++ts.c.logical.nallocs;
  ts.c.logical.nbytes += n;
  ++ts.c.sizes[PooledSizeBucket(n)];
}

// malloc and plain operator new and new[]: the hot path. Returns nullptr when the request must take the
// slow path (the exported function then calls MallocRegular/NewSlow with the caller's address).
inline void* TryPooled(Api api, size_t n) {
  ThreadState& ts = t_state;
  if (POOLSCOPE_LIKELY(n - 1 < ts.fast_limit)) {
    void* p = ts.tc.TryCarve16(n);
    if (POOLSCOPE_LIKELY(p != nullptr)) {
      ++ts.carves->n[FastApiOf(api)][n];  // the call, the block, its bytes and size, the hit
      return p;
    }
  }
  return nullptr;
}

// free and plain operator delete: a live block of this thread's current pool is freed inline.
void FreeNotLast(Api api, void* p);
// The free path with track=1 once FreeLast declined (pooled blocks record nothing when freed, so the
// LIFO free stays inline; real blocks leave the live table).
extern bool g_tracking __attribute__((visibility("hidden")));
void FreeTracked(Api api, void* p);

__attribute__((always_inline)) inline void Free(Api api, void* p) {
  ThreadState& ts = t_state;
  // Counted in nfast: the call, the logical free and the pooled free (and in nfast_reset, the reset).
  const int f = FreeIndex(api);
  if (POOLSCOPE_LIKELY(ts.tc.FreeLast(p, &ts.c.nfast[f], &ts.c.nfast_reset[f]))) return;
  if (POOLSCOPE_UNLIKELY(g_tracking)) return FreeTracked(api, p);
  FreeNotLast(api, p);
}

// The other entry points; see shim.cc (the C API's slow paths: c_api.cc).
void* Calloc(size_t n, size_t m, void* ra);
void* Realloc(Api api, void* p, size_t n, size_t m, void* ra);
int PosixMemalign(void** out, size_t align, size_t n, void* ra);
void* AlignedEntry(Api api, size_t align, size_t n, void* ra);
size_t UsableSize(void* p);
void* NewForm(Api api, size_t n, size_t align, bool nothrow, void* ra);
void DeleteForm(Api api, void* p, size_t size, size_t align, bool nothrow);

// The C API. `ra`: the return address of the program's call (a tracked arena counts its blocks by it,
// and its open captures the stack from that frame). The exported poolscope_impl_arena_* functions are
// these inline paths; each leaves through its slow path (in c_api.cc) unless the thread may take it:
// arena_limit != 0 for an allocation, the thread cache's arena slot for open and close (open only while
// arena_limit != 0: an active thread, pooling on, no tracking). They assume the arena is this thread's.
// Open takes the struct the slot keeps; a block that fits is a carve and one count in the carve table
// (an arena without a pool takes one from the cache); close, for an arena whose blocks all came from its
// pool and lie in the pool's first line, zeroes that line and keeps the struct, with its pool, in the
// slot when that is free. Open also hands the program the arena's view (poolscope.h): the thread's
// carve-table row for arena blocks and arena_limit, so that a program built with that header carves and
// counts exactly as ArenaAlloc does, without the call; the kept struct's empty pool means the next
// open's blocks are all carved in the program. A round of bench/arena_loop (open, an int and 20 bytes,
// close), with the client library's jumps and the loop itself: 76 instructions
// (bench/callgrind_pair.sh).
void* ArenaOpenSlow(void* ra);
void* ArenaAllocSlow(void* arena, size_t size, size_t align, void* ra);
void ArenaCloseSlow(void* arena);

POOLSCOPE_ALWAYS_INLINE void* ArenaOpen(void* ra) {
  // The slot holds a struct only while arena_limit != 0 (SetLimits closes it otherwise), and a kept
  // struct was this thread's, given the program's view by ArenaOpenSlow (the carve table row and
  // arena_limit, which do not change while the thread is active).
  if (pool::Arena* a = t_state.tc.TryReuseSlotArena()) return a;
  return ArenaOpenSlow(ra);
}

POOLSCOPE_ALWAYS_INLINE void* ArenaAlloc(void* arena, size_t size, size_t align, void* ra) {
  ThreadState& ts = t_state;
  auto* a = static_cast<pool::Arena*>(arena);
  if (POOLSCOPE_LIKELY(size - 1 < ts.arena_limit && a != nullptr)) {
    if (size > kFastSizes) __builtin_unreachable();  // (arena_limit is at most kFastSizes)
    void* p = ts.tc.ArenaTryCarveUncounted(a, size, align);
    if (POOLSCOPE_LIKELY(p != nullptr)) {
      ++ts.carves->n[kFastArenaAlloc][size];  // the call, the block, its bytes and size, the hit
      return p;
    }
  }
  return ArenaAllocSlow(arena, size, align, ra);
}

POOLSCOPE_ALWAYS_INLINE void ArenaClose(void* arena) {
  ThreadState& ts = t_state;
  auto* a = static_cast<pool::Arena*>(arena);
  // Nothing took the regular path: no real free to make. The slot is open only while arena_limit != 0
  // (SetLimits), so an arena closed here is untracked and its thread active.
  if (POOLSCOPE_LIKELY(a != nullptr && a->regular == nullptr)) {
    const uint64_t blocks = a->pooled_blocks;
    if (POOLSCOPE_LIKELY(ts.tc.TryCloseArenaInSlot(a))) {
      ++ts.c.logical.ncalls[kArenaClose];
      ts.c.logical.nfrees += blocks;
      return;
    }
  }
  ArenaCloseSlow(arena);
}

void TagPush();
void TagPop();
int Active();

// Process start and end (library constructor and destructor), and _exit()/_Exit(), which skip the
// destructor (dash, and many fork() children, end that way).
void OnLoad();
void OnUnload();
void OnExitCall();

}  // namespace poolscope

// Every pool's real allocation is made through this exported, never-inlined function, so that tools
// below poolscope (LSan, valgrind, heaptrack) can tell pool memory from the program's own by one frame
// name: `poolscope suppressions` writes rules that match it.
extern "C" __attribute__((visibility("default"), noinline)) void* poolscope_pool_alloc(size_t bytes);

namespace poolscope {
// How pools are had from the next allocator. posix_memalign(64) is exact, but glibc serves it by
// carving an aligned chunk out of a larger one and freeing the pieces around it, which costs several
// times a plain malloc and fragments the heap when pools come and go (python3: 600,000 pools per
// second). So unless valgrind is describing the pools (memcheck's mempool needs the block to be the
// pool), a pool is a plain malloc of Domain::real_bytes(): the pool starts at the first 64-byte
// boundary inside it (so its cache lines are its own) and its metadata lies in the slack before that
// boundary or after the pool (pool/pool_layout.h).
extern bool g_pool_by_malloc;
void* PoolFromMalloc(size_t bytes);
// A block [begin, end) of the main heap that ends past the pages faulted in so far has its own pages
// and the next ones faulted in with one call (pool_backend.cc).
void PopulateHeapAhead(uintptr_t begin, uintptr_t end);
// The bytes the allocator below holds for one pool: what its real allocation asked for
// (Domain::real_bytes: the pool, its metadata and the alignment's slack).
uint64_t PoolRealBytes();
}  // namespace poolscope

namespace poolscope {

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_SHIM_H_
