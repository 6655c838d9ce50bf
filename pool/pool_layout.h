// File: pool/pool_layout.h
//
// What every part of the pool library shares (pool.h): the sizes and mark bytes, the miss reasons and
// counters, what the library needs from below (Backend) and its options (Config), a pool's header and
// where leak tracking keeps a block's size and stack id.
#ifndef POOLSCOPE_POOL_POOL_LAYOUT_H_
#define POOLSCOPE_POOL_POOL_LAYOUT_H_

#include <sys/single_threaded.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "pool/pool_map.h"

namespace poolscope {
namespace pool {

#define POOLSCOPE_LIKELY(x) __builtin_expect(!!(x), 1)
#define POOLSCOPE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define POOLSCOPE_ALWAYS_INLINE __attribute__((always_inline)) inline

constexpr size_t kLine = 64;
constexpr size_t kGranule = 8;         // the smallest block alignment and size step
constexpr size_t kMinPoolSize = 8;
constexpr size_t kMaxPoolSize = size_t{1} << 20;
constexpr int kMaxCachedPools = 8;

// A pool's mark byte per granule.
constexpr uint8_t kMarkLive = 1;     // a live block starts here
constexpr uint8_t kMarkStarted = 2;  // a block started here since the marks were last cleared
constexpr uint8_t kMarkBlock = kMarkLive | kMarkStarted;  // what a live block's first granule holds

// Why a request that could have been pooled was not.
enum MissReason : int {
  kMissTooLarge = 0,  // above pool_size
  kMissAlignment,     // an alignment the pool cannot guarantee (above 64 bytes)
  kMissPoolFull,      // an explicit arena whose one pool has no room left
  kMissUntagged,      // not selected by the `tag` option
  kMissDisabled,      // pooling is off
  kNumMissReasons,
};
const char* MissReasonName(int reason);

// Per-thread pool counters: plain writes by the owning thread, summed at thread exit and report time.
struct PoolStats {
  uint64_t hits;             // logical allocations served from a pool
  uint64_t pooled_frees;     // pooled blocks released (free of a pooled block, or an arena's close)
  uint64_t misses[kNumMissReasons];
  uint64_t pools_created;    // real allocations made for pools
  uint64_t pools_reused;     // pools taken from a thread cache instead of created
  uint64_t pools_released;   // real frees of pools (cache full, thread exit, drain)
  uint64_t resets_in_place;  // current pool emptied and reused where it stands
  uint64_t spills;           // reallocs that moved a pooled block to a real block
  uint64_t absorbs;          // reallocs that moved a real block into a pool
  uint64_t invalid_frees;    // free of an address inside a pool that is no block start (or arena block)
  uint64_t double_frees;     // free of a pooled block already freed
};
void AddStats(PoolStats* into, const PoolStats& from);

// What the pool needs from below.
class Backend : public LeafSource {
 public:
  // A real allocation of `bytes` for a pool and its metadata (Domain::real_bytes), aligned to at least
  // pool_alignment(); nullptr when out of memory. The pool lies at its first 64-byte boundary, its
  // metadata beside it (PoolHeader).
  virtual void* AllocPool(size_t bytes) = 0;
  // Frees what AllocPool returned.
  virtual void FreePool(void* real) = 0;
  // The alignment AllocPool's blocks have at least: 16 (malloc's) or 64.
  virtual size_t pool_alignment() const { return 16; }
  // poolscope's own memory, zeroed, never from the program's allocator.
  virtual void* AllocMeta(size_t bytes) = 0;
  virtual void FreeMeta(void* p, size_t bytes) = 0;
};

struct Config {
  bool enabled = true;
  size_t pool_size = 64;  // usable bytes per pool
  int max_cached = 4;     // pools kept per thread cache
  bool align8 = false;    // malloc_align=8: min(16, largest power of two <= size), at least 8
  // Bytes left unused at the start of each implicit pool (0, or 16 under valgrind: then no block
  // starts where the pool does, so the pointers poolscope keeps to its pools never look like
  // pointers to a block the program leaked). Rounded up to a multiple of 16.
  size_t carve_offset = 0;
  // Keep a BlockInfo word per block slot in each pool's metadata, for leak tracking (NoteBlock,
  // ThreadCache::InfoSlot, ForEachLiveBlock's sizes and stack ids). Without it those words do not
  // exist: the walk gives zeros for them and the others must not be called. With pools of at most
  // kCompactInfoMaxSize bytes the words are compact, and stack ids must be below kCompactStackIds.
  bool block_info = false;
  // A byte that is nonzero only while no other thread can run the pools' code: glibc's
  // __libc_single_threaded (true until the process first creates a thread; pthread_create clears it
  // before the new thread starts, so the thread sees everything done before). While it is set, the
  // slow paths leave out their atomic read-modify-writes and the pool list's lock (Domain::Alone).
  // Tests point it at a byte of their own (nullptr: never alone).
  const char* single_threaded = &__libc_single_threaded;
};

class ThreadCache;
struct Arena;

enum PoolKind : uint8_t { kImplicit = 0, kExplicit = 1 };

// A pool's metadata lives in its own real allocation, beside the pool's `pool_size` usable bytes: in
// the slack before the pool's first 64-byte boundary when that slack holds it, else right after the
// pool's last line (Domain::HeaderOfReal). With the default pool (64 bytes from a 112-byte malloc, whose
// 16-byte alignment leaves 0, 16, 32 or 48 bytes before the boundary) its 32 bytes always fit on one
// side, so a pool costs the program's allocator what it did before and poolscope's own memory only its
// entry in the domain's pool list (8 bytes) and its lines in the pool map (2 bytes a line).
//
// The metadata: this header (kHeaderBytes), a mark byte per granule and a remote bit per granule,
// Domain::meta_bytes() of them (rounded up to 16), on either side of the pool; and with leak tracking
// (Config::block_info) a BlockInfo word per block slot (16 bytes, or 8 with malloc_align=8), in the
// slack before the pool (below the rest, when that is there too) when what is left of it holds them,
// else after the pool (and after the rest, when that is after the pool too): Domain::InfoBaseOf. With
// the default pool the tracked metadata (32 + 16 bytes) fits whatever the alignment, so the same
// 112-byte malloc holds it.
//
// A mark byte: kMarkLive | kMarkStarted (kMarkStarted tells a double free from an interior one). The
// owner writes marks with plain byte stores; other threads only set remote bits (atomic OR), and, once
// the pool is retired, clear marks with atomic read-modify-writes. A remote bit set means: the block
// starting at that granule was freed by another thread while the pool was owned, not yet folded in.
//
// The owner's fast paths read none of the header (FreeOwn compares the pool with its current one), so
// the header is touched by the slow paths and by frees from other threads.
struct PoolHeader {
  // The thread whose implicit arena's current pool this is, else nullptr. Read by any thread (a free
  // compares it with its own cache), written by the owner.
  std::atomic<ThreadCache*> owner;
  // Live blocks: the owner's count while it owns the pool (stale while the pool is current: the
  // owner's cache keeps it), shared once retired (plus one while retiring): the thread that brings it
  // to zero owns the empty pool.
  std::atomic<int32_t> live;
  uint32_t slot;                 // the pool's entry in the domain's pool list
  std::atomic<uint16_t> state;   // kRetiredBit | remote frees between their check of it and their bit
  std::atomic<uint8_t> kind;     // PoolKind: kExplicit while an explicit arena holds it
  // Set once, at creation: bit 0, the BlockInfo words lie before the pool; bits 1-6, how far the pool's
  // base lies past the start of its real allocation (0-63 bytes), so that releasing the pool needs no
  // look at its list entry.
  uint8_t place;

  bool info_before() const { return (place & 1) != 0; }
  uintptr_t real_offset() const { return place >> 1; }

  static constexpr uint16_t kRetiredBit = 0x8000;
  static constexpr uint16_t kInFlightMask = 0x7fff;

  // The mark bytes, right after the header; the mark of granule g.
  std::atomic<uint8_t>* marks() const {
    return reinterpret_cast<std::atomic<uint8_t>*>(reinterpret_cast<char*>(const_cast<PoolHeader*>(this)) + 20);
  }
  std::atomic<uint8_t>& mark(size_t g) const { return marks()[g]; }
};
constexpr size_t kHeaderBytes = 20;  // the fields above; the struct's tail padding holds marks
static_assert(offsetof(PoolHeader, place) + 1 == kHeaderBytes, "marks start right after the header");
static_assert(alignof(PoolHeader) == 8, "a header is 8-byte aligned");

// A pool's granule count fits the 32-bit counts (kMaxPoolSize / kGranule blocks at most).
static_assert(kMaxPoolSize / kGranule < (size_t{1} << 30), "live counts are 32-bit");
static_assert((kMaxPoolSize / kLine) * 2 + 1 <= 0xffff, "a pool's line index fits its map entry");

// What leak tracking keeps of a live pooled block (Config::block_info): its requested size and its
// allocation stack's id, one word per block slot of the pool's metadata. The report reads them back by
// walking every pool's marks (Domain::ForEachLiveBlock).
//
// A compact word (pools of at most kCompactInfoMaxSize bytes) is 4 bytes: the id in bits 0-19, the
// size in bits 20-30, bit 31 set. The bit keeps a written word from reading as a pointer into a low
// heap: any 8 bytes holding one lie at or above 2 GiB, or are no canonical address at all. A wide
// word is 8 bytes: the size in the low 32 bits, the id in the high 32.
struct BlockInfo {
  uint32_t size;
  uint32_t stack_id;
};
constexpr size_t kCompactInfoMaxSize = 2047;
constexpr uint32_t kCompactStackIds = 1u << 20;
constexpr uint32_t kCompactWritten = 0x80000000u;
// A block's BlockInfo word, and its width.
struct InfoRef {
  char* word;
  bool wide;
};
POOLSCOPE_ALWAYS_INLINE void StoreBlockInfo(InfoRef slot, uint32_t size, uint32_t stack_id) {
  if (POOLSCOPE_UNLIKELY(slot.wide)) {
    reinterpret_cast<std::atomic<uint64_t>*>(slot.word)->store(uint64_t{stack_id} << 32 | size,
                                                               std::memory_order_relaxed);
    return;
  }
  reinterpret_cast<std::atomic<uint32_t>*>(slot.word)->store(kCompactWritten | size << 20 | stack_id,
                                                             std::memory_order_relaxed);
}
inline BlockInfo LoadBlockInfo(InfoRef slot) {
  if (slot.wide) {
    const uint64_t w = reinterpret_cast<const std::atomic<uint64_t>*>(slot.word)->load(std::memory_order_relaxed);
    return BlockInfo{static_cast<uint32_t>(w), static_cast<uint32_t>(w >> 32)};
  }
  const uint32_t w = reinterpret_cast<const std::atomic<uint32_t>*>(slot.word)->load(std::memory_order_relaxed);
  return BlockInfo{(w >> 20) & 0x7ff, w & (kCompactStackIds - 1)};
}

}  // namespace pool
}  // namespace poolscope

#endif  // POOLSCOPE_POOL_POOL_LAYOUT_H_
