// File: pool/thread_cache.h
//
// A thread's side of the pools (pool.h): ThreadCache, whose inline paths carve and free the implicit
// arena's blocks and carve and close explicit arenas (Arena), and its cache of free pools.
//
// Thread-safety: as pool.h says; a ThreadCache and its arenas belong to one thread.
#ifndef POOLSCOPE_POOL_THREAD_CACHE_H_
#define POOLSCOPE_POOL_THREAD_CACHE_H_

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "pool/pool.h"

namespace poolscope {
namespace pool {

// A block allocated on an explicit arena's regular path, freed at close.
struct RegularBlock {
  RegularBlock* next;
  void* p;
};

// An explicit arena (poolscope_arena_open). Confined to its thread.
// Its first five fields are struct poolscope_arena_view of interpose/poolscope.h (layout 1), which
// programs read and write inline: cur and end, the carve table row and limit the layer above sets at
// open, and the count of pooled blocks (inline carves included).
struct Arena {
  char* cur;
  char* end;
  uint64_t* counts;  // the layer above's per-size counts of inline carves; unused here
  size_t limit;      // requests of 1..limit bytes the program may carve inline; 0: none
  uint64_t pooled_blocks;
  Arena* next_free;  // in its thread's list of closed arenas, for reuse
  PoolHeader* pool;
  char* pool_base;  // the pool's base, while it has one
  RegularBlock* regular;
  uint64_t regular_blocks;
  void* track;  // the layer above's leak-tracking record for this arena, or nullptr
};

// One per thread: the implicit arena's current pool, the cache of free pools, and the counters.
class ThreadCache {
 public:
  explicit ThreadCache(Domain* domain) { Init(domain); }
  // For thread_local storage: constant-initialised, attached to its domain by Init() on first use.
  constexpr ThreadCache() {}
  void Init(Domain* domain) {
    domain_ = domain;
    align8_ = domain->config().align8;
    // A BlockInfo word per 2^info_shift bytes of pool, of info_word bytes: address >> info_div_.
    info_div_ = domain->info_shift() - (domain->info_word() == 8 ? 3 : 2);
    info_wide_ = domain->info_word() == 8;
    // Pooling off: no arena ever finds room (pools are never cached either; this keeps it obvious).
    pool_size_ = domain->config().enabled ? domain->config().pool_size : 0;
    max_cached_ = domain->config().max_cached;
    AllowArenaSlot(true);
  }
  ThreadCache(const ThreadCache&) = delete;
  ThreadCache& operator=(const ThreadCache&) = delete;

  Domain* domain() const { return domain_; }
  PoolStats& stats() { return stats_; }
  const PoolStats& stats() const { return stats_; }
  // Pools cached, and those kept by closed arenas for their next open (TryCloseArena).
  int cached() const { return ncached_ + kept_pools_ + (SlotArena() != nullptr && SlotArena()->pool != nullptr); }
  bool dead() const { return dead_; }
  PoolHeader* current() const { return pool_; }

  // Carves a malloc-family block of `n` bytes (1 <= n <= pool_size) from the implicit arena's current
  // pool, or returns nullptr when it has no room (or there is none yet). No call, no atomic RMW: a
  // compare, the mark (one byte store), the live count, the block carved last. The caller counts the
  // hit (Carve does).
  POOLSCOPE_ALWAYS_INLINE void* TryCarve(size_t n) {
    if (POOLSCOPE_UNLIKELY(align8_)) return TryCarve8(n);
    return TryCarve16(n);
  }

  // TryCarve without the malloc_align=8 test, for a domain without it (the shim's inline path runs
  // only then): blocks of whole 16-byte steps on 16-byte boundaries.
  POOLSCOPE_ALWAYS_INLINE void* TryCarve16(size_t n) {
    uintptr_t p = cur_;
    // n rounded up to 16 as ((n - 1) | 15) + 1 (so n = 0 is not allowed): the shim's limit test has
    // n - 1 at hand already.
    uintptr_t next = p + ((n - 1) | 15) + 1;
    // An empty thread starts with cur_ == end_ == 0, so its first request finds no room.
    if (POOLSCOPE_UNLIKELY(next > end_)) return nullptr;
    // A carve point is an address inside a pool, never 0: callers' null tests fold away.
    if (p == 0) __builtin_unreachable();
    return Carved(p, next, p);
  }

  // TryCarve with malloc_align=8: min(16, the largest power of two <= n) aligned, at least 8.
  POOLSCOPE_ALWAYS_INLINE void* TryCarve8(size_t n) {
    uintptr_t size = (n + 7) & ~uintptr_t{7};
    uintptr_t a = n >= 16 ? 16 : 8;
    uintptr_t p = (cur_ + a - 1) & ~(a - 1);
    if (POOLSCOPE_UNLIKELY(p + size > end_)) return nullptr;
    if (p == 0) __builtin_unreachable();
    // FreeLast zeroes in steps of 16 bytes: a block of 8 (mod 16) bytes is named last only where the
    // 8 bytes past it are the pool's (and free, so zero already).
    return Carved(p, p + size, p + ((size + 15) & ~uintptr_t{15}) <= end_ ? p : kNoBlock);
  }

  // TryCarve, else a fresh pool (the current one reset in place, or retired), counting the hit.
  // nullptr only when no pool can be had (out of memory).
  inline void* Carve(size_t n) {
    void* p = CarveUncounted(n);
    if (p != nullptr) ++stats_.hits;
    return p;
  }
  // Carve without counting the hit, for a caller that counts it with the call (see Carve).
  inline void* CarveUncounted(size_t n) {
    void* p = TryCarve(n);
    if (POOLSCOPE_UNLIKELY(p == nullptr)) p = CarveSlow(n);
    return p;
  }

  // Frees `p` if it is the block this thread carved last and it is still live (the LIFO case: a
  // temporary freed before anything else is carved): no pool-map lookup; the block is zeroed and the
  // carve point moves back over it, so the next request reuses it. 18 instructions in the shim's free
  // for a block of 16 bytes that leaves the pool fresh: compare, mark store, zeroing (5), the carve
  // point, last_, the start compare, the live count and one count. Counts the pooled free in *nfreed,
  // or, when the free leaves the pool fresh (a reset in place), in *nreset instead: that one count
  // stands for the free and the reset. Counting before the rare call out of line leaves it last, so
  // that the caller needs no register kept across it.
  POOLSCOPE_ALWAYS_INLINE bool FreeLast(void* p, uint64_t* nfreed, uint64_t* nreset) {
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    // The block is live: last_ is cleared by every other way this thread ends a block (FreeOwn,
    // FoldRemoteFrees, resets, retiring), and by another thread that frees it (Domain::FreeSlow), so
    // the remote bit need not be looked at. (kNoBlock when there is none.)
    if (POOLSCOPE_UNLIKELY(!IsLast(a))) return false;
    // (The carve kept the block's mark address: no shift of the address here.)
    return FreeKnownLast(p, *reinterpret_cast<std::atomic<uint8_t>*>(last_mark_), nfreed, nreset);
  }

  // FreeLast once `p` is known to be the block carved last (or, for FreeOwnTracked, to end at the
  // carve point), without reading last_ back; `mark` is its mark byte.
  POOLSCOPE_ALWAYS_INLINE bool FreeKnownLast(void* p, std::atomic<uint8_t>& mark, uint64_t* nfreed,
                                             uint64_t* nreset) {
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    mark.store(kMarkStarted, std::memory_order_relaxed);
    // Zeroed in steps of 16 bytes, at least one: a block named last is a whole number of them, or
    // (malloc_align=8) ends 8 bytes short of one that is still the pool's, beyond the carve point.
    const uintptr_t end = cur_;
    ZeroStep(a);
    for (a += 16; a < end; a += 16) ZeroStep(a);
    cur_ = reinterpret_cast<uintptr_t>(p);
    last_.store(kNoBlock, std::memory_order_relaxed);
    if (reinterpret_cast<uintptr_t>(p) == fresh_) {
      // The block carved first in a fresh pool, and the only one since (the carve point is at the
      // start only while nothing is live): the pool is fresh again, a reset in place with nothing
      // left to do. Its start mark stays, so a second free of p is told from an interior one.
      live_ = 0;
      ++*nreset;
      return true;
    }
    ++*nfreed;
    if (POOLSCOPE_UNLIKELY(--live_ == 0)) EmptiedInPlace();
    return true;
  }

  // Frees `p` if it is a live block of this thread's current pool `h`: the owner's fast path, no atomic
  // read-modify-write. Returns false for anything else. The caller counts the pooled free.
  POOLSCOPE_ALWAYS_INLINE bool FreeOwn(PoolHeader* h, void* p) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (POOLSCOPE_UNLIKELY(!IsOwnLive(h, a))) return false;
    FreeOwnLive(a);
    return true;
  }

  // FreeOwn for a caller that records every free (track=1), for which no block is ever named last
  // (ForgetLast: the inline free, which records nothing, must not take it). A block that ends at the
  // carve point (no block starts between it and cur_: its next marks are 0) is freed as FreeLast frees
  // the last block (FreeKnownLast): zeroed, the carve point moved back over it, and when it was the
  // pool's first block, the pool fresh again with nothing else to do (so a tracked malloc/free pair
  // does not pay EmptiedInPlace). Counts the pooled free in *nfreed, or the free and the reset in
  // *nreset.
  POOLSCOPE_ALWAYS_INLINE bool FreeOwnTracked(PoolHeader* h, void* p, uint64_t* nfreed, uint64_t* nreset) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (POOLSCOPE_UNLIKELY(!IsOwnLive(h, a))) return false;
    const uintptr_t end = cur_;
    uintptr_t q = a + kGranule;
    while (q < end && MarkAt(q).load(std::memory_order_relaxed) == 0) q += kGranule;
    // (FreeLast zeroes in steps of 16 bytes: with malloc_align=8, only where they stay in the pool, as
    // the carve names a block last.)
    if (q >= end && a + ((end - a + 15) & ~uintptr_t{15}) <= end_) {
      // A tail free before this one left its block's start mark at the carve point (FreeLast keeps
      // it, for the next carve to overwrite). Carving resumes at `a` now, and a block carved there
      // may cover `end`: clear that mark, or it would end such a block early (UsableSize, realloc).
      if (end < end_) MarkAt(end).store(0, std::memory_order_relaxed);
      return FreeKnownLast(p, MarkAt(a), nfreed, nreset);
    }
    FreeOwnLive(a);
    ++*nfreed;
    return true;
  }

  // The current pool has no live block left (and no remote free pending: those count as live): zero
  // what was carved and start again at its base. Out of line.
  void EmptiedInPlace();

  // Frees `p`, a block of `h` (from Domain::Find), from any thread.
  inline Domain::FreeResult Free(PoolHeader* h, void* p) {
    uint64_t reset = 0;
    if (POOLSCOPE_LIKELY(FreeLast(p, &stats_.pooled_frees, &reset))) {
      stats_.pooled_frees += reset;
      stats_.resets_in_place += reset;
      return Domain::FreeResult::kFreed;
    }
    if (POOLSCOPE_LIKELY(FreeOwn(h, p))) {
      ++stats_.pooled_frees;
      return Domain::FreeResult::kFreed;
    }
    return domain_->FreeSlow(this, h, p);
  }

  // Domain::FreeRetiredAlone for this thread, for a caller that counts the free itself (the shim's
  // nfast): the free of a block whose pool this thread (or another) retired, without FreeSlow's layers.
  bool FreeRetiredAlone(PoolHeader* h, void* p) {
    return domain_ != nullptr && domain_->FreeRetiredAlone(this, h, p);
  }

  // Explicit arenas.
  // Carves `size` bytes aligned to `align` (a power of two) from `arena`'s pool, taking one lazily; sets
  // *reason and returns nullptr when the request must take the regular path.
  void* ArenaCarve(Arena* arena, size_t size, size_t align, int* reason);
  // ArenaCarve's common case, inline, counting the hit. nullptr means "ask ArenaCarve", which also
  // gives the miss reason.
  POOLSCOPE_ALWAYS_INLINE void* ArenaTryCarve(Arena* arena, size_t size, size_t align) {
    void* p = ArenaTryCarveUncounted(arena, size, align);
    if (p != nullptr) ++stats_.hits;
    return p;
  }
  // ArenaTryCarve without counting the hit, for a caller that counts it with the call (the shim, in
  // its carve table). Serves a request whose alignment is a power of two of at most 64 (0 means 16)
  // when it fits the arena's pool, or when the arena has none yet and this thread caches one, which it
  // takes (creating one is ArenaCarve's). When it fits: the alignment tests, the carve point rounded
  // up, one compare with the pool's end, two stores; no call. An arena without a pool has
  // cur == end == nullptr, so its first request fails that compare and takes its pool off that branch.
  POOLSCOPE_ALWAYS_INLINE void* ArenaTryCarveUncounted(Arena* arena, size_t size, size_t align) {
    uintptr_t m = align - 1;
    if (POOLSCOPE_UNLIKELY(m >= kLine || (align & m) != 0)) {
      if (align != 0) return nullptr;
      m = 15;
    }
    m |= kGranule - 1;  // blocks start on granules
    const uintptr_t rounded = size == 0 ? kGranule : (size + kGranule - 1) & ~uintptr_t{kGranule - 1};
    uintptr_t p = (reinterpret_cast<uintptr_t>(arena->cur) + m) & ~m;
    // The first test keeps a huge size from wrapping.
    if (POOLSCOPE_UNLIKELY(size > kMaxPoolSize || p + rounded > reinterpret_cast<uintptr_t>(arena->end))) {
      // (rounded is 0 only when size + 7 wrapped.)
      if (arena->pool != nullptr || rounded - 1 >= pool_size_ || ncached_ == 0) return nullptr;
      PoolHeader* h = cache_[--ncached_];
      ++stats_.pools_reused;
      AttachPool(arena, h);
      p = reinterpret_cast<uintptr_t>(arena->cur);  // 64-aligned, and rounded <= pool_size_: it fits
    }
    arena->cur = reinterpret_cast<char*>(p + rounded);
    ++arena->pooled_blocks;
    // An address inside a pool, never 0: callers' null tests fold away.
    if (p == 0) __builtin_unreachable();
    return reinterpret_cast<void*>(p);
  }
  // Zeroes and returns the arena's pool to this thread's cache (or releases it).
  inline void ArenaClosePool(Arena* arena) {
    PoolHeader* h = arena->pool;
    if (h == nullptr) return;
    stats_.pooled_frees += arena->pooled_blocks;
    // An explicit pool's marks, live counts and retire state were never touched (its blocks are not
    // freed one by one: FreeSlow turns them away before looking at anything else), so zeroing the
    // carved bytes and giving it back its implicit identity is the whole reset.
    const size_t used = static_cast<size_t>(arena->cur - arena->pool_base);
    if (POOLSCOPE_LIKELY(used <= kLine)) {
      ZeroLine(arena->pool_base);
    } else {
      memset(arena->pool_base, 0, used);
    }
    DetachPool(arena, h);
    Adopt(h);
  }
  // ArenaClosePool and DeleteArena in one, inline, for an arena with no regular block, when its carved
  // bytes lie in its pool's first line and this thread keeps the struct; otherwise changes nothing and
  // returns false (the caller takes the long way). Counts the pooled frees. No call: the line zeroed in
  // four 16-byte stores, the struct kept with its pool still attached, empty, so that the next open's
  // first block is carved at once (counted among the cached pools meanwhile, cached()). The struct
  // goes to the slot (TryCloseArenaInSlot) when it is free, else onto the list, where its pool counts
  // against the cache's limit.
  bool TryCloseArena(Arena* arena) {
    if (TryCloseArenaInSlot(arena)) return true;
    if (POOLSCOPE_UNLIKELY(nfree_arenas_ >= max_free_arenas_)) return false;
    if (arena->pool != nullptr) {
      // (Pools kept on the list count against the cache's limit: pools=0 keeps none.)
      if (POOLSCOPE_UNLIKELY(arena->cur - arena->pool_base > static_cast<ptrdiff_t>(kLine) ||
                             ncached_ + kept_pools_ >= max_cached_)) {
        return false;
      }
      EmptyKeptArena(arena);
      ++kept_pools_;
    }
    KeepArena(arena);
    return true;
  }
  // TryCloseArena's inline case, for the open-close loop: the slot (last_arena_) is free, so the struct
  // is kept there: one load and one store each way (TryReuseArena), no count to keep. The slot's pool is
  // beyond the cache's limit (one pool; pools=0 closes the slot, AllowArenaSlot).
  POOLSCOPE_ALWAYS_INLINE bool TryCloseArenaInSlot(Arena* arena) {
    if (POOLSCOPE_UNLIKELY(last_arena_ != nullptr)) return false;
    if (arena->pool != nullptr) {
      if (POOLSCOPE_UNLIKELY(arena->cur - arena->pool_base > static_cast<ptrdiff_t>(kLine))) return false;
      EmptyKeptArena(arena);
    }
    last_arena_ = arena;
    return true;
  }
  // Opens or closes the slot: closed, it holds no struct (one it held goes onto the list, which may
  // exceed its limit by that one until Shutdown) and TryCloseArenaInSlot refuses. Closed at Init with
  // pools=0, and once the thread is dead, for good; the layer above closes it while its inline arena
  // paths are off.
  void AllowArenaSlot(bool allow) {
    if (allow && max_cached_ > 0 && !dead_) {
      if (last_arena_ == NoSlot()) last_arena_ = nullptr;
      return;
    }
    if (Arena* a = SlotArena()) {
      kept_pools_ += a->pool != nullptr;
      KeepArena(a);
    }
    last_arena_ = NoSlot();
  }
  // An arena struct, empty: a closed one of this thread's when it keeps
  // any (no lock, no call), else poolscope's own memory from the backend. nullptr when out of memory.
  Arena* NewArena() {
    if (Arena* a = TryReuseArena()) return a;
    auto* a = static_cast<Arena*>(domain_->backend()->AllocMeta(sizeof(Arena)));
    if (a == nullptr) return nullptr;
    *a = Arena{};
    return a;
  }
  // A closed arena struct of this thread's, else nullptr: the slot's, else the list's. A kept struct is
  // empty already (KeepArena, EmptyKeptArena), and may hold an empty pool (TryCloseArena).
  Arena* TryReuseArena() {
    if (Arena* a = TryReuseSlotArena()) return a;
    Arena* a = free_arenas_;
    if (a == nullptr) return nullptr;
    free_arenas_ = a->next_free;
    --nfree_arenas_;
    kept_pools_ -= a->pool != nullptr;
    return a;
  }
  // NewArena's common case, inline: the slot's struct (no count to keep), else nullptr.
  POOLSCOPE_ALWAYS_INLINE Arena* TryReuseSlotArena() {
    Arena* a = SlotArena();
    if (POOLSCOPE_UNLIKELY(a == nullptr)) return nullptr;
    last_arena_ = nullptr;
    return a;
  }
  // Takes back a closed arena (its pool closed and its regular blocks freed by the caller).
  void DeleteArena(Arena* a) {
    if (POOLSCOPE_LIKELY(nfree_arenas_ < max_free_arenas_)) {
      uint64_t* const counts = a->counts;  // (the layer above's, set once per struct: kept)
      const size_t limit = a->limit;
      *a = Arena{};
      a->counts = counts;
      a->limit = limit;
      KeepArena(a);
    } else {
      domain_->backend()->FreeMeta(a, sizeof(Arena));
    }
  }
  int free_arenas() const { return nfree_arenas_ + (SlotArena() != nullptr); }

  // Whether Adopt would keep a pool (false once the thread is dead: max_cached_ is 0 then).
  bool HasRoom() const { return ncached_ < max_cached_; }
  // Takes a pool into this cache (or releases it when the cache is full or the thread is ending).
  void Adopt(PoolHeader* h) {
    if (POOLSCOPE_LIKELY(HasRoom())) {
      cache_[ncached_++] = h;
    } else {
      domain_->ReleasePool(h, &stats_);
    }
  }

  // Thread exit: the current pool is released if empty or orphaned if it still holds live blocks;
  // cached pools are released. Afterwards pools emptied by this thread are released at once.
  void Shutdown();
  // Releases every cached pool, and the current pool if it holds no live block (drain_at_exit).
  void Drain();
  // fork() child, on the cache of a thread fork() did not copy: marks it dead and leaves its pools
  // where they are, never to be carved from again. fork() stopped that thread at any instruction,
  // possibly halfway through moving a pool between its current slot, its cache and the real
  // allocator (one pool named twice, or a pool already given back still named), so nothing it held
  // can be trusted to be whole; taking its pools over could hand the same memory out twice
  // (tests/programs/fork_pipeline checks for it). The child keeps them as its copy of the parent's
  // memory; the reconciliation's interrupted_by_fork term accounts for them.
  void AbandonAtFork();
  // fork() child, on the forking thread's own cache: a remote free by a thread that fork() did not
  // copy may have been between its two in_flight updates on this thread's pools; no one will finish
  // it, and Retire and Drain, which wait for in_flight to drop to 0, would wait forever.
  void ResetAtFork();

  // Leak tracking: where `p`, a block just carved from the current pool, keeps its BlockInfo, for
  // StoreBlockInfo.
  // It stays the block's while the block lives, whatever this thread carves meanwhile, so a caller
  // that does work between the carve and the store (a stack capture, during which a signal handler
  // may allocate and retire the pool) takes it first.
  // Config::block_info only.
  POOLSCOPE_ALWAYS_INLINE InfoRef InfoSlot(const void* p) const {
    assert(domain_->config().block_info);
    // A word per 16 bytes of pool (8 with malloc_align=8): the address divided by the ratio, biased.
    return InfoRef{reinterpret_cast<char*>(info_at_ + (reinterpret_cast<uintptr_t>(p) >> info_div_)), info_wide_};
  }

  // The next free of the block carved last takes the general path (a caller that must see every free).
  void ForgetLast() { last_.store(kNoBlock, std::memory_order_relaxed); }

  // For the report: the current pool holds live blocks or is held.
  bool has_current() const { return pool_ != nullptr; }

 private:
  friend class Domain;
  friend class ThreadCachePeer;

  // The block [p, next) is carved: marked, counted live, and named last (or not: `last` is p or kNoBlock).
  POOLSCOPE_ALWAYS_INLINE void* Carved(uintptr_t p, uintptr_t next, uintptr_t last) {
    cur_ = next;
    std::atomic<uint8_t>& mark = MarkAt(p);
    mark.store(kMarkBlock, std::memory_order_relaxed);
    ++live_;
    last_.store(last, std::memory_order_relaxed);
    last_mark_ = reinterpret_cast<uintptr_t>(&mark);
    return reinterpret_cast<void*>(p);
  }

  // a == last_: a relaxed load of last_, written as one compare with memory on x86-64 (the compiler
  // does not fold an atomic load into the compare: one instruction more on every free). An aligned
  // 8-byte load is atomic there. ThreadSanitizer builds keep the load it can see.
  POOLSCOPE_ALWAYS_INLINE bool IsLast(uintptr_t a) const {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
    bool eq;
    asm("cmpq %1, %2" : "=@ccz"(eq) : "m"(last_), "r"(a));
    return eq;
#else
    return a == last_.load(std::memory_order_relaxed);
#endif
  }

  // FreeOwn's test: the block at a is a live block of this thread's current pool h (h from Find, so a
  // is inside it), not freed by another thread meanwhile (its remote bit not folded in yet: that
  // would make this free a double one). A pool's owner is this cache exactly while it is pool_ (as
  // far as this thread can see: SetCurrent, Retire and the resets change both before it frees again),
  // so the test compares with pool_ and does not load the header, whose line has often gone cold.
  POOLSCOPE_ALWAYS_INLINE bool IsOwnLive(const PoolHeader* h, uintptr_t a) const {
    return h == pool_ && (a & 7) == 0 &&
           MarkAt(a).load(std::memory_order_relaxed) == kMarkBlock &&
           (RemoteAt(a).load(std::memory_order_relaxed) & (1u << ((a >> 3) & 7))) == 0;
  }
  // FreeOwn's free, once IsOwnLive said yes.
  POOLSCOPE_ALWAYS_INLINE void FreeOwnLive(uintptr_t a) {
    MarkAt(a).store(kMarkStarted, std::memory_order_relaxed);
    if (a == last_.load(std::memory_order_relaxed)) last_.store(kNoBlock, std::memory_order_relaxed);
    if (POOLSCOPE_UNLIKELY(--live_ == 0)) EmptiedInPlace();
  }

  static void ZeroStep(uintptr_t a) {
    reinterpret_cast<uint64_t*>(a)[0] = 0;
    reinterpret_cast<uint64_t*>(a)[1] = 0;
  }

  // The mark byte of the current pool's granule at address a, and the byte of its remote bit.
  std::atomic<uint8_t>& MarkAt(uintptr_t a) const {
    return *reinterpret_cast<std::atomic<uint8_t>*>(marks_at_ + (a >> 3));
  }
  std::atomic<uint8_t>& RemoteAt(uintptr_t a) const {
    return *reinterpret_cast<std::atomic<uint8_t>*>(remote_at_ + (a >> 6));
  }

  // The current pool's live count goes to its header before a slow path works on the header, and
  // comes back after.
  void SyncOut() {
    if (pool_ != nullptr) pool_->live.store(static_cast<int32_t>(live_), std::memory_order_relaxed);
  }
  void SetCurrent(PoolHeader* h);
  // Makes `h` (empty, zeroed) the pool of explicit arena `arena`.
  void AttachPool(Arena* arena, PoolHeader* h) {
    h->kind.store(kExplicit, std::memory_order_relaxed);
    char* const base = domain_->BaseOf(h);
    arena->pool = h;
    arena->pool_base = base;
    arena->cur = base;
    arena->end = base + pool_size_;
  }
  // Undoes AttachPool: `h`, the arena's pool (zeroed by the caller), is an implicit pool again, held by
  // no arena; the caller caches or releases it.
  POOLSCOPE_ALWAYS_INLINE static void DetachPool(Arena* arena, PoolHeader* h) {
    h->kind.store(kImplicit, std::memory_order_relaxed);
    arena->pool = nullptr;
    arena->pool_base = nullptr;
    arena->cur = arena->end = nullptr;
  }

  // The thread is ending (or gone, after fork): pools and arena structs it is given from now on are
  // released, not kept (the caches' limits drop to 0, so their fast paths need no test of their own).
  void MarkDead() {
    AllowArenaSlot(false);
    dead_ = true;
    max_cached_ = 0;
    max_free_arenas_ = 0;
  }
  // Keeps a closed arena struct, empty (no pool, no block, no tracking record), for the next open;
  // the caller checked that the list has room.
  POOLSCOPE_ALWAYS_INLINE void KeepArena(Arena* a) {
    a->next_free = free_arenas_;
    free_arenas_ = a;
    ++nfree_arenas_;
  }
  // Zeroes the first line of an explicit pool (its base): every pool has one (pool bytes are whole
  // lines) and no one else's data lies in it, so a carve that ended inside it is zeroed with fixed stores.
  POOLSCOPE_ALWAYS_INLINE static void ZeroLine(char* line) {
    memset(__builtin_assume_aligned(line, kLine), 0, kLine);
  }
  // Empties a closed arena whose carved bytes lie in its pool's first line, keeping the pool: counts
  // its blocks' frees and zeroes the line.
  POOLSCOPE_ALWAYS_INLINE void EmptyKeptArena(Arena* arena) {
    char* const base = arena->pool_base;
    stats_.pooled_frees += arena->pooled_blocks;
    ZeroLine(base);
    arena->cur = base;
    arena->pooled_blocks = 0;
  }

  void* CarveSlow(size_t n);
  void ResetInPlace();
  // Folds in the remote frees of `h`, whose carved bytes end at `used_end`.
  void FoldRemoteFrees(PoolHeader* h, char* used_end);
  // Retires `h`, this thread's pool until now, whose carved bytes end at `used_end`; its remote frees
  // were folded in just before (CarveSlow, and Shutdown through Drain).
  void Retire(PoolHeader* h, char* used_end);
  PoolHeader* TakePool();

  // What last_ holds when it names no block: an address in the kernel's half of the address space,
  // which no block (and no null pointer, unlike 0) has, and which is a sign-extended 32-bit immediate,
  // so that clearing last_ is one store.
  static constexpr uintptr_t kNoBlock = ~uintptr_t{0} << 31;

  // (Static TLS, whose room a library loaded by dlopen (poolscope attach) finds in glibc's small reserve:
  // no padding to spare. The fields up to cache_ are the hot paths', placed as they are on purpose.)
  Domain* domain_ = nullptr;
  bool align8_ = false;  // a copy of the domain's, to keep the carve free of a dependent load
  bool info_wide_ = false;  // the domain's BlockInfo words are 8 bytes (InfoSlot)
  uint8_t info_div_ = 0;    // log2 of the pool bytes per byte of BlockInfo (InfoSlot)
  bool dead_ = false;
  size_t pool_size_ = 0;  // likewise (0 when pooling is off)
  int max_cached_ = 0;
  uintptr_t cur_ = 0;   // next free byte of the current pool
  uintptr_t end_ = 0;   // base + pool_size of the current pool
  uintptr_t start_off_ = 0;  // Config::carve_offset
  // The block whose LIFO free leaves the pool fresh (FreeLast's reset in place, with nothing to zero
  // before it): the pool's base when carving starts there, else kNoBlock. With a carve offset
  // (valgrind) the pool does not keep the first block's address, which would make a leaked block look
  // referenced; that free then takes EmptiedInPlace, which counts the same reset.
  uintptr_t fresh_ = kNoBlock;
  uintptr_t base_ = 0;  // the current pool's base, copied here so that the slow paths skip the header
  // The current pool's mark bytes, remote bits and BlockInfo words, biased by the pool's base (which is
  // 64-aligned): the mark of the granule at address a is at marks_at_ + (a >> 3), the byte of its remote
  // bit at remote_at_ + (a >> 6), its BlockInfo at info_at_ + (a >> info_div_), so
  // that the fast paths index them with the address and no subtraction. Integers, not pointers: they
  // point below the metadata.
  uintptr_t marks_at_ = 0;
  uintptr_t remote_at_ = 0;
  uintptr_t info_at_ = 0;
  // The start of the block carved last, while it is live; else kNoBlock. Written by this thread
  // (plain stores), and cleared by another thread that frees that block (a compare-and-swap in
  // Domain::FreeSlow), so that the LIFO free never takes a block another thread freed.
  std::atomic<uintptr_t> last_{kNoBlock};
  // The mark byte's address of the block last_ names (meaningless while last_ is kNoBlock).
  uintptr_t last_mark_ = 0;
  int64_t live_ = 0;    // the current pool's live count (its header's `live` is stale meanwhile)
  PoolHeader* pool_ = nullptr;
  PoolHeader* cache_[kMaxCachedPools] = {};
  // Closed arena structs kept for the next open (a program that opens and closes arenas in a loop
  // never reaches the backend), at most kMaxFreeArenas; given back at Shutdown.
  static constexpr int kMaxFreeArenas = 16;
  // The slot: the struct closed last, when TryCloseArenaInSlot found it free (nullptr); not on
  // free_arenas_ nor in its counts (nfree_arenas_, kept_pools_), which the open-close loop then never
  // touches. NoSlot() while closed (AllowArenaSlot).
  static Arena* NoSlot() { return reinterpret_cast<Arena*>(uintptr_t{1}); }
  Arena* SlotArena() const {
    return reinterpret_cast<uintptr_t>(last_arena_) > reinterpret_cast<uintptr_t>(NoSlot()) ? last_arena_ : nullptr;
  }
  Arena* last_arena_ = nullptr;
  Arena* free_arenas_ = nullptr;
  int ncached_ = 0;
  int nfree_arenas_ = 0;
  int max_free_arenas_ = kMaxFreeArenas;  // 0 once the thread is dead, like max_cached_
  int kept_pools_ = 0;                      // pools attached to arenas on free_arenas_
  PoolStats stats_ = {};
};

}  // namespace pool
}  // namespace poolscope

#endif  // POOLSCOPE_POOL_THREAD_CACHE_H_
