// File: pool/pool.cc
//
// The slow paths of the pools: creating, retiring, emptying and releasing pools, frees from other
// threads, explicit arenas and thread exit. See pool.h for the model.
//
// The retire handshake. While a pool is owned, only its owner writes its marks and `live`; another
// thread that frees one of its blocks sets the block's remote bit instead. `state` holds the retired
// bit and the count of remote frees in flight. To retire the pool (it cannot fit a request and still
// holds live blocks, or its thread ends), the owner
//   1. folds in the remote bits set so far,
//   2. publishes `live = live + 1` (the +1 is the owner's own reference, held until step 5),
//   3. sets the retired bit (seq_cst),
//   4. waits until no remote free is in flight, then folds in the remote bits set meanwhile, clearing
//      their marks with atomic RMWs from now on,
//   5. subtracts what it folded in step 4 plus its reference from `live`.
// A remote free adds one to `state` (seq_cst) and looks at the value it replaced: not retired -> sets
// its remote bit and takes its one back; retired -> takes its one back and clears its mark and `live`
// itself. The count and the bit are one word, so either the freeing thread sees the pool retired or the
// owner sees it in flight and waits: no bit is set after the owner's last look. Whoever brings `live`
// to zero owns the empty pool: it zeroes it and adopts it.
//
// While the process has one thread (Domain::Alone) there is no other side to the handshake: no remote
// free can be in flight or come before the thread makes another thread, which then starts after
// everything this one did. Retiring is then plain stores (the bits folded in, the retired bit set, the
// count published), and so are the frees of a retired pool's blocks and the pool list's updates.
#include "pool/pool.h"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <new>

#include "pool/thread_cache.h"
#include "track/populate.h"

namespace poolscope {
namespace pool {

namespace {

inline size_t RoundUp(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

// Zeroes n bytes at p, n a multiple of 8. Up to 64 bytes (a default pool, its metadata, what a pool's
// carving used) with two fixed-size, possibly overlapping stores and no call: a pool's life zeroes
// three or four such ranges, each a call into memset otherwise.
inline void ZeroSmall(void* p, size_t n) {
  char* const c = static_cast<char*>(p);
  if (n > 64) {
    memset(c, 0, n);
  } else if (n >= 32) {
    memset(c, 0, 32);
    memset(c + n - 32, 0, 32);
  } else if (n >= 16) {
    memset(c, 0, 16);
    memset(c + n - 16, 0, 16);
  } else if (n != 0) {
    memset(c, 0, 8);
  }
}

// Waits until no remote free of `h` is between its increment and decrement of in_flight (the retire
// handshake's step 4, and Drain before it releases an emptied pool).
inline void WaitForRemoteFrees(const PoolHeader* h) {
  while ((h->state.load(std::memory_order_seq_cst) & PoolHeader::kInFlightMask) != 0) sched_yield();
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
    : config_(config), single_threaded_(config.single_threaded), backend_(backend), map_(map_root, backend) {
  if (config_.pool_size < kMinPoolSize) config_.pool_size = kMinPoolSize;
  if (config_.pool_size > kMaxPoolSize) config_.pool_size = kMaxPoolSize;
  if (config_.max_cached < 0) config_.max_cached = 0;
  if (config_.max_cached > kMaxCachedPools) config_.max_cached = kMaxCachedPools;
  // Carving starts on a 16-byte boundary: malloc's alignment.
  config_.carve_offset = RoundUp(config_.carve_offset, 16);
  if (config_.carve_offset >= config_.pool_size) config_.carve_offset = 0;
  pool_bytes_ = RoundUp(config_.pool_size, kLine);
  granules_ = static_cast<uint32_t>(pool_bytes_ / kGranule);
  // The header, a mark byte and a remote bit per granule, and with block_info a BlockInfo word per block
  // slot (16 bytes of pool, 8 with malloc_align=8): 4 bytes where a block's size fits the compact word.
  remote_offset_ = kHeaderBytes + granules_;
  info_shift_ = config_.align8 ? 3 : 4;
  meta_bytes_ = RoundUp(remote_offset_ + (granules_ + 7) / 8, 16);
  info_word_ = config_.pool_size <= kCompactInfoMaxSize ? 4 : 8;
  info_bytes_ = config_.block_info ? RoundUp((pool_bytes_ >> info_shift_) * info_word_, 16) : 0;
  // The real allocation: the pool from its first 64-byte boundary, with room for the header, marks and
  // remote bits and the BlockInfo words, each on the side InfoBefore and MetaBefore choose, whatever the
  // allocator's alignment left before that boundary (0 to 64 - alignment bytes).
  const size_t align = backend_->pool_alignment() >= kLine ? kLine : 16;
  size_t slack = kLine - align;
  for (size_t before = 0; before <= kLine - align; before += align) {
    const size_t after = (MetaBefore(before, meta_bytes_) ? 0 : meta_bytes_) + (InfoBefore(before) ? 0 : info_bytes_);
    if (before + after > slack) slack = before + after;
  }
  real_bytes_ = pool_bytes_ + slack;
  map_.SetLayout(pool_bytes_, meta_bytes_);
}

bool Domain::TakeEntry(uintptr_t real, uint32_t* index) {
  const bool lock = !Alone();
  if (lock) LockList();
  uint32_t i;
  if (free_entries_ != 0) {
    i = free_entries_ - 1;
    free_entries_ = static_cast<uint32_t>(Entry(i).load(std::memory_order_relaxed) & ~kFreeEntry);
  } else {
    size_t n = nchunks_.load(std::memory_order_relaxed);
    std::atomic<uint64_t>* chunk = n > 0 ? chunks_[n - 1].load(std::memory_order_relaxed) : nullptr;
    if (chunk == nullptr || chunk[0].load(std::memory_order_relaxed) == kListChunkEntries) {
      if (n == kMaxListChunks) {
        if (lock) UnlockList();
        return false;
      }
      chunk = static_cast<std::atomic<uint64_t>*>(backend_->ReserveLeaf(kListChunkBytes));
      if (chunk == nullptr) {
        if (lock) UnlockList();
        return false;
      }
      chunks_[n].store(chunk, std::memory_order_release);
      nchunks_.store(n + 1, std::memory_order_release);  // a walk reads it with acquire: the chunk is set
      list_populated_ = reinterpret_cast<uintptr_t>(chunk);
      ++n;
    }
    const size_t used = chunk[0].load(std::memory_order_relaxed);
    i = static_cast<uint32_t>((n - 1) * kListChunkEntries + used);
    // Entries are taken in order and written at once: their pages are faulted in kListPopulate bytes at
    // a time.
    const uintptr_t at = reinterpret_cast<uintptr_t>(chunk + 1 + used);
    if (at + 8 > list_populated_) {
      list_populated_ = track::PopulateAhead(list_populated_, at, at + 8,
                                             reinterpret_cast<uintptr_t>(chunk) + kListChunkBytes, kListPopulate);
    }
    chunk[0].store(used + 1, std::memory_order_release);
  }
  Entry(i).store(real, std::memory_order_release);
  if (lock) UnlockList();
  *index = i;
  return true;
}

void Domain::GiveBackEntry(uint32_t index) {
  const bool lock = !Alone();
  if (lock) LockList();
  // Points nowhere from now on: a leak detector below that scans the list must not find in a free entry
  // a pointer at memory the allocator may have handed out again, nor a walk a pool.
  Entry(index).store(kFreeEntry | free_entries_, std::memory_order_release);
  free_entries_ = index + 1;
  if (lock) UnlockList();
}

bool Domain::LockListForWalk() const {
  const uintptr_t self = Self();
  if (list_lock_.load(std::memory_order_relaxed) == self) return false;  // this thread holds it, stopped
  for (int spins = 0; spins < (1 << 16); ++spins) {
    uintptr_t expected = 0;
    if (list_lock_.compare_exchange_weak(expected, self, std::memory_order_acquire)) return true;
    if ((spins & 63) == 63) sched_yield();
  }
  // The holder has not let go in a long while (a thread stopped inside it for good, by a signal or a
  // debugger): walk without it.
  return false;
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
  void* mem = backend_->AllocPool(real_bytes_);
  if (mem == nullptr) return nullptr;  // the program's allocator is out of memory: it may recover
  const uintptr_t real = reinterpret_cast<uintptr_t>(mem);
  const uintptr_t base = (real + kLine - 1) & ~uintptr_t{kLine - 1};
  const bool before = MetaBefore(base - real, meta_bytes_);
  const bool info_before = InfoBefore(base - real);
  PoolHeader* const h = HeaderOfReal(real);
  if (base + pool_bytes_ + (before ? 0 : meta_bytes_) + (info_before ? 0 : info_bytes_) > real + real_bytes_) {
    GiveUpPool(mem, stats);  // an allocator that keeps less than the alignment it was asked for
    return nullptr;
  }
  // The real allocator may hand back memory that held other data: the pool and its metadata start
  // zeroed (an implicit pool, owned by no one, nothing live, nothing in flight).
  ZeroSmall(reinterpret_cast<void*>(base), pool_bytes_);
  ZeroSmall(h, meta_bytes_);
  h->place = static_cast<uint8_t>((base - real) << 1 | (info_before ? 1 : 0));
  if (info_bytes_ != 0) ZeroSmall(InfoBaseOf(h), info_bytes_);
  uint32_t index;
  if (!TakeEntry(real, &index)) {  // no list chunk could be reserved
    exhausted_.store(true, std::memory_order_relaxed);
    GiveUpPool(mem, stats);
    return nullptr;
  }
  h->slot = index;
  if (!map_.Insert(reinterpret_cast<void*>(base), !before)) {  // no map leaf (or an address past 2^47)
    exhausted_.store(true, std::memory_order_relaxed);
    GiveBackEntry(index);
    GiveUpPool(mem, stats);
    return nullptr;
  }
  ++stats->pools_created;
  return h;
}

void Domain::ZeroPool(PoolHeader* h, char* used_end) {
  char* const base = BaseOf(h);
  if (used_end > base) ZeroSmall(base, static_cast<size_t>(used_end - base));
  // One granule past the carved bytes: a LIFO free leaves its block's start mark where carving resumes.
  size_t marked = static_cast<size_t>(used_end - base) / kGranule + 1;
  if (marked > granules_) marked = granules_;
  for (size_t i = 0; i < marked; ++i) h->mark(i).store(0, std::memory_order_relaxed);
  h->live.store(0, std::memory_order_relaxed);
  h->owner.store(nullptr, std::memory_order_relaxed);
  h->kind.store(kImplicit, std::memory_order_relaxed);
  // Owned again. (Every remote bit is folded in, but a remote free may still be about to take its
  // one back from `state`: only the retired bit is cleared.)
  const uint16_t state = h->state.load(std::memory_order_relaxed);
  if (state & PoolHeader::kRetiredBit) {
    if (Alone()) {
      h->state.store(state & PoolHeader::kInFlightMask, std::memory_order_relaxed);
    } else {
      h->state.fetch_and(PoolHeader::kInFlightMask, std::memory_order_acq_rel);
    }
  }
}

void Domain::ReleasePool(PoolHeader* h, PoolStats* stats) {
  char* const base = BaseOf(h);
  const uint32_t index = h->slot;
  void* const real = base - h->real_offset();
  // Off the list first: once it is, no walk reads the pool, which can then go.
  GiveBackEntry(index);
  map_.Erase(base);
  backend_->FreePool(real);
  ++stats->pools_released;
}

void Domain::PoolEmptied(ThreadCache* tc, PoolHeader* h) {
  if (tc == nullptr) {
    // A thread without a cache (it never pooled): count the release nowhere but in the pool totals of
    // the caller's fallback, which the shim gives us as a cache; reaching here means none exists.
    PoolStats discard = {};
    ReleasePool(h, &discard);
    return;
  }
  // Kept, zeroed whole (a retired pool does not keep where its carving stopped); released as it is
  // when the cache is full, since no one carves from it again.
  if (tc->HasRoom()) ZeroPool(h, BaseOf(h) + pool_bytes_);
  tc->Adopt(h);
}

void Domain::FreeLiveAlone(ThreadCache* tc, PoolHeader* h, std::atomic<uint8_t>* mark) {
  mark->store(kMarkStarted, std::memory_order_relaxed);
  const int32_t live = h->live.load(std::memory_order_relaxed) - 1;
  h->live.store(live, std::memory_order_relaxed);
  if (live == 0) PoolEmptied(tc, h);
}

Domain::FreeResult Domain::FreeSlow(ThreadCache* tc, PoolHeader* h, void* p) {
  PoolStats* stats = tc != nullptr ? &tc->stats_ : nullptr;
  size_t off = static_cast<size_t>(static_cast<char*>(p) - BaseOf(h));
  if (h->kind.load(std::memory_order_relaxed) == kExplicit) {
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
  std::atomic<uint8_t>& remote = RemoteByte(h, g);
  const uint8_t bit = RemoteBit(g);
  if (h->owner.load(std::memory_order_relaxed) == tc) {
    // The owner's fast path refused it: not a live block start, or freed by another thread already.
    uint8_t m = mark.load(std::memory_order_relaxed);
    bool remote_freed = (remote.load(std::memory_order_relaxed) & bit) != 0;
    FreeResult r = remote_freed ? FreeResult::kDouble : Classify(m);
    CountFreeError(stats, r);
    return r;
  }
  // A retired pool stays retired until its last live block is freed, and this block is live (or the
  // program frees it twice, which the mark tells): seen retired, the in-flight count (two more atomic
  // RMWs, the costly part of the common free of a retired pool's block) has nothing to guard. The
  // acquire pairs with the owner's seq_cst retire, so `live` as published before it is seen.
  if (h->state.load(std::memory_order_acquire) & PoolHeader::kRetiredBit) return FreeRetired(tc, h, &mark);
  if (h->state.fetch_add(1, std::memory_order_seq_cst) & PoolHeader::kRetiredBit) {
    h->state.fetch_sub(1, std::memory_order_release);
    return FreeRetired(tc, h, &mark);
  }
  uint8_t m = mark.load(std::memory_order_acquire);
  if (m != kMarkBlock) {
    h->state.fetch_sub(1, std::memory_order_release);
    FreeResult r = Classify(m);
    CountFreeError(stats, r);
    return r;
  }
  // The owner's LIFO free trusts last_ to name a live block and does not look at remote bits: if
  // this is the block it carved last, take it back first. The owner's cache is still there: the
  // block is live and its remote bit not set yet, so the owner can neither release the pool
  // (only an empty one) nor retire it (that waits for the frees in flight), nor end its thread before
  // either.
  if (ThreadCache* owner = h->owner.load(std::memory_order_relaxed)) {
    uintptr_t last = reinterpret_cast<uintptr_t>(p);
    owner->last_.compare_exchange_strong(last, ThreadCache::kNoBlock, std::memory_order_relaxed);
  }
  const uint8_t old = remote.fetch_or(bit, std::memory_order_acq_rel);
  h->state.fetch_sub(1, std::memory_order_release);
  if ((old & bit) != 0) {
    CountFreeError(stats, FreeResult::kDouble);
    return FreeResult::kDouble;
  }
  if (stats != nullptr) ++stats->pooled_frees;
  return FreeResult::kFreed;
}

bool Domain::FreeRetiredAlone(ThreadCache* tc, PoolHeader* h, void* p) {
  if (!Alone() || (h->state.load(std::memory_order_relaxed) & PoolHeader::kRetiredBit) == 0 ||
      h->kind.load(std::memory_order_relaxed) != kImplicit) {
    return false;
  }
  const size_t off = static_cast<size_t>(static_cast<char*>(p) - BaseOf(h));
  if ((off & 7) != 0 || off >= config_.pool_size) return false;
  std::atomic<uint8_t>& mark = h->mark(off / kGranule);
  if (mark.load(std::memory_order_relaxed) != kMarkBlock) return false;
  FreeLiveAlone(tc, h, &mark);
  return true;
}

Domain::FreeResult Domain::FreeRetired(ThreadCache* tc, PoolHeader* h, std::atomic<uint8_t>* mark) {
  PoolStats* stats = tc != nullptr ? &tc->stats_ : nullptr;
  const bool alone = Alone();
  // Retired: clear the live mark ourselves.
  const uint8_t old = alone ? mark->load(std::memory_order_relaxed)
                            : mark->fetch_and(static_cast<uint8_t>(~kMarkLive), std::memory_order_acq_rel);
  if (old != kMarkBlock) {
    FreeResult r = Classify(old);
    CountFreeError(stats, r);
    return r;
  }
  if (stats != nullptr) ++stats->pooled_frees;
  if (alone) {
    FreeLiveAlone(tc, h, mark);
  } else if (h->live.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    PoolEmptied(tc, h);
  }
  return FreeResult::kFreed;
}

size_t Domain::UsableSize(const PoolHeader* h, const void* p) const {
  if (h->kind.load(std::memory_order_relaxed) == kExplicit) return 0;
  char* const base = BaseOf(h);
  size_t off = static_cast<size_t>(static_cast<const char*>(p) - base);
  if ((off & 7) != 0 || off >= config_.pool_size) return 0;
  size_t g = off / kGranule;
  if (h->mark(g).load(std::memory_order_relaxed) != kMarkBlock) return 0;
  // The block ends where the next block starts, or where carving stopped while the pool is current,
  // else at the pool's end (what lies past a retired pool's carving is free, zero and never carved
  // again before the pool is emptied and zeroed whole).
  // (Read on another thread, the owner may have left the pool since: a carve point outside it, or
  // before the block, is not this pool's, whose carving has then ended.)
  const uintptr_t pool_end = reinterpret_cast<uintptr_t>(base) + config_.pool_size;
  ThreadCache* owner = h->owner.load(std::memory_order_relaxed);
  uintptr_t end = owner != nullptr ? owner->cur_ : pool_end;
  if (end <= reinterpret_cast<uintptr_t>(p) || end > pool_end) end = pool_end;
  size_t end_g = (end - reinterpret_cast<uintptr_t>(base)) / kGranule;
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
// Clears every remote bit set in the granules below used_end (remote frees are of live blocks, which
// start below the carve end) and calls fn(granule) for each; returns how many.
template <typename F>
int64_t TakeRemoteBits(const Domain& d, PoolHeader* h, char* used_end, F&& fn) {
  size_t used = static_cast<size_t>(used_end - d.BaseOf(h) + kGranule - 1) / kGranule;
  if (used > d.granules()) used = d.granules();
  int64_t seen = 0;
  for (size_t g = 0; g < used; g += 8) {
    std::atomic<uint8_t>& byte = d.RemoteByte(h, g);
    if (byte.load(std::memory_order_relaxed) == 0) continue;
    uint8_t bits = byte.exchange(0, std::memory_order_acq_rel);
    for (; bits != 0; bits &= static_cast<uint8_t>(bits - 1)) {
      ++seen;
      fn(g + static_cast<size_t>(__builtin_ctz(bits)));
    }
  }
  return seen;
}
}  // namespace

void ThreadCache::FoldRemoteFrees(PoolHeader* h, char* used_end) {
  int64_t n = 0;
  TakeRemoteBits(*domain_, h, used_end, [h, &n](size_t g) {
    std::atomic<uint8_t>& mark = h->mark(g);
    uint8_t m = mark.load(std::memory_order_relaxed);
    if ((m & kMarkLive) == 0) return;  // the owner's frees check the remote bit, so never
    mark.store(static_cast<uint8_t>(m & ~kMarkLive), std::memory_order_relaxed);
    ++n;
  });
  h->live.store(h->live.load(std::memory_order_relaxed) - static_cast<int32_t>(n), std::memory_order_relaxed);
  // The block carved last may be one of them: FreeLast trusts last_ to name a live block.
  if (h == pool_ && n != 0) last_.store(kNoBlock, std::memory_order_relaxed);
}

void ThreadCache::SetCurrent(PoolHeader* h) {
  pool_ = h;
  if (h == nullptr) {
    cur_ = end_ = base_ = start_off_ = marks_at_ = remote_at_ = info_at_ = 0;
    fresh_ = kNoBlock;
    last_.store(kNoBlock, std::memory_order_relaxed);
    live_ = 0;
    return;
  }
  h->owner.store(this, std::memory_order_relaxed);
  h->kind.store(kImplicit, std::memory_order_relaxed);
  base_ = reinterpret_cast<uintptr_t>(domain_->BaseOf(h));
  start_off_ = domain_->config_.carve_offset;
  cur_ = base_ + start_off_;
  fresh_ = start_off_ == 0 ? base_ : kNoBlock;
  end_ = base_ + domain_->config_.pool_size;
  const uintptr_t meta = reinterpret_cast<uintptr_t>(h);
  marks_at_ = meta + kHeaderBytes - (base_ >> 3);
  remote_at_ = meta + domain_->remote_offset() - (base_ >> 6);
  info_at_ = reinterpret_cast<uintptr_t>(domain_->InfoBaseOf(h)) - (base_ >> info_div_);
  last_.store(kNoBlock, std::memory_order_relaxed);
  live_ = h->live.load(std::memory_order_relaxed);
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
    for (size_t g = 0; g < marked; ++g) marks[g].store(0, std::memory_order_relaxed);
    cur_ = base_ + start_off_;
    last_.store(kNoBlock, std::memory_order_relaxed);
    ++stats_.resets_in_place;
  } else {
    ResetInPlace();
  }
}

void ThreadCache::ResetInPlace() {
  // The owner's current pool has no live block left (and no remote bit pending: those count as live).
  domain_->ZeroPool(pool_, reinterpret_cast<char*>(cur_));
  pool_->owner.store(this, std::memory_order_relaxed);
  cur_ = base_ + start_off_;
  live_ = 0;
  last_.store(kNoBlock, std::memory_order_relaxed);
  ++stats_.resets_in_place;
}

void ThreadCache::Retire(PoolHeader* h, char* used_end) {
  if (domain_->Alone()) {
    // No other side to the handshake (see the top of this file), and no thread to set a remote bit
    // since the caller folded them in (those of threads that have ended).
    h->owner.store(nullptr, std::memory_order_relaxed);
    h->state.store(h->state.load(std::memory_order_relaxed) | PoolHeader::kRetiredBit, std::memory_order_relaxed);
    if (h->live.load(std::memory_order_relaxed) == 0) domain_->PoolEmptied(this, h);
    return;
  }
  h->live.store(h->live.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  h->owner.store(nullptr, std::memory_order_relaxed);
  h->state.fetch_or(PoolHeader::kRetiredBit, std::memory_order_seq_cst);
  WaitForRemoteFrees(h);
  // The wait above made every remote bit set while the pool was owned visible here.
  const int64_t n = TakeRemoteBits(*domain_, h, used_end, [h](size_t g) {
    h->mark(g).fetch_and(static_cast<uint8_t>(~kMarkLive), std::memory_order_acq_rel);
  });
  if (h->live.fetch_sub(static_cast<int32_t>(n + 1), std::memory_order_acq_rel) == n + 1) {
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
      // A remote free whose bit was just folded in may still be between setting it and leaving (its
      // one in `state`): it writes the header, which ReleasePool gives back. Seeing its bit made its
      // increment visible; wait for the decrement, as Retire does.
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
  constexpr uint16_t kRetired = PoolHeader::kRetiredBit;
  if (pool_ != nullptr) pool_->state.fetch_and(kRetired, std::memory_order_relaxed);
  for (int i = 0; i < ncached_; ++i) cache_[i]->state.fetch_and(kRetired, std::memory_order_relaxed);
}

}  // namespace pool
}  // namespace poolscope
