// File: interpose/tracking_internal.h
//
// What tracking's files share among themselves, and nothing else of the library uses: the depot, the
// live-block tables and the per-site counters (tracking.cc), each thread's tracking state (TrackThread,
// static TLS, and the TrackBlock it maps), the stack id of an allocation (AllocStackId, inline in the
// live blocks' paths and the arenas'), and the tracked arenas' records (tracked_arenas.cc), which the
// fork handlers and the report's queries (tracking_report.cc) read.
//
// Thread-safety: as tracking.h says. A thread's TrackThread is written by that thread only; the tables,
// the depot and the site counters take any thread; an arena record as its protocol below says.
#ifndef POOLSCOPE_INTERPOSE_TRACKING_INTERNAL_H_
#define POOLSCOPE_INTERPOSE_TRACKING_INTERNAL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "interpose/internal.h"
#include "interpose/tracking.h"
#include "track/live_table.h"
#include "track/recent_blocks.h"
#include "track/stack_capture.h"
#include "track/stack_depot.h"
#include "track/stack_id_cache.h"

// Hidden, as their definitions are (-fvisibility=hidden): the compiler then reaches them directly rather
// than through the GOT.
#pragma GCC visibility push(hidden)

namespace poolscope {

struct ArenaTrack;

namespace tracking_internal {

// ---- tracking.cc --------------------------------------------------------------------------------------

struct alignas(32) Site {
  std::atomic<uint64_t> allocs, hits, real_allocs, bytes;
};

constexpr uint32_t kCapacity = kMaxStackIds;

extern track::StackDepot* g_depot;
extern track::LiveTable* g_table;
extern track::RecentBlocks* g_recent;  // each thread's young blocks, in front of g_table
extern Site* g_sites;
extern int g_depth;
extern bool g_on;
// Attached (TrackingHooked): the program reaches each entry point through a hook of poolscope's own
// (attach.cc), so the frame that called the entry point is the hook's, one below the program's.
extern bool g_hooked;
// Whether pc lies in libpoolscope.so's code.
bool IsOwn(uintptr_t pc);

// The frames of poolscope's own that a capture from `from` starts with: the attach hook's, else none.
// Such a capture takes one frame more (FromDepth) and drops it, so the stack starts at the program's call.
inline int HookFrames(const track::StartFrame& from) {
  return __builtin_expect(g_hooked, false) && IsOwn(from.ra) ? 1 : 0;
}
inline int FromDepth(int hook) {
  return g_depth + hook < track::kMaxStackDepth ? g_depth + hook : track::kMaxStackDepth;
}

// A thread's memo of its last capture (stack_capture.h, about 3 KiB) and the stacks it interned
// lately (stack_id_cache.h, 8 KiB), in one mapping of its own made on its first capture (InternalMap:
// not from InternalAlloc's lists, whose lock a capture inside malloc must not take) and unmapped when
// the thread ends; the cache's pages are touched only as it fills. Not in TLS: glibc carves a thread's
// static TLS out of its stack, and a thread made with PTHREAD_STACK_MIN has 16 KiB in all.
constexpr int kArenaStackCacheBits = 6;
struct TrackBlock {
  track::CaptureMemo memo;
  track::StackIdCache cache;
  // Explicit arenas: the stack ids of (open stack, allocating call) pairs seen lately.
  struct ArenaStack {
    uintptr_t ra;
    uint32_t open_stack;
    uint32_t id;
  } arena_stacks[1 << kArenaStackCacheBits];
};

// Per thread: the id of the last capture's stack and what the memo policy needs, so that the
// common case, an allocation from the same stack as the one before, costs neither a walk of the
// unchanged frames nor a depot lookup. Kept small: it is static TLS (see TrackBlock).
struct TrackThread {
  int busy;  // a capture is under way on this thread (a signal handler's own must not use these)
  // The last capture's request and stack id: when the memo says the capture returned exactly the
  // frames of the one before, the id is the same.
  int last_want;
  int last_skip;
  uint32_t last_id;
  // Whether the memo pays: recording a walked step costs about as much again as walking it, a
  // reused step about half, so below ~60% of steps reused a thread walks without it for a while
  // (perl's short, varying stacks: 54%; python3's: 68%; a loop's: 100%).
  uint32_t memo_off;     // captures left to take without the memo
  uint32_t memo_window;  // captures with the memo in this window
  uint32_t memo_steps, memo_reused;
  // Counts for one site, added to the shared per-site counters when the site changes, every
  // kSiteBatch allocations, at thread exit and before a report: most allocations come from the same
  // site as the one before, and the shared counters cost four atomic additions. The pool hits among
  // them are site_pending - site_real: a pooled allocation adds to two counts, not three.
  uint32_t site_id;
  uint32_t site_pending;
  uint64_t site_real, site_bytes;
  bool ended;  // the thread's exit handler ran: no more batching, no young blocks
  // This thread's young blocks (recent_blocks.h), and whether a call is using them (a signal
  // handler that interrupted it must not).
  track::RecentBlocks::Node* young;
  int young_busy;
  // The memo and the stack cache (TrackBlock): made on the thread's first capture, nullptr before,
  // after the thread's end, or when no memory could be had (block_failed: not tried again).
  TrackBlock* block;
  bool block_failed;
  ArenaTrack* kept_arenas;  // closed tracked arenas' records, for the next open
  // StackFromReturnAddress's last answer.
  uint32_t last_open_raw, last_open_id;
  uintptr_t last_open_ra;
};
// __thread with the initial-exec model, as t_state (thread_state.h): constant-initialised (all zero),
// so every access is a %fs-relative load, with no TLS-init wrapper and no __tls_get_addr.
extern __thread TrackThread t_track __attribute__((tls_model("initial-exec")));

constexpr uint32_t kMemoWindow = 64;  // captures judged together
constexpr uint32_t kMemoRest = 1024;   // captures without the memo after a poor window

// A capture with the memo, for the memo's policy: `steps` of it, `reused` taken from the memo. Inline:
// RepeatedStack, inline in OnAlloc's, OnPooledAlloc's and OnArenaOpen's paths, calls it for every
// stack that repeats.
inline void NoteMemoCapture(TrackThread& tt, uint32_t steps, uint32_t reused) {
  tt.memo_steps += steps;
  tt.memo_reused += reused;
  if (++tt.memo_window == kMemoWindow) {
    if (tt.memo_reused * 10 < tt.memo_steps * 6) tt.memo_off = kMemoRest;
    tt.memo_window = tt.memo_steps = tt.memo_reused = 0;
  }
}

// The stack of the last capture from the program's frame, when a capture from `from` would repeat it
// (its id is last_id): checked, not walked nor looked up. False when it cannot tell.
inline bool RepeatedStack(TrackThread& tt, const track::StartFrame& from, uint32_t* id) {
  const int want = FromDepth(HookFrames(from));
  if (tt.busy != 0 || tt.memo_off != 0 || tt.last_skip != -1 || tt.last_want != want ||
      tt.block == nullptr) {
    return false;
  }
  tt.busy = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const track::CaptureMemo& memo = tt.block->memo;
  const bool repeats = track::RepeatsLastCapture(from, want, memo);
  if (repeats) {
    NoteMemoCapture(tt, memo.last_steps, memo.last_steps);
    *id = tt.last_id;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  tt.busy = 0;
  return repeats;
}

// The stack id of an allocation, for OnPooledAlloc, OnAlloc and OnArenaOpen: the last one when a
// capture from the program's frame would repeat it, else a capture. Inline into each, so `skip + 1`
// counts the caller's own frame.
__attribute__((always_inline)) inline uint32_t AllocStackId(TrackThread& tt, int skip, const track::StartFrame* from) {
  uint32_t id;
  if (from == nullptr || g_depth <= 0 || !RepeatedStack(tt, *from, &id)) id = CaptureStackId(skip + 1, from);
  return id;
}

// Adds to the shared counters of the site `id`.
void AddToSite(uint32_t id, uint64_t allocs, uint64_t hits, uint64_t real, uint64_t bytes);
// Adds the thread's batched counts (TrackThread::site_*) to the shared counters.
void FlushSite(TrackThread& tt);

// ---- tracked_arenas.cc --------------------------------------------------------------------------------
// Records are never freed: every one made is on g_arena_records (g_arenas_lock guards that list and
// g_free_records only); a closed one waits on its thread's list (TrackThread::kept_arenas) for the
// thread's next open, or, once the thread has ended, on g_free_records. Only the record's thread writes
// it, inside a sequence lock (seq odd while it writes; no atomic read-modify-write); readers copy it and
// retry (ReadArena).
//
// A group counts the blocks of one allocating call: those of the open arena (blocks, bytes), and those
// of the record's earlier arenas opened from the same stack (site_*), which its site has not been
// charged for yet. A record reopened from the same stack (a loop's arena) keeps its groups and charges
// nothing; reopened from another stack, at its thread's exit or when it must give a group up, it adds
// them to the shared site counters. The report reads every record's site_* counts besides.

constexpr uint32_t kArenaGroups = 6;  // return addresses an arena counts apart; more share the open's stack

struct ArenaGroup {
  uintptr_t ra;  // 0: blocks of calls that found no group free (their stack is the open's)
  uint8_t flags;
  uint64_t blocks, bytes;
  uint64_t site_blocks, site_bytes;
};

}  // namespace tracking_internal

struct ArenaTrack {
  ArenaTrack* next_all;   // g_arena_records
  ArenaTrack* next_free;  // its thread's kept records, or g_free_records
  std::atomic<uint32_t> seq;
  bool open;
  uint32_t open_stack;
  uint32_t ngroups;
  // groups[kArenaGroups] and [kArenaGroups + 1]: pooled and real blocks past the others (ra 0).
  tracking_internal::ArenaGroup groups[tracking_internal::kArenaGroups + 2];
  std::atomic<uint64_t> baseline_blocks;  // blocks held at MarkArenaBaseline (written by the reader)
};

namespace tracking_internal {

extern SpinLock g_arenas_lock;
extern ArenaTrack* g_arena_records;

struct ArenaCopy {
  bool open;
  uint32_t open_stack;
  ArenaGroup groups[kArenaGroups + 2];  // the unused ones zero
  uint64_t blocks;                      // of the open arena
};

// A consistent copy of `t`; false when none could be had (its thread stays inside a write: a signal
// handler that interrupted it is the reader).
bool ReadArena(const ArenaTrack& t, ArenaCopy* c);

// The stack of a block allocated by the call returning to `ra` in an arena opened with `open_stack`.
uint32_t ArenaBlockStack(uint32_t open_stack, uintptr_t ra);

// A thread that ends charges its kept records' sites and gives the records to the others.
void ReleaseKeptArenas(TrackThread& tt);

// Calls fn(copy) for every arena record (open or not).
template <typename Fn>
void ForEachArenaRecord(Fn fn) {
  ArenaTrack* first;
  {
    SpinLockHolder h(&g_arenas_lock);
    first = g_arena_records;
  }
  // Records are never freed and the list only grows at its head: the walk from the head read under
  // the lock is safe without it.
  ArenaCopy c;
  for (ArenaTrack* t = first; t != nullptr; t = t->next_all) {
    if (ReadArena(*t, &c)) fn(c);
  }
}

// ---- tracking_report.cc -------------------------------------------------------------------------------

// How the live pooled blocks are found (TrackingInit); nullptr: there are none.
extern PooledBlockWalk g_pooled_blocks;

}  // namespace tracking_internal
}  // namespace poolscope

#pragma GCC visibility pop

#endif  // POOLSCOPE_INTERPOSE_TRACKING_INTERNAL_H_
