// File: pool/pool.cc
//
// The slow paths of the pools: creating, retiring, emptying and releasing pools, frees from other
// threads, explicit arenas and thread exit. See pool.h for the model.
//
// The retire handshake. While a pool is kOwned, only its owner writes `marks` and `live`; another thread
// that frees one of its blocks sets the block's byte in `remote` instead. To retire the pool (it cannot
// fit a request and still holds live blocks, or its thread ends), the owner
//   1. folds in the remote bytes set so far,
//   2. publishes `live_shared = live + 1` (the +1 is the owner's own reference, held until step 5),
//   3. swaps `state` to kRetired (seq_cst),
//   4. waits until `in_flight` is zero, then folds in the remote bytes set meanwhile, clearing their
//      marks with atomic RMWs from now on,
//   5. subtracts what it folded in step 4 plus its reference from `live_shared`.
// A remote free increments `in_flight` (seq_cst), then reads `state`: kOwned -> sets its remote byte and
// decrements `in_flight`; kRetired -> decrements `in_flight` and clears its mark and `live_shared` itself.
// Because both sides use seq_cst on (`in_flight` then `state`) and (`state` then `in_flight`), either the
// freeing thread sees kRetired or the owner sees it in flight and waits, so no byte is set after the
// owner's last look. Whoever brings `live_shared` to zero owns the empty pool: it zeroes it and adopts it.
#include "pool/pool.h"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <new>

#include "pool/thread_cache.h"

namespace poolscope {
namespace pool {

namespace {

inline size_t RoundUp(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

// Waits until no remote free of `h` is between its increment and decrement of in_flight (the retire
// handshake's step 4, and Drain before it releases an emptied pool).
inline void WaitForRemoteFrees(const PoolHeader* h) {
  while (h->in_flight.load(std::memory_order_seq_cst) != 0) sched_yield();
}

inline void CountFreeError(PoolStats* stats, Domain::FreeResult r) {
  if (stats == nullptr) return;
  if (r == Domain::FreeResult::kDouble) {
    ++stats->double_frees;
  } else {
    ++stats->invalid_frees;
  }
}

// Classifies a failed free from the mark byte of its granule.
inline Domain::FreeResult Classify(uint8_t mark) {
  return (mark & kMarkStarted) ? Domain::FreeResult::kDouble : Domain::FreeResult::kInvalid;
}

}  // namespace

const char* MissReasonName(int reason) {
  switch (reason) {
    case kMissTooLarge: return "too_large";
    case kMissAlignment: return "alignment";
    case kMissPoolFull: return "pool_full";
    case kMissUntagged: return "untagged";
    case kMissDisabled: return "disabled";
  }
  return "unknown";
}

void AddStats(PoolStats* into, const PoolStats& from) {
  const uint64_t* src = reinterpret_cast<const uint64_t*>(&from);
  uint64_t* dst = reinterpret_cast<uint64_t*>(into);
  for (size_t i = 0; i < sizeof(PoolStats) / sizeof(uint64_t); ++i) dst[i] += src[i];
}

Domain::Domain(const Config& config, Backend* backend, std::atomic<PoolMap::Leaf*>* map_root)
    : config_(config), backend_(backend), map_(map_root, backend) {
  if (config_.pool_size < kMinPoolSize) config_.pool_size = kMinPoolSize;
  if (config_.pool_size > kMaxPoolSize) config_.pool_size = kMaxPoolSize;
  if (config_.max_cached < 0) config_.max_cached = 0;
  if (config_.max_cached > kMaxCachedPools) config_.max_cached = kMaxCachedPools;
  // Carving starts on a 16-byte boundary: malloc's alignment.
  config_.carve_offset = RoundUp(config_.carve_offset, 16);
  if (config_.carve_offset >= config_.pool_size) config_.carve_offset = 0;
  pool_bytes_ = RoundUp(config_.pool_size, kLine);
  granules_ = static_cast<uint32_t>(pool_bytes_ / kGranule);
  // The header, a mark word per granule (pool_bytes_ bytes), and for large pools with block_info a
  // BlockInfo word per granule: all whole lines.
  wide_info_ = config_.block_info && config_.pool_size >= kWideInfoPoolSize;
  info_offset_ = sizeof(PoolHeader) + pool_bytes_;
  meta_bytes_ = info_offset_ + (wide_info_ ? pool_bytes_ : 0);
  // At least 1 MiB or 16 slots a chunk, in whole pages.
  const size_t min_chunk = size_t{1} << 20;
  chunk_bytes_ = RoundUp(kLine + 16 * meta_bytes_, 4096);
  if (chunk_bytes_ < min_chunk) chunk_bytes_ = min_chunk;
}

uintptr_t PopulateAhead(uintptr_t done, uintptr_t begin, uintptr_t end, uintptr_t limit, size_t ahead) {
  const uintptr_t from = std::max(done, begin & ~uintptr_t{4095});
  const uintptr_t to = std::min(limit, RoundUp(end, 4096) + ahead);
  if (from < to) madvise(reinterpret_cast<void*>(from), to - from, MADV_POPULATE_WRITE);
  return to;
}

PoolHeader* Domain::NewHeader() {
  LockMeta();
  PoolHeader* h = free_headers_;
  if (h != nullptr) {
    PoolHeader* next = h->next_free;
    free_headers_ = next;
    // The next pool made will take `next`, and its lines have mostly gone cold since its pool was
    // released (pools are released while a thread frees, made while it allocates): start loading
    // them now, so that neither the pop of its link nor CreatePool's stores wait for memory then.
    if (next != nullptr) {
      const size_t lines = meta_bytes_ / kLine < 4 ? meta_bytes_ / kLine : 4;
      for (size_t i = 0; i < lines; ++i) __builtin_prefetch(reinterpret_cast<char*>(next) + i * kLine, 1);
    }
  } else {
    if (chunk_ == nullptr || chunk_->used.load(std::memory_order_relaxed) == chunk_->capacity) {
      auto* c = static_cast<MetaChunk*>(backend_->ReserveLeaf(chunk_bytes_));
      if (c == nullptr) {
        UnlockMeta();
        return nullptr;
      }
      c->next.store(nullptr, std::memory_order_relaxed);
      c->used.store(0, std::memory_order_relaxed);
      c->capacity = (chunk_bytes_ - kLine) / meta_bytes_;
      // Appended: a walk reads `next` with acquire, so it sees the chunk's fields set.
      if (chunk_ == nullptr) {
        chunks_.store(c, std::memory_order_release);
      } else {
        chunk_->next.store(c, std::memory_order_release);
      }
      chunk_ = c;
      meta_populated_ = reinterpret_cast<uintptr_t>(c);
    }
    const size_t i = chunk_->used.load(std::memory_order_relaxed);
    h = chunk_->slot(i, meta_bytes_);
    // Slots are taken in order and written at once: their pages are faulted in kMetaPopulate bytes
    // at a time (a program that makes a million pools would take 30,000 faults otherwise).
    const uintptr_t end = reinterpret_cast<uintptr_t>(h) + meta_bytes_;
    if (end > meta_populated_) {
      meta_populated_ = PopulateAhead(meta_populated_, reinterpret_cast<uintptr_t>(h), end,
                                      reinterpret_cast<uintptr_t>(chunk_) + chunk_bytes_, kMetaPopulate);
    }
    // (walk_base is null in a slot never used: the chunk's memory comes zeroed.)
    chunk_->used.store(i + 1, std::memory_order_release);
  }
  UnlockMeta();
  return h;
}

void Domain::FreeHeader(PoolHeader* h) {
  // (walk_base is null already: ReleasePool clears it first, and a pool CreatePool gives up never set it.)
  // Its pool's addresses go with it: a leak detector below that scans this memory must not find in a
  // free slot a pointer at memory the allocator may have handed out again (nor does the exit scan,
  // which reads the slab as the pools it lists: ForEachMetaChunk).
  h->base = nullptr;
  h->used_end.store(nullptr, std::memory_order_relaxed);
  LockMeta();
  h->next_free = free_headers_;
  free_headers_ = h;
  UnlockMeta();
}

// A real allocation taken for a pool that could not be set up goes back at once; it counts as a pool
// made and released, so that every real allocation stays accounted for (docs/report-schema.md:
// real.allocs == logical.allocs - pool.hits + pool.pools_created + pool.spills).
void Domain::GiveUpPool(void* mem, PoolStats* stats) {
  backend_->FreePool(mem);
  ++stats->pools_created;
  ++stats->pools_released;
}

PoolHeader* Domain::CreatePool(PoolStats* stats) {
  if (exhausted_.load(std::memory_order_relaxed)) return nullptr;
  void* mem = backend_->AllocPool(pool_bytes_);
  if (mem == nullptr) return nullptr;  // the program's allocator is out of memory: it may recover
  PoolHeader* h = NewHeader();
  if (h == nullptr) {  // no metadata chunk could be reserved
    exhausted_.store(true, std::memory_order_relaxed);
    GiveUpPool(mem, stats);
    return nullptr;
  }
  // Every field but walk_base, which is null (a walk may be reading it), set one by one: the slot is
  // fresh (zeroed) or a released pool's.
  h->owner.store(nullptr, std::memory_order_relaxed);
  h->live = 0;
  h->in_flight.store(0, std::memory_order_relaxed);
  h->remote_pending.store(0, std::memory_order_relaxed);
  h->live_shared.store(0, std::memory_order_relaxed);
  h->used_end.store(nullptr, std::memory_order_relaxed);
  // Only when `base` is not the block's start already: a second pointer to the same block would cost
  // a detector's scan one more lookup a pool for nothing.
  void* const real = backend_->RealBlockOf(mem);
  h->real_block = real != mem ? real : nullptr;
  h->base = static_cast<char*>(mem);
  h->kind = kImplicit;
  for (uint32_t i = 0; i < granules_; ++i) {
    h->mark(i).store(0, std::memory_order_relaxed);
    h->remote(i).store(0, std::memory_order_relaxed);
  }
  h->state.store(kOwned, std::memory_order_relaxed);
  if (!map_.Insert(mem, pool_bytes_, h)) {  // no map leaf could be reserved (or an address past 2^47)
    exhausted_.store(true, std::memory_order_relaxed);
    FreeHeader(h);
    GiveUpPool(mem, stats);
    return nullptr;
  }
  // The real allocator may hand back memory that held other data.
  memset(mem, 0, pool_bytes_);
  h->walk_base.store(HideBase(h->base), std::memory_order_release);
  ++stats->pools_created;
  return h;
}

void Domain::ZeroPool(PoolHeader* h, char* used_end) {
  if (used_end > h->base) memset(h->base, 0, static_cast<size_t>(used_end - h->base));
  // One granule past the carved bytes: a LIFO free leaves its block's start mark where carving resumes.
  size_t marked = static_cast<size_t>(used_end - h->base) / kGranule + 1;
  if (marked > granules_) marked = granules_;
  for (size_t i = 0; i < marked; ++i) h->mark(i).store(0, std::memory_order_relaxed);
  h->live = 0;
  h->owner.store(nullptr, std::memory_order_relaxed);
  h->kind = kImplicit;
  h->remote_pending.store(0, std::memory_order_relaxed);
  h->live_shared.store(0, std::memory_order_relaxed);
  h->used_end.store(nullptr, std::memory_order_relaxed);
  h->state.store(kOwned, std::memory_order_release);
}

void Domain::ReleasePool(PoolHeader* h, PoolStats* stats) {
  h->walk_base.store(nullptr, std::memory_order_release);
  map_.Erase(h->base, pool_bytes_);
  backend_->FreePool(h->base);
  FreeHeader(h);
  ++stats->pools_released;
}

void Domain::PoolEmptied(ThreadCache* tc, PoolHeader* h) {
  ZeroPool(h, h->used_end.load(std::memory_order_acquire));
  if (tc != nullptr) {
    tc->Adopt(h);
  } else {
    // A thread without a cache (it never pooled): count the release nowhere but in the pool totals of
    // the caller's fallback, which the shim gives us as a cache; reaching here means none exists.
    PoolStats discard = {};
    ReleasePool(h, &discard);
  }
}

Domain::FreeResult Domain::FreeSlow(ThreadCache* tc, PoolHeader* h, void* p) {
  PoolStats* stats = tc != nullptr ? &tc->stats_ : nullptr;
  size_t off = static_cast<size_t>(static_cast<char*>(p) - h->base);
  if (h->kind == kExplicit) {
    FreeResult r = FreeResult::kArenaBlock;
    if (stats != nullptr) ++stats->invalid_frees;
    return r;
  }
  if ((off & 7) != 0 || off >= config_.pool_size) {
    if (stats != nullptr) ++stats->invalid_frees;
    return FreeResult::kInvalid;
  }
  size_t g = off / kGranule;
  std::atomic<uint8_t>& mark = h->mark(g);
  if (h->owner.load(std::memory_order_relaxed) == tc) {
    // The owner's fast path refused it: not a live block start, or freed by another thread already.
    uint8_t m = mark.load(std::memory_order_relaxed);
    bool remote_freed = h->remote(g).load(std::memory_order_relaxed) != 0;
    FreeResult r = remote_freed ? FreeResult::kDouble : Classify(m);
    CountFreeError(stats, r);
    return r;
  }
  // A retired pool stays retired until its last live block is freed, and this block is live (or the
  // program frees it twice, which the mark tells): seen retired, the in_flight handshake (two more
  // atomic RMWs, the costly part of the common free of a retired pool's block) has nothing to guard.
  // The acquire pairs with the owner's seq_cst swap, so live_shared as published before it is seen.
  if (h->state.load(std::memory_order_acquire) == kRetired) return FreeRetired(tc, h, &mark);
  h->in_flight.fetch_add(1, std::memory_order_seq_cst);
  if (h->state.load(std::memory_order_seq_cst) == kOwned) {
    uint8_t m = mark.load(std::memory_order_acquire);
    if (m != kMarkBlock) {
      h->in_flight.fetch_sub(1, std::memory_order_release);
      FreeResult r = Classify(m);
      CountFreeError(stats, r);
      return r;
    }
    // The owner's LIFO free trusts last_ to name a live block and does not look at remote bytes: if
    // this is the block it carved last, take it back first. The owner's cache is still there: the
    // block is live and its remote byte not set yet, so the owner can neither release the pool
    // (only an empty one) nor retire it (that waits for in_flight), nor end its thread before either.
    if (ThreadCache* owner = h->owner.load(std::memory_order_relaxed)) {
      uintptr_t last = reinterpret_cast<uintptr_t>(p);
      owner->last_.compare_exchange_strong(last, ThreadCache::kNoBlock, std::memory_order_relaxed);
    }
    uint8_t old = h->remote(g).exchange(1, std::memory_order_acq_rel);
    if (old == 0) h->remote_pending.fetch_add(1, std::memory_order_relaxed);
    h->in_flight.fetch_sub(1, std::memory_order_release);
    if (old != 0) {
      CountFreeError(stats, FreeResult::kDouble);
      return FreeResult::kDouble;
    }
    if (stats != nullptr) ++stats->pooled_frees;
    return FreeResult::kFreed;
  }
  h->in_flight.fetch_sub(1, std::memory_order_release);
  return FreeRetired(tc, h, &mark);
}

Domain::FreeResult Domain::FreeRetired(ThreadCache* tc, PoolHeader* h, std::atomic<uint8_t>* mark) {
  PoolStats* stats = tc != nullptr ? &tc->stats_ : nullptr;
  // Retired: clear the live mark ourselves.
  uint8_t old = mark->fetch_and(static_cast<uint8_t>(~kMarkLive), std::memory_order_acq_rel);
  if (old != kMarkBlock) {
    FreeResult r = Classify(old);
    CountFreeError(stats, r);
    return r;
  }
  if (stats != nullptr) ++stats->pooled_frees;
  if (h->live_shared.fetch_sub(1, std::memory_order_acq_rel) == 1) PoolEmptied(tc, h);
  return FreeResult::kFreed;
}

size_t Domain::UsableSize(const PoolHeader* h, const void* p) const {
  if (h->kind == kExplicit) return 0;
  size_t off = static_cast<size_t>(static_cast<const char*>(p) - h->base);
  if ((off & 7) != 0 || off >= config_.pool_size) return 0;
  size_t g = off / kGranule;
  if (h->mark(g).load(std::memory_order_relaxed) != kMarkBlock) return 0;
  // The block ends where the next block starts, or where carving stopped.
  uintptr_t end;
  ThreadCache* owner = h->owner.load(std::memory_order_relaxed);
  char* used = h->used_end.load(std::memory_order_acquire);
  if (owner != nullptr) {
    end = owner->cur_;
  } else if (used != nullptr) {
    end = reinterpret_cast<uintptr_t>(used);
  } else {
    end = reinterpret_cast<uintptr_t>(h->base) + config_.pool_size;
  }
  size_t end_g = (end - reinterpret_cast<uintptr_t>(h->base)) / kGranule;
  for (size_t k = g + 1; k < end_g; ++k) {
    if (h->mark(k).load(std::memory_order_relaxed) & kMarkStarted) {
      end_g = k;
      break;
    }
  }
  return (end_g - g) * kGranule;
}

// ---- ThreadCache -------------------------------------------------------------------------------------

PoolHeader* ThreadCache::TakePool() {
  if (ncached_ > 0) {
    ++stats_.pools_reused;
    return cache_[--ncached_];
  }
  return domain_->CreatePool(&stats_);
}

namespace {
// Clears every remote byte set in the granules below used_end (remote frees are of live blocks, which
// start below the carve end) and calls fn(granule) for each; returns how many.
template <typename F>
int64_t TakeRemoteBytes(PoolHeader* h, size_t granules, char* used_end, F&& fn) {
  size_t used = static_cast<size_t>(used_end - h->base + kGranule - 1) / kGranule;
  if (used > granules) used = granules;
  int64_t seen = 0;
  for (size_t g = 0; g < used; ++g) {
    if (h->remote(g).load(std::memory_order_relaxed) == 0 ||
        h->remote(g).exchange(0, std::memory_order_acq_rel) == 0) {
      continue;
    }
    ++seen;
    fn(g);
  }
  return seen;
}
}  // namespace

void ThreadCache::FoldRemoteFrees(PoolHeader* h, char* used_end) {
  if (h->remote_pending.load(std::memory_order_acquire) == 0) return;
  int64_t n = 0;
  const int64_t seen = TakeRemoteBytes(h, domain_->granules(), used_end, [h, &n](size_t g) {
    std::atomic<uint8_t>& mark = h->mark(g);
    uint8_t m = mark.load(std::memory_order_relaxed);
    if ((m & kMarkLive) == 0) return;  // the owner's frees check the remote byte, so never
    mark.store(static_cast<uint8_t>(m & ~kMarkLive), std::memory_order_relaxed);
    ++n;
  });
  h->remote_pending.fetch_sub(static_cast<int32_t>(seen), std::memory_order_relaxed);
  h->live -= static_cast<int32_t>(n);
  // The block carved last may be one of them: FreeLast trusts last_ to name a live block.
  if (h == pool_ && n != 0) last_.store(kNoBlock, std::memory_order_relaxed);
}

void ThreadCache::SetCurrent(PoolHeader* h) {
  pool_ = h;
  if (h == nullptr) {
    cur_ = end_ = base_ = start_off_ = marks_at_ = info_at_ = 0;
    fresh_ = kNoBlock;
    last_.store(kNoBlock, std::memory_order_relaxed);
    live_ = 0;
    return;
  }
  h->owner.store(this, std::memory_order_relaxed);
  h->kind = kImplicit;
  base_ = reinterpret_cast<uintptr_t>(h->base);
  start_off_ = domain_->config_.carve_offset;
  cur_ = base_ + start_off_;
  fresh_ = start_off_ == 0 ? base_ : kNoBlock;
  end_ = base_ + domain_->config_.pool_size;
  marks_at_ = reinterpret_cast<uintptr_t>(h->marks()) - base_;
  info_at_ = (domain_->wide_info() ? reinterpret_cast<uintptr_t>(h) + domain_->info_offset()
                                    : reinterpret_cast<uintptr_t>(h->marks())) - base_;
  last_.store(kNoBlock, std::memory_order_relaxed);
  live_ = h->live;
}

void ThreadCache::EmptiedInPlace() {
  size_t used = cur_ - base_;
  if (POOLSCOPE_LIKELY(used <= 256)) {
    for (uintptr_t q = base_, end = cur_; q < end; q += 8) *reinterpret_cast<uint64_t*>(q) = 0;
    // One granule past the carved bytes: a LIFO free leaves its block's start mark where carving resumes.
    // Unless carving resumes where it starts: then the LIFO free was of the pool's first block (with
    // a carve offset FreeLast does not tell it), whose mark stays, as FreeLast's own reset keeps it.
    size_t marked = used / kGranule + (used != start_off_ ? 1 : 0);
    if (marked > domain_->granules()) marked = domain_->granules();
    std::atomic<uint8_t>* const marks = pool_->marks();  // (a byte store could alias pool_)
    for (size_t off = 0; off < marked * kGranule; off += kGranule) {
      marks[off].store(0, std::memory_order_relaxed);
    }
    cur_ = base_ + start_off_;
    last_.store(kNoBlock, std::memory_order_relaxed);
    ++stats_.resets_in_place;
  } else {
    ResetInPlace();
  }
}

void ThreadCache::ResetInPlace() {
  // The owner's current pool has no live block left (and no remote byte pending: those count as live).
  domain_->ZeroPool(pool_, reinterpret_cast<char*>(cur_));
  pool_->owner.store(this, std::memory_order_relaxed);
  cur_ = base_ + start_off_;
  live_ = 0;
  last_.store(kNoBlock, std::memory_order_relaxed);
  ++stats_.resets_in_place;
}

void ThreadCache::Retire(PoolHeader* h, char* used_end) {
  h->used_end.store(used_end, std::memory_order_relaxed);
  h->live_shared.store(h->live + 1, std::memory_order_relaxed);
  h->owner.store(nullptr, std::memory_order_relaxed);
  h->state.exchange(kRetired, std::memory_order_seq_cst);
  WaitForRemoteFrees(h);
  // The wait above made every remote byte set while the pool was owned visible here.
  const int64_t n = TakeRemoteBytes(h, domain_->granules(), used_end, [h](size_t g) {
    h->mark(g).fetch_and(static_cast<uint8_t>(~kMarkLive), std::memory_order_acq_rel);
  });
  h->remote_pending.store(0, std::memory_order_relaxed);
  if (h->live_shared.fetch_sub(static_cast<int32_t>(n + 1), std::memory_order_acq_rel) == n + 1) {
    domain_->PoolEmptied(this, h);
  }
}

void* ThreadCache::CarveSlow(size_t n) {
  if (pool_ != nullptr) {
    SyncOut();
    FoldRemoteFrees(pool_, reinterpret_cast<char*>(cur_));
    if (pool_->live == 0) {
      ResetInPlace();
    } else {
      PoolHeader* old = pool_;
      char* used = reinterpret_cast<char*>(cur_);
      SetCurrent(nullptr);
      Retire(old, used);
    }
  }
  if (pool_ == nullptr) {
    PoolHeader* h = TakePool();
    if (h == nullptr) return nullptr;
    SetCurrent(h);
  }
  // n <= pool_size, so a fresh or reset pool always fits.
  return TryCarve(n);
}

void* ThreadCache::ArenaCarve(Arena* arena, size_t size, size_t align, int* reason) {
  if (!domain_->config_.enabled) {
    *reason = kMissDisabled;
    return nullptr;
  }
  if (size > domain_->config_.pool_size) {
    *reason = kMissTooLarge;
    return nullptr;
  }
  if (align > kLine) {
    *reason = kMissAlignment;
    return nullptr;
  }
  if (arena->pool == nullptr) {
    PoolHeader* h = TakePool();
    if (h == nullptr) {
      *reason = kMissPoolFull;
      return nullptr;
    }
    AttachPool(arena, h);
  }
  size_t a = align < kGranule ? kGranule : align;
  uintptr_t p = (reinterpret_cast<uintptr_t>(arena->cur) + a - 1) & ~(uintptr_t{a} - 1);
  size_t rounded = size == 0 ? kGranule : RoundUp(size, kGranule);
  if (p + rounded > reinterpret_cast<uintptr_t>(arena->end)) {
    *reason = kMissPoolFull;
    return nullptr;
  }
  arena->cur = reinterpret_cast<char*>(p + rounded);
  ++arena->pooled_blocks;
  ++stats_.hits;
  return reinterpret_cast<void*>(p);
}

void ThreadCache::Drain() {
  while (ncached_ > 0) domain_->ReleasePool(cache_[--ncached_], &stats_);
  if (pool_ != nullptr) {
    SyncOut();
    FoldRemoteFrees(pool_, reinterpret_cast<char*>(cur_));
    live_ = pool_->live;
    if (pool_->live == 0) {
      PoolHeader* h = pool_;
      // A remote free whose byte was just folded in may still be between setting it and leaving
      // (remote_pending, in_flight): it writes the header, which ReleasePool gives back. Seeing its
      // byte made its in_flight increment visible; wait for the decrement, as Retire does.
      WaitForRemoteFrees(h);
      domain_->ZeroPool(h, reinterpret_cast<char*>(cur_));
      SetCurrent(nullptr);
      domain_->ReleasePool(h, &stats_);
    }
  }
}

void ThreadCache::Shutdown() {
  MarkDead();
  while (free_arenas_ != nullptr) {
    Arena* a = free_arenas_;
    free_arenas_ = a->next_free;
    if (PoolHeader* h = a->pool) {  // kept by TryCloseArena: empty and zeroed
      DetachPool(a, h);
      domain_->ReleasePool(h, &stats_);
    }
    domain_->backend()->FreeMeta(a, sizeof(Arena));
  }
  nfree_arenas_ = 0;
  kept_pools_ = 0;
  Drain();
  if (pool_ != nullptr) {
    SyncOut();
    PoolHeader* old = pool_;
    char* used = reinterpret_cast<char*>(cur_);
    SetCurrent(nullptr);
    Retire(old, used);
  }
}

void ThreadCache::AbandonAtFork() { MarkDead(); }

void ThreadCache::ResetAtFork() {
  if (pool_ != nullptr) pool_->in_flight.store(0, std::memory_order_relaxed);
  for (int i = 0; i < ncached_; ++i) cache_[i]->in_flight.store(0, std::memory_order_relaxed);
}

}  // namespace pool
}  // namespace poolscope
