// File: interpose/tracking.h
//
// Leak accounting (track=1): every live logical block is known with its size and the id of its
// allocation stack (a real block in a table, a pooled block beside its pool's marks), so that at exit the report can say who allocated each block still live, and which
// call sites the pools serve. Stacks are captured by walking .eh_frame rules (correct without frame
// pointers; GCC's unwinder for the frames the walk cannot read) and interned in a depot; per-site counters sit beside the depot. All memory is poolscope's own (mmap).
// Symbolizing happens only when a report is written.
//
// Thread-safety: OnAlloc/OnFree from any thread, concurrently (each thread's young blocks in slots of
// its own, older ones in a table with striped locks, lock-free depot lookups, per-site counts batched
// per thread into relaxed atomic counters). Each thread keeps
// the memo of its last stack capture and its last stack id in its own TLS (docs/tracking.md).
// Aggregate() may run while other threads allocate.
#ifndef POOLSCOPE_INTERPOSE_TRACKING_H_
#define POOLSCOPE_INTERPOSE_TRACKING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "track/stack_capture.h"
#include "track/stack_depot.h"

namespace poolscope {

enum BlockFlags : uint8_t {
  kBlockReal = 0,    // a real block of the next allocator
  kBlockPooled = 1,  // carved from a pool
};

// Calls fn(ptr, size, stack_id, arg) for every live pooled block, with the size and stack id kept for
// it (see OnPooledAlloc). The pools belong to the layer above, which hands this walk in at init.
// Walks the live pooled blocks, pool by pool: on_pool(arg) (when not null) before each pool's blocks.
using PooledBlockWalk = void (*)(void (*fn)(uintptr_t ptr, uint32_t size, uint32_t stack_id, void* arg), void* arg,
                                 void (*on_pool)(void* arg));

// Stack ids are below this (the depot's capacity).
constexpr uint32_t kMaxStackIds = 1u << 20;

// Called once at start-up when track=1; false when the memory could not be had (tracking stays off).
// `pooled_blocks`: how the live pooled blocks are found (nullptr: there are none).
bool TrackingInit(int stack_depth, PooledBlockWalk pooled_blocks);
bool TrackingOn();
// `poolscope attach` is about to route the program's calls through its hooks (attach.cc): from then on
// a hook's frame at the top of a captured stack is dropped, so stacks start at the program's call.
void TrackingHooked();
// Live blocks the table could not record (no memory for it: an address-space limit); while it is
// nonzero the report's leaks are incomplete and it says `tracked: false`.
uint64_t TrackingUnrecorded();
// A logical allocation of `size` bytes at `p`, a real block. `skip`: frames of poolscope's own to
// leave out. `from`, when known: the program's frame that called the entry point (ProgramFrame in
// shim_internal.h); the stack is captured from there, and `skip` does not apply.
void OnAlloc(void* p, size_t size, int skip, const track::StartFrame* from = nullptr);
// A logical allocation of `size` bytes served from a pool: captures its stack and counts it for its
// site, and returns the stack id, which the caller keeps with the block beside its pool mark
// (pool::BlockInfo). Pooled blocks are not in the table: their pools' marks say which are live, so
// their frees record nothing here, and the report finds them with the walk given to TrackingInit.
uint32_t OnPooledAlloc(size_t size, int skip, const track::StartFrame* from = nullptr);
// A logical free of a real block. Returns false when `p` was not in the table; else sets *size (when
// `size` is not null) to the size it was recorded with.
bool OnFree(void* p, uint64_t* size = nullptr);
// A hint, as early as possible before OnFree(p): starts loading the table lines it may touch.
void PrefetchFree(void* p);
// The stack id of the calling code (for errors), or of the stack above `from` (see OnAlloc).
uint32_t CaptureStackId(int skip, const track::StartFrame* from = nullptr);
// Per-site counters, for real allocations a site caused (pool creations are charged to the site whose
// request created the pool).
void ChargeRealAlloc(uint32_t stack_id);

// Explicit arenas. An open arena's blocks are live logical blocks until it closes, and are never freed
// one by one, so they are not put in the live table. A tracked arena captures one stack, at open; each
// block adds only the return address of the call that allocated it, and the arena counts its blocks by
// that address. A block's stack is that address followed by the open's stack (without the open's own
// frame when both lie in one function: frame_rules.h FunctionOf), so an arena never closed shows in the
// report's leaks under the stacks that allocated its blocks. The per-site counters take a closed arena's
// blocks at close, batched per thread; the report adds the open arenas' blocks to them.
struct ArenaTrack;
// Registers an arena opened while tracking is on, its stack captured as OnAlloc's (`skip`, `from`) and
// starting at `ra`, the program's return address, when that is among its first frames (the frames
// before it are the client library's); nullptr when no memory could be had (untracked). Records are
// kept and reused: no allocation per open.
ArenaTrack* OnArenaOpen(int skip, const track::StartFrame* from, uintptr_t ra);
// A block of `size` bytes allocated in the arena (pooled, or on the regular path) by the call that
// returns to `ra`.
void OnArenaAlloc(ArenaTrack* arena, size_t size, uint8_t flags, uintptr_t ra);
// The arena closed: its blocks are gone. Adds their bytes to *pooled_bytes and *real_bytes (when not
// null), as OnArenaAlloc's flags said.
void OnArenaClose(ArenaTrack* arena, uint64_t* pooled_bytes = nullptr, uint64_t* real_bytes = nullptr);

// The calling thread has ended (its exit handler): counts it kept back are added now.
void TrackingThreadExit();

// After dlclose: the stack walk's cached frame rules may describe code that is gone.
void TrackingCodeUnmapped();

// fork() handlers.
void TrackingForkPrepare();
void TrackingForkParent();
void TrackingForkChild();

// Report time.
struct LeakGroup {
  uint32_t stack_id;
  uint8_t kind;  // track::LeakKind, from the reachability scan (still reachable when none ran)
  uint64_t blocks;
  uint64_t bytes;
  uint64_t pooled_blocks;
};
struct SiteCounters {
  uint32_t stack_id;
  uint64_t allocs;
  uint64_t hits;
  uint64_t real_allocs;
  uint64_t bytes;
};
struct LiveTotals {
  uint64_t blocks, bytes, pooled_blocks, pooled_bytes, real_blocks, real_bytes;
  uint64_t arena_pooled_bytes;  // of pooled_bytes, the open arenas' blocks
  uint64_t pools;               // the pools walked (counted only with `pools_pinned`)
};
// Makes *groups the largest `max` groups (largest bytes first, then most blocks, then the lower stack
// id) and returns how many groups exist in all. Groups are by (kind, stack): a block's kind is kind_of(ptr)
// (blocks without an address, an open arena's, are still reachable), or still reachable for every
// block when kind_of is null.
// Allocates through the normal malloc: call it under the reentrancy guard.
// `pools_pinned` (when not null): per stack id, the pools holding at least one of its live blocks (a
// pool counts for every stack with a block in it), counted in the same walk of the pools.
size_t AggregateLeaks(std::vector<LeakGroup>* groups, size_t max, LiveTotals* totals, uint8_t (*kind_of)(uintptr_t ptr) = nullptr,
                      std::vector<uint64_t>* pools_pinned = nullptr);
size_t TopSites(SiteCounters* sites, size_t max);
// One site's counters (those of an open arena's blocks not yet charged to it aside).
SiteCounters SiteOf(uint32_t stack_id);
// The frames of a stack, copied into pcs[0..track::kMaxStackDepth); 0 when unknown.
int StackFrames(uint32_t stack_id, uintptr_t* pcs);

// For leak_exitcode (interpose/leak_exit.h). Calls fn(ptr, arg) for every live block that has an
// address (arena blocks have none), with a lock of the table held: fn must not call into tracking.
void ForEachLiveBlock(void (*fn)(uintptr_t ptr, void* arg), void* arg);
// For the reachability scan: calls fn(ptr, size, pooled, arg) for every live block the live table
// records (not the pooled blocks whose pools' metadata record them: the scan walks those with the
// pools), with a lock of the table held: fn must not call into tracking.
void ForEachTrackedBlockInfo(void (*fn)(uintptr_t ptr, uint64_t size, bool pooled, void* arg), void* arg);
// Remembers how many blocks each open tracked arena holds now.
void MarkArenaBaseline();
// Blocks of the open tracked arenas: all of them, and those allocated since MarkArenaBaseline (all of
// an arena opened since).
void CountArenaBlocks(uint64_t* blocks, uint64_t* since_baseline);

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_TRACKING_H_
