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

#include <sched.h>

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "pool/pool_layout.h"

namespace poolscope {
namespace pool {

// The state every thread shares: options, the pool map, the list of pools, and the memory below.
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
  // FreeSlow's common case while the process has one thread, for a caller that counts the free itself:
  // `p` is a live block of a retired pool (an implicit pool's block freed after its owner moved on).
  // Frees it (and releases or caches the pool it empties) and returns true; false, having done nothing,
  // for anything else.
  bool FreeRetiredAlone(ThreadCache* tc, PoolHeader* h, void* p);

  // Usable size of the pooled block at `p` (the distance to the next block start, or to the carve
  // point while its pool is current, else to the pool's end), or 0 when `p` is not a live block start
  // of `h`.
  size_t UsableSize(const PoolHeader* h, const void* p) const;

  // No other thread can run the pools' code now (Config::single_threaded): no remote free can be in
  // flight or start, and no walk run on another thread (the exit scan's second thread walks only while
  // the exiting thread makes and releases no pool). A signal handler's walk on this thread runs while
  // the code it interrupted waits, which leaves each pool's entry and memory whole at every
  // instruction (an entry is one store, and a pool is off the list before its memory goes). It stays
  // true until this thread creates one, so a slow path reads it once.
  bool Alone() const { return single_threaded_ != nullptr && __atomic_load_n(single_threaded_, __ATOMIC_RELAXED) != 0; }

  // Creates a pool (pools_created) or nullptr.
  PoolHeader* CreatePool(PoolStats* stats);
  // True once the memory the pool map or the pool list needs could not be had from the backend
  // (ReserveLeaf: an address-space limit, RLIMIT_AS, refuses the reservation): from then on
  // CreatePool fails at once, with no real allocation and no system call, rather than try again for
  // every request (a python3 run makes about a million requests a pool would take: a failing mmap
  // each).
  bool exhausted() const { return exhausted_.load(std::memory_order_relaxed); }
  // Zeroes the pool's bytes below `used_end` and its marks, and makes it an empty implicit pool.
  void ZeroPool(PoolHeader* h, char* used_end);
  // Releases a pool: list entry, map entries, real free (pools_released).
  void ReleasePool(PoolHeader* h, PoolStats* stats);

  size_t pool_bytes() const { return pool_bytes_; }
  // A pool's metadata: its header, marks and remote bits (meta_bytes, 16-byte aligned, beside the pool
  // on either side), its BlockInfo words (info_bytes, before the pool when the slack left there holds
  // them, else after it; see InfoBefore); and the real allocation that holds them and the pool.
  size_t meta_bytes() const { return meta_bytes_; }
  size_t info_bytes() const { return info_bytes_; }
  size_t real_bytes() const { return real_bytes_; }

  // Where a pool's metadata lies in its real allocation: before the pool's base when the slack there
  // holds it (and meta_bytes is no multiple of 64, so that the two cases stay apart), else after the
  // pool's last line.
  static bool MetaBefore(size_t slack_before, size_t meta_bytes) {
    return slack_before >= meta_bytes && meta_bytes % kLine != 0;
  }
  // Where a pool's BlockInfo words lie: lowest in the slack before the pool when what the header,
  // marks and remote bits leave of it holds them, else after the pool (and after the rest of the
  // metadata, when that is after the pool too).
  bool InfoBefore(size_t slack_before) const {
    const size_t left = slack_before - (MetaBefore(slack_before, meta_bytes_) ? meta_bytes_ : 0);
    return info_bytes_ != 0 && left >= info_bytes_;
  }
  // The pool of header `h`: its base (64-aligned).
  char* BaseOf(const PoolHeader* h) const {
    const uintptr_t a = reinterpret_cast<uintptr_t>(h);
    const bool before = meta_bytes_ % kLine != 0 && (a + meta_bytes_) % kLine == 0;
    return reinterpret_cast<char*>(before ? a + meta_bytes_ : a - pool_bytes_);
  }
  // The header of the pool whose real allocation starts at `real`.
  PoolHeader* HeaderOfReal(uintptr_t real) const {
    const uintptr_t base = (real + kLine - 1) & ~uintptr_t{kLine - 1};
    return reinterpret_cast<PoolHeader*>(MetaBefore(base - real, meta_bytes_) ? base - meta_bytes_ : base + pool_bytes_);
  }

  // Remote bit of granule g of `h`: its byte, and the bit in it.
  std::atomic<uint8_t>& RemoteByte(const PoolHeader* h, size_t g) const {
    return *reinterpret_cast<std::atomic<uint8_t>*>(reinterpret_cast<uintptr_t>(h) + remote_offset_ + g / 8);
  }
  static uint8_t RemoteBit(size_t g) { return static_cast<uint8_t>(1u << (g & 7)); }

  // Leak tracking (Config::block_info): keeps `size` and `stack_id` in the BlockInfo word of the live
  // block at `p`, a block of `h` (see BlockInfo).
  void NoteBlock(PoolHeader* h, const void* p, uint32_t size, uint32_t stack_id) const {
    StoreBlockInfo(InfoOf(h, static_cast<size_t>(static_cast<const char*>(p) - BaseOf(h)) / kGranule), size,
                   stack_id);
  }
  // Where the BlockInfo words of the pool of `h` start (InfoBefore): below the pool (and below its
  // header, marks and remote bits when those are there too), or right after the pool, or after its
  // header, marks and remote bits when those follow the pool. The header says which side.
  char* InfoBaseOf(const PoolHeader* h) const { return InfoBase(h, h->info_before()); }
  // The same for the pool whose real allocation starts at `real`, without reading its header.
  char* InfoBaseOfReal(const PoolHeader* h, uintptr_t real) const {
    return InfoBase(h, InfoBefore(reinterpret_cast<uintptr_t>(BaseOf(h)) - real));
  }
  // Where granule g of `h` keeps its BlockInfo (Config::block_info only; g on a block slot).
  InfoRef InfoOf(const PoolHeader* h, size_t g) const { return InfoAt(InfoBaseOf(h), g); }
  InfoRef InfoAt(char* info_base, size_t g) const {
    assert(config_.block_info);
    return InfoRef{info_base + ((g * kGranule) >> info_shift_) * info_word_, info_word_ == 8};
  }
  uint32_t granules() const { return granules_; }
  size_t remote_offset() const { return remote_offset_; }
  // log2 of the bytes of pool a BlockInfo word stands for (16, or 8 with malloc_align=8).
  int info_shift() const { return info_shift_; }
  // A BlockInfo word's bytes: 4 (compact, pools of at most kCompactInfoMaxSize bytes) or 8.
  size_t info_word() const { return info_word_; }

  // Calls fn(block, BlockInfo) for every live block of every pool: a block whose start mark says live
  // and that no other thread has freed meanwhile (its remote bit is clear). Explicit arenas' blocks are
  // never marked, so they are not among them. From any thread at any time: the walk holds the pool
  // list's lock while it reads a pool (no pool is released meanwhile, so no pool's memory is given
  // back while it is read), and reads the pools' marks as they stand (a block carved or freed
  // meanwhile may or may not be seen, and a block carved meanwhile may show its slot's previous size
  // and id); a walk while nothing else runs is exact. The callbacks must not make or release pools.
  template <typename F>
  void ForEachLiveBlock(F&& fn) const {
    ForEachPoolWithBlocks([](char*, bool, void*) {}, fn);
  }

  // Calls fn(base, explicit_arena, real) for every pool that exists (created and not yet released),
  // `real` the start of its real allocation, with the same guarantees as ForEachLiveBlock.
  template <typename F>
  void ForEachPool(F&& fn) const {
    ForEachListed([&](PoolHeader* h, uintptr_t real) {
      fn(BaseOf(h), h->kind.load(std::memory_order_relaxed) == kExplicit, reinterpret_cast<void*>(real));
    });
  }

  // For every pool that exists, on_pool(base, explicit_arena, real), then on_block(block, BlockInfo)
  // for each of its live blocks, in address order: ForEachPool and ForEachLiveBlock in one walk. Same
  // guarantees. With parts > 1, only part `part` of the pool list (0-based, of `parts` about equal
  // ones, in list order): walks of every part may run at once, but on threads that share no thread
  // pointer, or while no other thread can release a pool (a walk takes the list's lock as its
  // thread's).
  template <typename P, typename B>
  void ForEachPoolWithBlocks(P&& on_pool, B&& on_block, size_t part = 0, size_t parts = 1) const {
    // Blocks start on block slots only (16 bytes, or 8 with malloc_align=8): the other granules' marks
    // are never set.
    const uint32_t step = uint32_t{1} << (info_shift_ - 3);
    ForEachListed([&](PoolHeader* h, uintptr_t real) {
      char* const base = BaseOf(h);
      on_pool(base, h->kind.load(std::memory_order_relaxed) == kExplicit, reinterpret_cast<void*>(real));
      char* const info_base = config_.block_info ? InfoBaseOfReal(h, real) : nullptr;
      const std::atomic<uint8_t>* const marks = h->marks();
      const auto* const remote =
          reinterpret_cast<const std::atomic<uint8_t>*>(reinterpret_cast<uintptr_t>(h) + remote_offset_);
      for (uint32_t g = 0; g < granules_; g += step) {
        if (marks[g].load(std::memory_order_relaxed) != kMarkBlock ||
            (remote[g / 8].load(std::memory_order_relaxed) & RemoteBit(g)) != 0) {
          continue;
        }
        on_block(static_cast<void*>(base + g * kGranule),
                 config_.block_info ? LoadBlockInfo(InfoAt(info_base, g)) : BlockInfo{0, 0});
      }
    }, part, parts);
  }

  // The pool list's entries taken, live or free, in part `part` of `parts` (as ForEachPoolWithBlocks
  // divides the list): while no pool can be made, at least the number of pools that walk finds.
  size_t ListedEntries(size_t part = 0, size_t parts = 1) const {
    const size_t n = nchunks_.load(std::memory_order_acquire);
    size_t entries = 0;
    for (size_t c = n * part / parts, end = n * (part + 1) / parts; c < end; ++c) {
      entries += chunks_[c].load(std::memory_order_acquire)[0].load(std::memory_order_acquire);
    }
    return entries;
  }

  // Calls fn(begin, end) for each chunk of the pool list, the address space reserved for it (its
  // pages are touched as entries are taken). A live pool's entry is a pointer at the start of its real
  // allocation; a free entry has bit 63 set, so it points nowhere.
  template <typename F>
  void ForEachMetaChunk(F&& fn) const {
    const size_t n = nchunks_.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) {
      const uintptr_t c = reinterpret_cast<uintptr_t>(chunks_[i].load(std::memory_order_acquire));
      fn(c, c + kListChunkBytes);
    }
  }

  // fork(): the pool list's lock is taken before and released (or reset, in the child) after.
  void ForkPrepare() { LockList(); }
  void ForkParent() { UnlockList(); }
  void ForkChild() { list_lock_.store(0, std::memory_order_relaxed); }

  // New pool-list entries' pages are faulted in ahead of use, this many bytes at a time (one call
  // instead of 16 page faults, which cost several microseconds each in some virtual machines): at
  // most this much resident beyond the entries in use.
  static constexpr size_t kListPopulate = size_t{16} << 10;
  // The pool list's chunks: 256 KiB of address space each (32,767 entries; their pages touched as
  // entries are taken), at most kMaxListChunks (134 million pools; past them CreatePool fails, as when
  // the memory cannot be had); a chunk's first word counts the entries taken from it, the rest are
  // entries. (The chunks' array, 32 KiB, is written an entry at a time as chunks are made: zeroed when
  // a domain was made, it was eight pages every process faulted in.)
  static constexpr size_t kListChunkBytes = size_t{256} << 10;
  static constexpr size_t kListChunkEntries = kListChunkBytes / sizeof(uint64_t) - 1;
  static constexpr size_t kMaxListChunks = 4096;

 private:
  friend class ThreadCache;

  // The pool list: one 8-byte entry per pool that exists, in chunks of poolscope's own memory that
  // are never returned (LeafSource), reused through a free list, so that the walks find every pool
  // with no list kept on the pools' paths. A live entry is the pool's real allocation (where the walk
  // finds its metadata, HeaderOfReal); a free one kFreeEntry | the next free entry's index + 1 (0: none).
  // Entries are taken mostly in order: the walks see pools mostly in the order they were made, which is
  // mostly the order of their addresses (the exit scan's sort relies on it for speed, not for truth).
  static constexpr uint64_t kFreeEntry = uint64_t{1} << 63;
  std::atomic<uint64_t>& Entry(uint32_t i) const {
    return chunks_[i / kListChunkEntries].load(std::memory_order_relaxed)[1 + i % kListChunkEntries];
  }
  // An entry for `real`, or false when the list cannot grow.
  bool TakeEntry(uintptr_t real, uint32_t* index);
  void GiveBackEntry(uint32_t index);

  // Calls fn(header, real) for every listed pool, holding the list's lock a batch of entries at a time
  // (unless this thread holds it already: a signal's report on a thread stopped inside it, when no
  // other thread can release a pool either), or, when it cannot have the lock in a while, without it.
  // With parts > 1, the chunks of part `part` alone.
  template <typename F>
  void ForEachListed(F&& fn, size_t part = 0, size_t parts = 1) const {
    const size_t n = nchunks_.load(std::memory_order_acquire);
    for (size_t c = n * part / parts, end = n * (part + 1) / parts; c < end; ++c) {
      std::atomic<uint64_t>* const chunk = chunks_[c].load(std::memory_order_acquire) + 1;
      const size_t used = chunk[-1].load(std::memory_order_acquire);
      for (size_t i = 0; i < used; i += kWalkBatch) {
        const bool locked = LockListForWalk();
        const size_t stop = i + kWalkBatch < used ? i + kWalkBatch : used;
        for (size_t k = i; k < stop; ++k) {
          // The pools' metadata lies apart, in their real blocks: start loading a pool's a few entries
          // ahead of its turn.
          if (k + kWalkAhead < used) {
            const uint64_t ahead = chunk[k + kWalkAhead].load(std::memory_order_relaxed);
            if (ahead != 0 && (ahead & kFreeEntry) == 0) {
              const PoolHeader* const h = HeaderOfReal(ahead);
              __builtin_prefetch(h);
              // (And its blocks' words, on a line of their own when they follow the pool.)
              if (config_.block_info) __builtin_prefetch(InfoBaseOfReal(h, static_cast<uintptr_t>(ahead)));
            }
          }
          const uint64_t v = chunk[k].load(std::memory_order_acquire);
          if (v == 0 || (v & kFreeEntry) != 0) continue;
          fn(HeaderOfReal(v), static_cast<uintptr_t>(v));
        }
        if (locked) UnlockList();
      }
    }
  }
  static constexpr size_t kWalkBatch = 256;
  static constexpr size_t kWalkAhead = 8;

  // The list's lock, which creating and releasing a pool take, and a walk of the pools: 0 when free,
  // else the holder's thread pointer.
  static uintptr_t Self() {
#if defined(__x86_64__)
    uintptr_t tp;
    asm("mov %%fs:0, %0" : "=r"(tp));
    return tp;
#else
    return reinterpret_cast<uintptr_t>(__builtin_thread_pointer());
#endif
  }
  void LockList() const {
    const uintptr_t self = Self();
    uintptr_t expected = 0;
    for (int spins = 1; !list_lock_.compare_exchange_weak(expected, self, std::memory_order_acquire); ++spins) {
      expected = 0;
      if (spins % 64 == 0) {
        sched_yield();  // the holder may be a walk that lost its CPU
      } else {
        __builtin_ia32_pause();
      }
    }
  }
  void UnlockList() const { list_lock_.store(0, std::memory_order_release); }
  bool LockListForWalk() const;

  // InfoBaseOf, the side known.
  char* InfoBase(const PoolHeader* h, bool before) const {
    char* const base = BaseOf(h);
    char* const meta = reinterpret_cast<char*>(const_cast<PoolHeader*>(h));
    if (before) return (meta < base ? meta : base) - info_bytes_;
    return meta > base ? meta + meta_bytes_ : base + pool_bytes_;
  }
  void PoolEmptied(ThreadCache* tc, PoolHeader* h);  // a retired pool's last block was freed
  // While the process has one thread: a retired pool's live block (its mark kMarkBlock) freed, with
  // plain stores, and the pool emptied when it was its last.
  void FreeLiveAlone(ThreadCache* tc, PoolHeader* h, std::atomic<uint8_t>* mark);
  void GiveUpPool(void* mem, PoolStats* stats);  // CreatePool could not set up the pool of `mem`
  FreeResult FreeRetired(ThreadCache* tc, PoolHeader* h, std::atomic<uint8_t>* mark);

  Config config_;
  const char* single_threaded_;
  Backend* backend_;
  PoolMap map_;
  size_t pool_bytes_;     // the pool's usable bytes: pool_size rounded up to 64
  size_t meta_bytes_;     // header + mark bytes + remote bits, rounded up to 16
  size_t info_bytes_;     // BlockInfo words (block_info), else 0
  size_t real_bytes_;     // the real allocation: the pool, its metadata and the alignment's slack
  size_t remote_offset_;  // from a pool's header to its remote bits
  int info_shift_;
  size_t info_word_;      // a BlockInfo word's bytes: 4 or 8
  uint32_t granules_;
  // The pool list: its chunks, how many, the entries used in the newest, the free entries (index + 1),
  // and how far the newest chunk's pages are faulted in. chunks_[i] is written before nchunks_ passes i
  // and never read beyond it: left uninitialised (32 KiB a zeroing would write, and fault in, at every
  // process's start).
  std::atomic<std::atomic<uint64_t>*> chunks_[kMaxListChunks];
  std::atomic<size_t> nchunks_{0};
  uint32_t free_entries_ = 0;
  uintptr_t list_populated_ = 0;
  mutable std::atomic<uintptr_t> list_lock_{0};
  std::atomic<bool> exhausted_{false};
};

}  // namespace pool
}  // namespace poolscope

#endif  // POOLSCOPE_POOL_POOL_H_
