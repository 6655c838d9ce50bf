// File: pool/pool_layout.h
//
// What every part of the pool library shares (pool.h): the sizes and mark bytes, the miss reasons and
// counters, what the library needs from below (Backend) and its options (Config), a pool's header and
// where leak tracking keeps a block's size and stack id.
#ifndef POOLSCOPE_POOL_POOL_LAYOUT_H_
#define POOLSCOPE_POOL_POOL_LAYOUT_H_

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
  // A real allocation of `bytes` (a multiple of 64), 64-byte aligned; nullptr when out of memory.
  virtual void* AllocPool(size_t bytes) = 0;
  virtual void FreePool(void* p) = 0;
  // Where the real allocation that holds the pool `p` (from AllocPool) starts: p itself, unless the
  // backend carves the pool out of a larger block.
  virtual void* RealBlockOf(void* p) { return p; }
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
  // Keep a BlockInfo word per granule beside each pool's marks, for leak tracking (NoteBlock,
  // ThreadCache::InfoSlot, ForEachLiveBlock's sizes and stack ids). Without it those words do not
  // exist: the walk gives zeros for them and the others must not be called.
  bool block_info = false;
};

class ThreadCache;
struct Arena;

enum PoolState : int { kOwned = 0, kRetired = 1 };
enum PoolKind : uint32_t { kImplicit = 0, kExplicit = 1 };

// The metadata of one pool, in poolscope's own memory (the pool's real allocation holds only the
// program's blocks): this line, then the pool's mark words (one 8-byte word per granule, at the
// granule's byte offset from the line's end), then, only when the domain keeps block information
// (Config::block_info, leak tracking) and pools of 64 KiB or more, one BlockInfo word per granule.
// For the default pool of 64 bytes that is 128 bytes a pool, with tracking or without.
//
// A mark word: byte 0 the mark (kMarkLive | kMarkStarted; kMarkStarted tells a double free from an
// interior one), byte 1 the remote byte (non-zero = the block starting here was freed by another
// thread while the pool was owned, not yet folded in), bytes 2-7 tracking's BlockInfo or unused.
// One word per granule, at the granule's offset, so that the fast paths index marks with the
// block's address itself (no shift), and a free's mark and remote byte lie on one line. The owner
// writes marks with plain byte stores; other threads write only remote bytes (and, once the pool is
// retired, marks with atomic read-modify-writes).
//
// Every field is in this one line: the owner's (live, and owner while it holds the pool) and those
// any thread writes (state, in_flight, remote_pending, live_shared). The owner's fast paths read
// none of them (FreeOwn compares the pool with its current one), so the line is shared only by the
// slow paths of a pool whose blocks other threads free.
struct alignas(kLine) PoolHeader {
  // First in the line: a detector below that scans this memory meets the pointer to the start of
  // the pool's real block before `base` (inside it), and so reads each pool once.
  union {
    PoolHeader* next_free;  // while the slot is free: the next in the domain's list of free slots
    // While its pool lives: where the pool's real allocation starts (Backend::RealBlockOf) when that
    // is not `base`, else nullptr. Nothing of the pool's reads it: it is there so that a leak detector
    // below poolscope, which scans this memory, finds each pool's real block pointed to at its start,
    // whatever the allocator's alignment made of the pool's own start.
    void* real_block;
  };
  char* base;           // the real allocation; blocks are carved from [base, base + pool_size)
  // The thread whose implicit arena's current pool this is, else nullptr. Read by any thread (a free
  // compares it with its own cache), written by the owner.
  std::atomic<ThreadCache*> owner;
  // `base` from the pool's creation to its release, else nullptr: what Domain::ForEachLiveBlock, which
  // may read any slot of the metadata slab at any time, reads instead of the plain fields. Kept with
  // bit 63 set (HideBase; WalkBase reads it): a leak detector below poolscope that scans this memory
  // then sees no pointer in it, and looks each pool up once less.
  std::atomic<char*> walk_base;
  std::atomic<char*> used_end;            // end of the carved bytes, published at retire
  int32_t live;         // live blocks, as the owner sees them (remote frees not yet folded in count)
  PoolKind kind;        // kExplicit while an explicit arena holds it
  std::atomic<int> state;                 // PoolState
  std::atomic<int> in_flight;             // remote frees between reading `state` and marking
  std::atomic<int32_t> remote_pending;    // remote bytes set, a hint for the owner
  std::atomic<int32_t> live_shared;       // live blocks once retired (plus one while retiring)

  // The mark words, right after the header; the mark and remote byte of granule g.
  std::atomic<uint8_t>* marks() const {
    return reinterpret_cast<std::atomic<uint8_t>*>(const_cast<PoolHeader*>(this + 1));
  }
  std::atomic<uint8_t>& mark(size_t g) const { return marks()[g * kGranule]; }
  std::atomic<uint8_t>& remote(size_t g) const { return marks()[g * kGranule + 1]; }
};

static_assert(sizeof(PoolHeader) == kLine, "a pool header is one line");

// walk_base's stored form of `base`, and back: bit 63, which no user address has, set; nullptr stays.
inline char* HideBase(char* base) {
  return base == nullptr ? nullptr : reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(base) | (uintptr_t{1} << 63));
}
inline char* WalkBase(const PoolHeader& h) {
  return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(h.walk_base.load(std::memory_order_acquire)) &
                                 ~(uintptr_t{1} << 63));
}
// A pool's granule count fits the 32-bit counts (kMaxPoolSize / kGranule blocks at most).
static_assert(kMaxPoolSize / kGranule < (size_t{1} << 30), "live counts are 32-bit");

// What leak tracking keeps of a live pooled block (Config::block_info): its requested size and its
// allocation stack's id. In a domain whose pools are smaller than 64 KiB (every size fits 16 bits)
// they go in the six spare bytes of the block's mark word: the size in bytes 2-3, the id in bytes
// 4-7, on the line the carve and the free touch anyway, so a tracked pool's slot is no larger than
// an untracked one's. Larger pools have a BlockInfo word per granule after the mark words instead:
// the size in the low 32 bits and the id in the high 32, as one word. The report reads them back by
// walking every pool's marks (Domain::ForEachLiveBlock).
struct BlockInfo {
  uint32_t size;
  uint32_t stack_id;
};
// A block's BlockInfo: its mark word (inline) or its BlockInfo word (wide).
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
  reinterpret_cast<std::atomic<uint16_t>*>(slot.word + 2)->store(static_cast<uint16_t>(size),
                                                                 std::memory_order_relaxed);
  reinterpret_cast<std::atomic<uint32_t>*>(slot.word + 4)->store(stack_id, std::memory_order_relaxed);
}
inline BlockInfo LoadBlockInfo(InfoRef slot) {
  if (slot.wide) {
    const uint64_t w = reinterpret_cast<const std::atomic<uint64_t>*>(slot.word)->load(std::memory_order_relaxed);
    return BlockInfo{static_cast<uint32_t>(w), static_cast<uint32_t>(w >> 32)};
  }
  return BlockInfo{reinterpret_cast<const std::atomic<uint16_t>*>(slot.word + 2)->load(std::memory_order_relaxed),
                   reinterpret_cast<const std::atomic<uint32_t>*>(slot.word + 4)->load(std::memory_order_relaxed)};
}
// For memory written in order: faults in with one call (madvise MADV_POPULATE_WRITE) the pages from
// begin's, or from `done` when that is higher, to `ahead` bytes past end's last page, but not past
// `limit`; one call instead of a fault per page, which costs several microseconds in some virtual
// machines (where the kernel lacks the advice, before 5.14, pages fault in as they are touched).
// Returns how far the pages are now faulted in: the caller's next `done`.
uintptr_t PopulateAhead(uintptr_t done, uintptr_t begin, uintptr_t end, uintptr_t limit, size_t ahead);

// Pools below this size keep BlockInfo in their mark words.
constexpr size_t kWideInfoPoolSize = size_t{1} << 16;

}  // namespace pool
}  // namespace poolscope

#endif  // POOLSCOPE_POOL_POOL_LAYOUT_H_
