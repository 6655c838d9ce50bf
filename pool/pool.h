// File: pool/pool.h
//
// Per-thread pooled caches, after JDK 28's pooled confined arenas: small blocks are carved
// sequentially from pools (one real, 64-byte aligned, zero-filled allocation of `pool_size` usable
// bytes each), and a pool goes back to a per-thread cache of at most `max_cached` pools when it empties.
//
// This is a plain library: it knows nothing of preloading. Everything it needs from below (real
// allocations for pools, poolscope's own memory for headers and map leaves) comes through `Backend`, so
// tests inject a fake that counts.
//
// Two kinds of arena own a pool:
//  - the implicit arena of a thread (malloc/free model): blocks are freed one by one, from any thread. A
//    pool counts its live blocks; the current pool resets in place when its count drops to zero; a pool
//    that cannot fit a request is retired, and whichever thread frees its last block zeroes it and takes
//    it into its own cache (or releases it when that cache is full).
//  - explicit arenas (JDK model): at most one pool, taken lazily on the first request that fits; what does
//    not fit takes the regular path and is freed at close; close zeroes the used part and returns the
//    pool to the closing thread's cache.
//
// Memory handed out from a pool is always zero: a pool is zeroed when created and before it is reused.
//
// The library's headers: pool_layout.h (sizes, counters, Backend, Config, a pool's header), this one
// (the Domain every thread shares: pools' creation and release, remote frees, the walks over every
// pool), thread_cache.h (each thread's ThreadCache: the carve and free paths, explicit arenas).
//
// Thread-safety: a ThreadCache and its arenas are used only by their thread, except that any thread may
// free a block of another thread's implicit pool (Domain::Free). The owner's fast paths (carve, free of
// its own block) use no atomic read-modify-write; a free from another thread sets the block's byte in the
// pool's remote map (on lines away from the owner's marks and fields) and the owner folds those in on its
// slow path; if the block is the one the owner carved last, that free first takes it back from the
// owner's ThreadCache::last_ with a compare-and-swap. The retire handshake between the two is
// documented in pool.cc.
#ifndef POOLSCOPE_POOL_POOL_H_
#define POOLSCOPE_POOL_POOL_H_

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "pool/pool_layout.h"

namespace poolscope {
namespace pool {

// The state every thread shares: options, the pool map, and the memory below.
class Domain {
 public:
  Domain(const Config& config, Backend* backend, std::atomic<PoolMap::Leaf*>* map_root);

  const Config& config() const { return config_; }
  Backend* backend() const { return backend_; }
  const PoolMap& map() const { return map_; }

  // The pool holding `p`, or nullptr for a pointer that is not in any pool (a real block).
  PoolHeader* Find(const void* p) const { return map_.Find(p); }

  enum class FreeResult { kFreed, kInvalid, kDouble, kArenaBlock };
  // Frees a block of the pool `h` (found by Find) on behalf of `tc` (the calling thread's cache, which may
  // be nullptr for a thread that has none). Never touches the real allocator except to release an
  // emptied pool. Out of line: the owner's fast path is ThreadCache::FreeOwn.
  FreeResult FreeSlow(ThreadCache* tc, PoolHeader* h, void* p);

  // Usable size of the pooled block at `p` (the distance to the next block start or the carve end), or 0
  // when `p` is not a live block start of `h`.
  size_t UsableSize(const PoolHeader* h, const void* p) const;

  // Creates a pool (pools_created) or nullptr.
  PoolHeader* CreatePool(PoolStats* stats);
  // True once the memory the pool map or the pool metadata needs could not be had from the backend
  // (ReserveLeaf: an address-space limit, RLIMIT_AS, refuses the reservation): from then on
  // CreatePool fails at once, with no real allocation and no system call, rather than try again for
  // every request (a python3 run makes about a million requests a pool would take: a failing mmap
  // each).
  bool exhausted() const { return exhausted_.load(std::memory_order_relaxed); }
  // Zeroes the used part of an emptied pool and resets its marks.
  void ZeroPool(PoolHeader* h, char* used_end);
  // Releases a pool: map entries, real free, header (pools_released).
  void ReleasePool(PoolHeader* h, PoolStats* stats);

  size_t pool_bytes() const { return pool_bytes_; }

  // Leak tracking (Config::block_info): keeps `size` and `stack_id` in the BlockInfo word of the live
  // block at `p`, a block of `h` (see BlockInfo).
  void NoteBlock(PoolHeader* h, const void* p, uint32_t size, uint32_t stack_id) const {
    StoreBlockInfo(InfoOf(h, static_cast<size_t>(static_cast<const char*>(p) - h->base) / kGranule), size, stack_id);
  }
  // Where granule g of `h` keeps its BlockInfo (Config::block_info only).
  InfoRef InfoOf(const PoolHeader* h, size_t g) const {
    assert(config_.block_info);
    char* const slot = reinterpret_cast<char*>(const_cast<PoolHeader*>(h));
    if (wide_info_) return InfoRef{slot + info_offset_ + g * kGranule, true};
    return InfoRef{reinterpret_cast<char*>(&h->mark(g)), false};
  }
  bool wide_info() const { return wide_info_; }
  uint32_t granules() const { return granules_; }
  size_t info_offset() const { return info_offset_; }
  // Calls fn(block, BlockInfo) for every live block of every pool: a block whose start mark says live
  // and that no other thread has freed meanwhile (its remote byte is clear). Explicit arenas' blocks are
  // never marked, so they are not among them. From any thread at any time, without a lock: every pool's
  // metadata lies in slots that are never unmapped, so a walk that races with the pools' owners reads
  // their bytes as they stand (a block carved or freed meanwhile may or may not be seen, and a block
  // carved meanwhile may show its slot's previous size and id); a walk while nothing else runs is exact.
  template <typename F>
  void ForEachLiveBlock(F&& fn) const {
    ForEachPoolWithBlocks([](char*, bool) {}, fn);
  }

  // Calls fn(base, explicit_arena) for every pool that exists (created and not yet released), with
  // the same guarantees as ForEachLiveBlock.
  template <typename F>
  void ForEachPool(F&& fn) const {
    for (const MetaChunk* c = chunks_.load(std::memory_order_acquire); c != nullptr;
         c = c->next.load(std::memory_order_acquire)) {
      const size_t used = c->used.load(std::memory_order_acquire);
      for (size_t i = 0; i < used; ++i) {
        const PoolHeader* h = c->slot(i, meta_bytes_);
        char* const base = WalkBase(*h);
        if (base != nullptr) fn(base, h->kind == kExplicit);
      }
    }
  }

  // For every pool that exists, on_pool(base, explicit_arena), then on_block(block, BlockInfo) for each
  // of its live blocks, in address order: ForEachPool and ForEachLiveBlock in one walk. Same guarantees.
  template <typename P, typename B>
  void ForEachPoolWithBlocks(P&& on_pool, B&& on_block) const {
    for (const MetaChunk* c = chunks_.load(std::memory_order_acquire); c != nullptr;
         c = c->next.load(std::memory_order_acquire)) {
      const size_t used = c->used.load(std::memory_order_acquire);
      for (size_t i = 0; i < used; ++i) {
        const PoolHeader* h = c->slot(i, meta_bytes_);
        char* const base = WalkBase(*h);
        if (base == nullptr) continue;
        on_pool(base, h->kind == kExplicit);
        for (uint32_t g = 0; g < granules_; ++g) {
          if (h->mark(g).load(std::memory_order_relaxed) != kMarkBlock ||
              h->remote(g).load(std::memory_order_relaxed) != 0) {
            continue;
          }
          on_block(static_cast<void*>(base + g * kGranule),
                   config_.block_info ? LoadBlockInfo(InfoOf(h, g)) : BlockInfo{0, 0});
        }
      }
    }
  }

  // Calls fn(begin, end) for each chunk of the metadata slab, the address space reserved for it (its
  // pages are touched as slots are carved). A live pool's slot points into the heap only at that pool
  // (real_block, base, used_end); a free slot, nowhere (FreeHeader clears them).
  template <typename F>
  void ForEachMetaChunk(F&& fn) const {
    for (const MetaChunk* c = chunks_.load(std::memory_order_acquire); c != nullptr;
         c = c->next.load(std::memory_order_acquire)) {
      fn(reinterpret_cast<uintptr_t>(c), reinterpret_cast<uintptr_t>(c) + chunk_bytes_);
    }
  }

  // fork(): the metadata slab's lock is taken before and released (or reset, in the child) after.
  void ForkPrepare() { LockMeta(); }
  void ForkParent() { UnlockMeta(); }
  void ForkChild() { meta_lock_.store(false, std::memory_order_relaxed); }

  // New metadata slots' pages are faulted in ahead of use, this many bytes at a time (one call instead
  // of 16 page faults, which cost several microseconds each in some virtual machines): at most this
  // much resident beyond the slots in use.
  static constexpr size_t kMetaPopulate = size_t{64} << 10;

 private:
  friend class ThreadCache;

  // Pool metadata (meta_bytes_ each: header, mark words, BlockInfo words) is carved in slots from chunks
  // of poolscope's own memory that are never returned (LeafSource) and reused through a free list, so
  // that ForEachLiveBlock can walk every pool's metadata with no list of pools kept on their paths.
  // Chunks are listed oldest first: the walks see pools mostly in the order they were made, which is
  // mostly the order of their addresses (the exit scan's sort relies on it for speed, not for truth).
  struct MetaChunk {
    std::atomic<const MetaChunk*> next;  // set once, when the next chunk is made
    std::atomic<size_t> used;  // slots carved so far
    size_t capacity;
    PoolHeader* slot(size_t i, size_t bytes) const {
      return reinterpret_cast<PoolHeader*>(reinterpret_cast<uintptr_t>(this) + kLine + i * bytes);
    }
  };
  PoolHeader* NewHeader();  // nullptr when out of memory
  void FreeHeader(PoolHeader* h);
  void LockMeta() {
    while (meta_lock_.exchange(true, std::memory_order_acquire)) {
      while (meta_lock_.load(std::memory_order_relaxed)) __builtin_ia32_pause();
    }
  }
  void UnlockMeta() { meta_lock_.store(false, std::memory_order_release); }

  void PoolEmptied(ThreadCache* tc, PoolHeader* h);  // a retired pool's last block was freed
  void GiveUpPool(void* mem, PoolStats* stats);  // CreatePool could not set up the pool of `mem`
  FreeResult FreeRetired(ThreadCache* tc, PoolHeader* h, std::atomic<uint8_t>* mark);

  Config config_;
  Backend* backend_;
  PoolMap map_;
  size_t pool_bytes_;    // the real allocation: pool_size rounded up to 64
  size_t meta_bytes_;    // header + mark words (+ BlockInfo words)
  size_t info_offset_;   // from a pool's header to its first BlockInfo word (wide_info_)
  bool wide_info_;       // block_info with pools of kWideInfoPoolSize or more: a BlockInfo array
  uint32_t granules_;
  // The metadata slab: chunks (oldest first), the free slots, the lock over both and the chunk size.
  std::atomic<const MetaChunk*> chunks_{nullptr};
  MetaChunk* chunk_ = nullptr;  // the newest chunk, where new slots are carved
  PoolHeader* free_headers_ = nullptr;
  std::atomic<bool> meta_lock_{false};
  size_t chunk_bytes_ = 0;
  uintptr_t meta_populated_ = 0;  // the newest chunk's pages are faulted in up to here (NewHeader)
  std::atomic<bool> exhausted_{false};
};

}  // namespace pool
}  // namespace poolscope

#endif  // POOLSCOPE_POOL_POOL_H_
