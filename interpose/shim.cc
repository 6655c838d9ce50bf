// File: interpose/shim.cc
//
// Slow paths of the malloc family and the C++ operators, and the free paths. See shim.h.
#include "interpose/shim.h"

#include <unistd.h>
#include <valgrind/memcheck.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "interpose/caller_tag.h"
#include "interpose/internal.h"
#include "interpose/real.h"
#include "interpose/shim_internal.h"
#include "interpose/snapshot.h"
#include "interpose/tracking.h"
#include "track/populate.h"

namespace poolscope {

// track=1: every logical allocation and free is recorded, so the inline fast paths are off (the
// exported free jumps to FreeTracked itself).
bool g_tracking = false;
// track=1 with tag=small and no valgrind: malloc's slow path is MallocTracked (the exported malloc
// jumps there directly).
bool g_tracked_malloc = false;

namespace {

void* Bootstrap(size_t n, size_t align) {
  void* p = BootstrapAlloc(n, align);
  ++g_bootstrap_allocs;
  g_bootstrap_bytes += n;
  return p;
}

// The miss reason once the pools' own memory could not be had (Domain::exhausted): pooling is off for
// the rest of the process, every request takes the regular path (one the pool would have taken is a
// `disabled` miss; the others keep their reasons, too_large and the like),
// one line on stderr says so, and the calling thread's shortcuts stop sending requests to the pool
// (each thread's, on its first pooled-size request after that).
__attribute__((noinline, cold)) int PoolingExhausted(ThreadState& ts) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true, std::memory_order_relaxed)) {
    WarnLine(nullptr,
             "no memory for the pool map or the pool metadata (an address-space limit?): pooling is off "
             "from here on, and every request passes through");
  }
  SetLimits(ts);
  return pool::kMissDisabled;
}

// A pooled block's stack id, its site charged (track=1). Not a Busy step: the exit report takes none
// of the locks this may hold (the stack depot's is taken only to add a stack), and the pooled tracked
// path's cost is counted in instructions.
inline uint32_t PooledStackId(ThreadState&, size_t n, const track::StartFrame* from) {
  return OnPooledAlloc(n, 0, from);
}

// -1: pool it; otherwise the miss reason.
// `align`: what the caller needs beyond malloc's own guarantee (0 for the malloc family).
inline int Decide(const ThreadState& ts, size_t n, size_t align, const void* ra) {
  if (!g_pooling || ts.phase != kActive) return pool::kMissDisabled;
  if (n > g_pool_capacity) return pool::kMissTooLarge;
  // Pooled blocks are 16-aligned, or with malloc_align=8 8-aligned below 16 bytes.
  if (align > 16 || (align > 8 && g_max_align == 8 && n < 16)) return pool::kMissAlignment;
  bool tagged = true;
  switch (g_options.tag) {
    case TagMode::kSmall: break;
    case TagMode::kExplicit: tagged = ts.tag_depth > 0; break;
    case TagMode::kCaller: tagged = CallerTagged(ra); break;
  }
  if (!tagged) return pool::kMissUntagged;
  // Once pooling has given up, a request it would have taken is a `disabled` miss; the others keep
  // their reasons.
  return POOLSCOPE_UNLIKELY(g_domain->exhausted()) ? pool::kMissDisabled : -1;
}

// Tries the pool for a logical allocation; counts the hit or the miss.
inline void* TryPool(ThreadState& ts, Api api, size_t n, size_t align, const void* ra,
                     const track::StartFrame* from = nullptr) {
  int reason = Decide(ts, n, align, ra);
  if (reason < 0) {
    void* p;
    {
      ValgrindQuiet quiet(POOLSCOPE_UNLIKELY(g_valgrind));  // a carve may zero freed blocks
      p = ts.tc.Carve(n == 0 ? 1 : n);
    }
    if (p != nullptr) {
      if (POOLSCOPE_UNLIKELY(g_tracking)) {
        pool::InfoRef slot = ts.tc.InfoSlot(p);  // before the capture (see InfoSlot)
        pool::StoreBlockInfo(slot, static_cast<uint32_t>(n), PooledStackId(ts, n, from));
      }
      if (POOLSCOPE_UNLIKELY(g_valgrind)) {
        ts.tc.ForgetLast();  // frees must come through FreePooled, which tells memcheck
        ValgrindDescribeAlloc(p, n, api == kCalloc);  // malloc(0): a block of 0 bytes, as memcheck's own
        WipeStackBelow();
      }
      if (n != 0) {
        CountPooled(ts, api, n);
      } else {
        ++ts.c.logical.ncalls[api];
        ++ts.c.logical.nallocs;
        ++ts.c.sizes[SizeBucket(0)];
      }
      return p;
    }
    reason = pool::kMissPoolFull;  // (or the carve found pooling exhausted: below)
  }
  if (POOLSCOPE_UNLIKELY(reason == pool::kMissDisabled || reason == pool::kMissPoolFull) && g_pooling &&
      g_domain->exhausted()) {
    reason = PoolingExhausted(ts);
  }
  ++ts.tc.stats().misses[reason];
  return nullptr;
}


// A logical allocation that took the regular path: one event in both ledgers, same entry point.
inline void CountRegular(ThreadState& ts, Api api, size_t n, bool ok) {
  CountAlloc(ts.c.regular, api, n, ok);
  ++ts.c.sizes[SizeBucket(n)];
  TimelineCount(ts.c.regular.ncalls[api]);
}

// A real block enters the live-block table (track=1), its size counted as recorded.
inline void TrackAlloc(ThreadState& ts, void* p, size_t n, const track::StartFrame* from) {
  if (POOLSCOPE_UNLIKELY(g_tracking) && p != nullptr) {
    Busy busy(ts);
    OnAlloc(p, n, 0, from);
    TrackedBytesOf(ts)->unpooled_bytes += n;
  }
}

// The same, and recorded in the live-block table (track=1).
inline void* RegularAllocated(ThreadState& ts, Api api, size_t n, void* p,
                              const track::StartFrame* from = nullptr) {
  // One step for a report signal (Busy): the ledger never counts the block without the table.
  Busy busy(ts);
  CountRegular(ts, api, n, p != nullptr);
  TrackAlloc(ts, p, n, from);
  return p;
}

// A real block leaves the live-block table (track=1), its size counted as freed. Returns whether it
// was there, and sets *size (when not null) to the size it was recorded with.
inline bool TrackFree(ThreadState& ts, void* p, uint64_t* size = nullptr) {
  uint64_t n;
  if (POOLSCOPE_LIKELY(!g_tracking) || p == nullptr) return false;
  {
    Busy busy(ts);
    if (!OnFree(p, &n)) return false;
  }
  if (POOLSCOPE_UNLIKELY(n >= kTimelineLargeFree)) TimelineLargeFree(n);  // (its bytes still counted)
  TrackedBytesOf(ts)->unpooled_freed_bytes += n;
  if (size != nullptr) *size = n;
  return true;
}


// A pooled block released by free/delete (h from the pool map).
void FreePooled(ThreadState& ts, Api api, void* p, pool::PoolHeader* h) {
  if (POOLSCOPE_UNLIKELY(g_valgrind)) ValgrindDescribeFree(h, p);
  pool::Domain::FreeResult r;
  {
    ValgrindQuiet quiet(POOLSCOPE_UNLIKELY(g_valgrind));  // the pool zeroes what memcheck holds freed
    r = ts.tc.Free(h, p);
  }
  CountFree(ts.c.logical, api, r == pool::Domain::FreeResult::kFreed);
  if (r != pool::Domain::FreeResult::kFreed) RecordBadFree(p, r == pool::Domain::FreeResult::kDouble);
}

void RealDelete(Api api, void* p, size_t size, size_t align, bool nothrow) {
  const RealFns& r = g_real;
  std::align_val_t al = static_cast<std::align_val_t>(align);
  std::nothrow_t nt;
  if (api == kFree) return r.free(p);
  bool array = api == kDeleteArray;
  auto plain = array ? r.op_delete_array : r.op_delete;
  if (align != 0) {
    auto sized_al = array ? r.op_delete_array_sized_aligned : r.op_delete_sized_aligned;
    auto nt_al = array ? r.op_delete_array_aligned_nothrow : r.op_delete_aligned_nothrow;
    auto just_al = array ? r.op_delete_array_aligned : r.op_delete_aligned;
    if (size != 0 && sized_al != nullptr) return sized_al(p, size, al);
    if (nothrow && nt_al != nullptr) return nt_al(p, al, nt);
    if (just_al != nullptr) return just_al(p, al);
  } else {
    auto sized = array ? r.op_delete_array_sized : r.op_delete_sized;
    auto nt_plain = array ? r.op_delete_array_nothrow : r.op_delete_nothrow;
    if (size != 0 && sized != nullptr) return sized(p, size);
    if (nothrow && nt_plain != nullptr) return nt_plain(p, nt);
  }
  if (plain != nullptr) return plain(p);
  r.free(p);
}


}  // namespace

// ---- malloc family ------------------------------------------------------------------------------------

namespace {
// A block the next allocator made for a call that passed through. poolscope's own (the guard is up:
// its code's operator new, the libraries it calls) are made in numbers at exit, for the scan and the
// report, and written at once, each page they take that was never touched a fault: a large one has its
// pages faulted in with one call wherever it lies (in the heap's free space, or mapped), its first 256
// KiB at most (a library's sparse table, libdw's, would cost more faulted in whole than touched), and a
// small one that grows the main heap the heap's next pages (PopulateHeapAhead). The program's own calls
// are left as they are, and so is everything under valgrind (whose memory is its own to manage).
constexpr size_t kPopulateOwnBlock = size_t{16} << 10;
constexpr size_t kPopulateOwnAtMost = size_t{256} << 10;
inline void* PassedThrough(const ThreadState& ts, void* p, size_t n) {
  if (ts.guard == 0 || p == nullptr || g_valgrind) return p;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  if (n >= kPopulateOwnBlock) {
    const uintptr_t end = begin + (n < kPopulateOwnAtMost ? n : kPopulateOwnAtMost);
    track::PopulateRange(begin, end, end);
  } else {
    PopulateHeapAhead(begin, begin + n);
  }
  return p;
}
}  // namespace

void* AllocSlow(Api api, size_t n, void* ra) {
  ThreadState& ts = t_state;
  switch (Enter(ts)) {
    case Mode::kBootstrap: return Bootstrap(n, 16);
    case Mode::kPassthrough:
      g_passthrough_allocs.fetch_add(1, std::memory_order_relaxed);
      return PassedThrough(ts, g_real.malloc(n), n);
    case Mode::kCounted: break;
  }
  Scope scope(ts);
  track::StartFrame frame;
  const track::StartFrame* from = POOLSCOPE_PROGRAM_FRAME(frame, ra);
  if (void* p = TryPool(ts, api, n, 0, ra, from)) return p;
  void* p;
  {
    // The next allocator may allocate for itself while it serves us (heaptrack records the call):
    // those calls pass straight through, neither counted nor pooled.
    Guard guard(ts);
    p = g_real.malloc(n);
  }
  return RegularAllocated(ts, api, n, p, from);
}

// malloc with track=1 (and tag=small, no valgrind), for an initialised thread outside poolscope: what
// AllocSlow does for it, without the checks that cannot apply (entry modes, the tag, alignment) and
// with its stack captured from the program's frame. Anything else goes to AllocSlow.
__attribute__((noinline)) void* MallocTracked(size_t n, void* ra) {
  ThreadState& ts = t_state;
  if (POOLSCOPE_UNLIKELY(ts.phase != kActive || ts.guard != 0)) return AllocSlow(kMalloc, n, ra);
  // g_tracked_malloc holds, so g_tracking does (InitGlobal sets both once): POOLSCOPE_PROGRAM_FRAME's
  // test of it is left out.
  track::StartFrame frame;
  const track::StartFrame* from = ProgramFrame(&frame, ra, __builtin_dwarf_cfa(), __builtin_frame_address(0));
  void* p;
  if (n - 1 < g_pool_capacity && g_pooling) {  // (n == 0 fails this: below)
    p = ts.tc.CarveUncounted(n);
    if (POOLSCOPE_UNLIKELY(p == nullptr)) return AllocSlow(kMalloc, n, ra);
    pool::InfoRef slot = ts.tc.InfoSlot(p);  // before the capture (see InfoSlot)
    // Counted with its mark, before the capture: one increment in the carve table where it has a slot,
    // as TryPooled counts (the call, the block, its bytes and size, the hit; Settle).
    if (POOLSCOPE_LIKELY(n <= kFastSizes && ts.carves != nullptr)) {
      ++ts.carves->n[kFastMalloc][n];
    } else {
      CountPooled(ts, kMalloc, n);
      ++ts.tc.stats().hits;
    }
    pool::StoreBlockInfo(slot, static_cast<uint32_t>(n), PooledStackId(ts, n, from));
    return p;
  }
  if (POOLSCOPE_UNLIKELY(n == 0)) return AllocSlow(kMalloc, n, ra);
  ++ts.tc.stats().misses[g_pooling ? pool::kMissTooLarge : pool::kMissDisabled];
  {
    Guard guard(ts);
    p = g_real.malloc(n);
  }
  return RegularAllocated(ts, kMalloc, n, p, from);
}

// A malloc that the inline path declined although it is within pool_limit, outside poolscope (above
// kFastSizes, or malloc_align=8, or the current pool has no room): pooled here with Carve, which takes
// a fresh pool when it must; else (no pool to be had) the slow path.
__attribute__((noinline)) void* MallocPooled(size_t n, void* ra) {
  ThreadState& ts = t_state;
  // The thread is active and outside poolscope, and Decide would pool this (see pool_limit).
  if (void* p = ts.tc.CarveUncounted(n)) {
    if (n <= kFastSizes) {
      ++ts.carves->n[kFastMalloc][n];  // as TryPooled counts: with malloc_align=8, most requests
    } else {
      CountPooled(ts, kMalloc, n);
      ++ts.tc.stats().hits;
    }
    return p;
  }
  return AllocSlow(kMalloc, n, ra);
}

// malloc when the pooled fast path declined, either because the request is outside the pool limit
// (then the regular path runs inline when nothing else can apply) or because it is pooled but not by
// the inline path (MallocPooled). (With g_tracked_malloc the exported malloc goes to MallocTracked
// instead; tracking without it ends in AllocSlow here.)
void* MallocRegular(size_t n, void* ra) {
  ThreadState& ts = t_state;
  if (n - 1 < ts.pool_limit && ts.guard == 0) return MallocPooled(n, ra);
  int miss = ts.regular_miss;
  if (POOLSCOPE_LIKELY(miss > 0 && n != 0)) {  // (and n is above pool_limit, or inside poolscope)
    ++ts.tc.stats().misses[miss - 1];
    void* p;
    {
      Guard guard(ts);
      p = g_real.malloc(n);
    }
    CountRegular(ts, kMalloc, n, p != nullptr);
    return p;
  }
  return AllocSlow(kMalloc, n, ra);
}

// A live block of a retired pool while the process has one thread (python3 frees most of its pooled
// blocks so: a pool of one or two objects is retired before they die), freed without FreeSlow's layers
// and counted in nfast; false when FreeSlow must take it (another thread, valgrind, a thread not
// active, or not such a block).
inline bool FreeRetiredFast(ThreadState& ts, Api api, void* p, pool::PoolHeader* h) {
  if (g_valgrind || ts.phase != kActive || ts.guard != 0 || !ts.tc.FreeRetiredAlone(h, p)) return false;
  ++ts.c.nfast[FreeIndex(api)];  // the call, the logical free and the pooled free
  return true;
}

// FreeNotLast with track=1 (pool_limit and regular_miss are 0 then, so nothing here takes the inline
// or regular shortcuts): a block of the thread's own pool is freed here (what FreePooled does, without
// its layers; pooled blocks are not in the live table, so there is nothing to record), and for a real
// block the live table's lines start loading before anything else.
__attribute__((noinline)) void FreeTracked(Api api, void* p) {
  pool::PoolHeader* h = g_pool_map.Find(p);
  if (h == nullptr) PrefetchFree(p);
  ThreadState& ts = t_state;
  // Counted in nfast: the call, the logical free and the pooled free (and in nfast_reset, the reset).
  const int f = FreeIndex(api);
  if (h != nullptr && !g_valgrind && ts.tc.FreeOwnTracked(h, p, &ts.c.nfast[f], &ts.c.nfast_reset[f])) {
    return;
  }
  if (h != nullptr && FreeRetiredFast(ts, api, p, h)) return;
  FreeSlow(api, p, h);
}

// A free that is not of the block this thread carved last: a live block of its current pool, freed
// with the owner's fast path, or anything else, through FreeSlow.
void FreeNotLast(Api api, void* p) {
  pool::PoolHeader* h = g_pool_map.Find(p);
  ThreadState& ts = t_state;
  if (POOLSCOPE_LIKELY(h != nullptr && !g_valgrind && ts.tc.FreeOwn(h, p))) {
    ++ts.c.nfast[FreeIndex(api)];  // the call, the logical free and the pooled free
    return;
  }
  if (h != nullptr && FreeRetiredFast(ts, api, p, h)) return;
  if (POOLSCOPE_LIKELY(h == nullptr && api == kFree && ts.regular_miss > 0 && !IsBootstrap(p))) {
    CountFree(ts.c.regular, kFree, p != nullptr);
    Guard guard(ts);
    return g_real.free(p);
  }
  FreeSlow(api, p, h);
}

void FreeSlow(Api api, void* p, pool::PoolHeader* h) {
  ThreadState& ts = t_state;
  if (IsBootstrap(p)) return;
  Mode mode = Enter(ts);
  if (mode != Mode::kCounted && h == nullptr) {
    if (p == nullptr) return;
    g_passthrough_frees.fetch_add(1, std::memory_order_relaxed);
    if (RealResolved()) RealDelete(api, p, 0, 0, false);
    return;
  }
  Scope scope(ts);
  if (h != nullptr) return FreePooled(ts, api, p, h);
  CountFree(ts.c.regular, api, p != nullptr);
  TimelineCount(ts.c.regular.ncalls[api]);
  TrackFree(ts, p);
  Guard guard(ts);
  if (api == kFree) return g_real.free(p);
  RealDelete(api, p, 0, 0, false);
}

namespace {
void* CallocSlow(size_t n, size_t m, void* ra);
}  // namespace

void* Calloc(size_t n, size_t m, void* ra) {
  ThreadState& ts = t_state;
  size_t total;
  bool overflow = __builtin_mul_overflow(n, m, &total);
  if (POOLSCOPE_LIKELY(!overflow && total - 1 < ts.pool_limit && ts.guard == 0)) {
    void* p = ts.tc.Carve(total);  // pool memory is always zero
    if (POOLSCOPE_LIKELY(p != nullptr)) {
      CountPooled(ts, kCalloc, total);
      return p;
    }
  }
  return CallocSlow(n, m, ra);
}

namespace {
// Calloc when the pooled fast path declined (a function of its own, so that the fast path keeps no
// frame pointer).
__attribute__((noinline)) void* CallocSlow(size_t n, size_t m, void* ra) {
  ThreadState& ts = t_state;
  size_t total;
  bool overflow = __builtin_mul_overflow(n, m, &total);
  switch (Enter(ts)) {
    case Mode::kBootstrap: return overflow ? nullptr : Bootstrap(total, 16);  // static: zero
    case Mode::kPassthrough:
      g_passthrough_allocs.fetch_add(1, std::memory_order_relaxed);
      return PassedThrough(ts, g_real.calloc(n, m), overflow ? 0 : total);
    case Mode::kCounted: break;
  }
  Scope scope(ts);
  track::StartFrame frame;
  const track::StartFrame* from = POOLSCOPE_PROGRAM_FRAME(frame, ra);
  if (!overflow) {
    if (void* p = TryPool(ts, kCalloc, total, 0, ra, from)) return p;
  }
  void* p;
  {
    Guard guard(ts);
    p = g_real.calloc(n, m);
  }
  return RegularAllocated(ts, kCalloc, overflow ? ~size_t{0} : total, p, from);
}
}  // namespace

void* Realloc(Api api, void* p, size_t n, size_t m, void* ra) {
  ThreadState& ts = t_state;
  size_t total = n;
  bool overflow = api == kReallocarray && __builtin_mul_overflow(n, m, &total);
  Mode mode = Enter(ts);
  pool::PoolHeader* h = p != nullptr ? g_pool_map.Find(p) : nullptr;
  if (mode == Mode::kBootstrap || (IsBootstrap(p) && mode == Mode::kPassthrough)) {
    if (overflow) return nullptr;
    void* q = mode == Mode::kBootstrap ? Bootstrap(total, 16) : g_real.malloc(total);
    if (q != nullptr && p != nullptr) {
      size_t old = BootstrapSize(p);
      memcpy(q, p, old < total ? old : total);
    }
    return q;
  }
  if (mode == Mode::kPassthrough && h == nullptr) {
    g_passthrough_allocs.fetch_add(1, std::memory_order_relaxed);
    return PassedThrough(ts, api == kRealloc ? g_real.realloc(p, n) : g_real.reallocarray(p, n, m), overflow ? 0 : total);
  }
  Scope scope(ts);
  track::StartFrame frame;
  const track::StartFrame* from = POOLSCOPE_PROGRAM_FRAME(frame, ra);
  // glibc's reallocarray calls realloc through the PLT: what it calls in turn passes through uncounted.
  auto real_call = [&]() {
    Guard guard(ts);
    return api == kRealloc ? g_real.realloc(p, n) : g_real.reallocarray(p, n, m);
  };
  if (p == nullptr || IsBootstrap(p)) {
    // realloc(NULL, n) is an allocation.
    if (!overflow && p == nullptr) {
      if (void* q = TryPool(ts, api, total, 0, ra, from)) return q;
    }
    void* q;
    if (p == nullptr) {
      q = real_call();
    } else {
      q = overflow ? nullptr : g_real.malloc(total);
      if (q != nullptr) memcpy(q, p, BootstrapSize(p) < total ? BootstrapSize(p) : total);
    }
    return RegularAllocated(ts, api, total, q, from);
  }
  if (h == nullptr) {
    // A real block: the next allocator resizes it. Its record goes first, as a free's does: once the
    // next allocator has moved the block, another thread may be handed its old address, and record it,
    // before this one could erase it.
    // One step for a report signal (Busy), the next allocator's call included: its record is out of
    // the table until the new one is in.
    Busy busy(ts);
    ++ts.c.regular.ncalls[api];
    uint64_t old_size = 0;
    const bool recorded = TrackFree(ts, p, &old_size);
    void* q = real_call();
    if (q != nullptr) {
      ++ts.c.regular.nreallocs;
      TrackAlloc(ts, q, total, from);
    } else if (total == 0 && !overflow) {
      ++ts.c.regular.nfrees;  // glibc: realloc(p, 0) frees p
    } else if (recorded) {
      // The block stays where it was (no memory to resize it): recorded again, under this call's stack.
      TrackAlloc(ts, p, old_size, from);
    }
    return q;
  }
  ++ts.c.logical.ncalls[api];
  // A pooled block.
  if (overflow) {
    errno = ENOMEM;
    return nullptr;
  }
  if (total == 0) {
    FreePooled(ts, api, p, h);
    --ts.c.logical.ncalls[api];  // FreePooled counted the call again: it was counted above
    return nullptr;
  }
  size_t old = g_domain->UsableSize(h, p);
  // Under valgrind the block is as long as the program asked (memcheck holds the rest of its granule
  // no-access), which poolscope does not know without tracking: the block always moves, and the copy,
  // which may read that rest, runs with memcheck's reports off.
  const bool valgrind_move = POOLSCOPE_UNLIKELY(g_valgrind) && old != 0;
  if (old == 0) {
    // Not a live block of ours: reported like a bad free, and nothing changes.
    ++ts.tc.stats().invalid_frees;
    RecordBadFree(p, false);
    errno = EINVAL;
    return nullptr;
  }
  if (total <= old && !valgrind_move) {
    ++ts.c.logical.nreallocs;
    if (POOLSCOPE_UNLIKELY(g_tracking)) {
      g_domain->NoteBlock(h, p, static_cast<uint32_t>(total), PooledStackId(ts, total, from));
    }
    return p;
  }
  void* q = nullptr;
  if (Decide(ts, total, 0, ra) < 0) {
    {
      ValgrindQuiet quiet(POOLSCOPE_UNLIKELY(g_valgrind));
      q = ts.tc.Carve(total);
    }
    if (q != nullptr) {
      --ts.tc.stats().hits;  // a move, not a logical allocation
      if (POOLSCOPE_UNLIKELY(g_tracking)) {
        pool::InfoRef slot = ts.tc.InfoSlot(q);  // before the capture (see InfoSlot)
        pool::StoreBlockInfo(slot, static_cast<uint32_t>(total), PooledStackId(ts, total, from));
      }
      if (POOLSCOPE_UNLIKELY(g_valgrind)) {
        ts.tc.ForgetLast();
        ValgrindDescribeAlloc(q, total, false);
        WipeStackBelow();
      }
    }
  }
  bool spill = q == nullptr;
  if (spill) {
    q = g_real.malloc(total);
    ++ts.c.real.ncalls[kMalloc];
    if (q == nullptr) return nullptr;
    ++ts.c.real.nallocs;
    ts.c.real.nbytes += total;
    ++ts.tc.stats().spills;
  }
  {
    ValgrindQuiet quiet(valgrind_move);
    memcpy(q, p, old < total ? old : total);
  }
  if (POOLSCOPE_UNLIKELY(g_valgrind)) ValgrindDescribeFree(h, p);
  {
    ValgrindQuiet quiet(POOLSCOPE_UNLIKELY(g_valgrind));
    ts.tc.Free(h, p);
  }
  if (!spill) --ts.tc.stats().pooled_frees;  // the block moved within the pools
  ++ts.c.logical.nreallocs;
  if (spill) TrackAlloc(ts, q, total, from);
  return q;
}

int PosixMemalign(void** out, size_t align, size_t n, void* ra) {
  ThreadState& ts = t_state;
  bool valid = align >= sizeof(void*) && (align & (align - 1)) == 0;
  switch (Enter(ts)) {
    case Mode::kBootstrap:
      if (!valid) return EINVAL;
      *out = Bootstrap(n, align);
      return *out != nullptr ? 0 : ENOMEM;
    case Mode::kPassthrough:
      g_passthrough_allocs.fetch_add(1, std::memory_order_relaxed);
      return g_real.posix_memalign(out, align, n);
    case Mode::kCounted: break;
  }
  Scope scope(ts);
  if (valid) {
    if (void* p = TryPool(ts, kPosixMemalign, n, align, ra)) {
      *out = p;
      return 0;
    }
  }
  int rc;
  {
    Guard guard(ts);
    rc = g_real.posix_memalign(out, align, n);
  }
  RegularAllocated(ts, kPosixMemalign, n, rc == 0 ? *out : nullptr);
  return rc;
}

void* AlignedEntry(Api api, size_t align, size_t n, void* ra) {
  ThreadState& ts = t_state;
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto real_call = [&]() -> void* {
    switch (api) {
      case kAlignedAlloc: return g_real.aligned_alloc(align, n);
      case kMemalign: return g_real.memalign(align, n);
      case kValloc: return g_real.valloc(n);
      default: return g_real.pvalloc(n);
    }
  };
  if (api == kValloc || api == kPvalloc) align = page;
  switch (Enter(ts)) {
    case Mode::kBootstrap: return Bootstrap(api == kPvalloc ? (n + page - 1) & ~(page - 1) : n, align);
    case Mode::kPassthrough:
      g_passthrough_allocs.fetch_add(1, std::memory_order_relaxed);
      return real_call();
    case Mode::kCounted: break;
  }
  Scope scope(ts);
  if (align != 0 && (align & (align - 1)) == 0) {
    if (void* p = TryPool(ts, api, n, align, ra)) return p;
  } else {
    ++ts.tc.stats().misses[pool::kMissAlignment];
  }
  void* p;
  {
    Guard guard(ts);  // valloc and pvalloc may call memalign through the PLT
    p = real_call();
  }
  return RegularAllocated(ts, api, n, p);
}

size_t UsableSize(void* p) {
  if (p == nullptr) return 0;
  if (IsBootstrap(p)) return BootstrapSize(p);
  if (pool::PoolHeader* h = g_pool_map.Find(p)) {
    const size_t usable = g_domain->UsableSize(h, p);
    // Under valgrind the program may now use all of it: memcheck's no-access rest of the granule opens.
    if (POOLSCOPE_UNLIKELY(g_valgrind) && usable != 0) ValgrindOpenUsable(p, usable);
    return usable;
  }
  if (!RealResolved() && !ResolveReal()) return 0;
  return g_real.malloc_usable_size != nullptr ? g_real.malloc_usable_size(p) : 0;
}

// ---- C++ operators ------------------------------------------------------------------------------------

void* NewSlow(Api api, size_t n, void* ra) { return NewForm(api, n, 0, false, ra); }

void* NewForm(Api api, size_t n, size_t align, bool nothrow, void* ra) {
  ThreadState& ts = t_state;
  bool array = api == kNewArray;
  std::align_val_t al = static_cast<std::align_val_t>(align);
  const std::nothrow_t& nt = std::nothrow;
  auto real_call = [&]() -> void* {
    const RealFns& r = g_real;
    if (align == 0) {
      if (nothrow) {
        auto f = array ? r.op_new_array_nothrow : r.op_new_nothrow;
        return f != nullptr ? f(n, nt) : r.malloc(n);
      }
      auto f = array ? r.op_new_array : r.op_new;
      if (f != nullptr) return f(n);
    } else {
      if (nothrow) {
        auto f = array ? r.op_new_array_aligned_nothrow : r.op_new_aligned_nothrow;
        if (f != nullptr) return f(n, al, nt);
        void* p = nullptr;
        return r.posix_memalign(&p, align < sizeof(void*) ? sizeof(void*) : align, n) == 0 ? p : nullptr;
      }
      auto f = array ? r.op_new_array_aligned : r.op_new_aligned;
      if (f != nullptr) return f(n, al);
    }
    // No C++ runtime below us: behave like it.
    void* p = nullptr;
    if (align == 0) {
      p = r.malloc(n);
    } else if (r.posix_memalign(&p, align < sizeof(void*) ? sizeof(void*) : align, n) != 0) {
      p = nullptr;
    }
    if (p == nullptr) throw std::bad_alloc();
    return p;
  };
  switch (Enter(ts)) {
    case Mode::kBootstrap: {
      void* p = Bootstrap(n, align == 0 ? 16 : align);
      if (p == nullptr && !nothrow) throw std::bad_alloc();
      return p;
    }
    case Mode::kPassthrough:
      g_passthrough_allocs.fetch_add(1, std::memory_order_relaxed);
      return PassedThrough(ts, real_call(), n);
    case Mode::kCounted: break;
  }
  Scope scope(ts);
  track::StartFrame frame;
  const track::StartFrame* from = POOLSCOPE_PROGRAM_FRAME(frame, ra);
  if (void* p = TryPool(ts, api, n, align, ra, from)) return p;
  // Counted before the call: operator new may throw.
  ++ts.c.regular.ncalls[api];
  ++ts.c.sizes[SizeBucket(n)];
  void* p;
  {
    Guard guard(ts);  // libstdc++'s operator new calls malloc: passed through, uncounted
    p = real_call();
  }
  if (p != nullptr) {
    ++ts.c.regular.nallocs;
    ts.c.regular.nbytes += n;
    TrackAlloc(ts, p, n, from);
  }
  return p;
}

void DeleteForm(Api api, void* p, size_t size, size_t align, bool nothrow) {
  pool::PoolHeader* h = g_pool_map.Find(p);
  ThreadState& ts = t_state;
  if (IsBootstrap(p)) return;
  Mode mode = Enter(ts);
  if (mode != Mode::kCounted && h == nullptr) {
    if (p == nullptr) return;
    g_passthrough_frees.fetch_add(1, std::memory_order_relaxed);
    if (RealResolved()) RealDelete(api, p, size, align, nothrow);
    return;
  }
  Scope scope(ts);
  if (h != nullptr) return FreePooled(ts, api, p, h);
  CountFree(ts.c.regular, api, p != nullptr);
  TimelineCount(ts.c.regular.ncalls[api]);
  TrackFree(ts, p);
  Guard guard(ts);
  RealDelete(api, p, size, align, nothrow);
}


}  // namespace poolscope
