// File: track/live_table.h
//
// The table of live logical blocks, keyed by address: what each block's size, allocation stack (a
// StackDepot id) and flags are, for leak accounting at report time.
//
// Design: the table is split into `stripes` (a power of two) by a hash of the address; each stripe is a
// chained hash table under its own spin lock, so threads that touch different stripes never share a
// lock or a cache line. A stripe's entries (24 bytes each: address, size and flags packed in one word,
// stack id, next index) live in segments that double in size (64, 128, 256, ... entries) taken from
// DepotMemory as the stripe grows and never given back; erased entries go on the stripe's free list
// and are reused first. Its bucket array (4 bytes per bucket, about one bucket per entry) doubles
// when the entries outnumber the buckets; the old array is left to DepotMemory (never freed: at most
// as many bytes as the new one). Memory per live block: 24 bytes of entry plus 4-8 of bucket.
//
// Cost: an Insert + Erase pair is 21 ns single-threaded while the table fits in cache, 175 ns with a
// million other blocks live (then cache misses on the bucket and the chain dominate); see
// docs/tracking.md. Memory measured at 3 million live blocks: 44.6 bytes per block, everything included.
//
// Thread-safety: Insert, Erase, Find, ForEach and the counters may be called from any thread at once.
// ForEach visits one stripe at a time under that stripe's lock: blocks inserted or erased in other
// stripes meanwhile may or may not be seen, each block at most once. Its callback runs with a stripe
// lock held and must not call into the table (it would deadlock on that stripe). No method calls
// malloc. ForkPrepare takes every stripe lock in index order; ForkParent and ForkChild release them.
#ifndef POOLSCOPE_TRACK_LIVE_TABLE_H_
#define POOLSCOPE_TRACK_LIVE_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "track/depot_memory.h"
#include "track/spin_lock.h"

namespace poolscope {
namespace track {

// One live block, as the API sees it.
struct LiveEntry {
  uintptr_t ptr;
  uint64_t size;  // below 2^56
  uint32_t stack_id;
  uint8_t flags;  // the caller's (e.g. pooled or not, which API)
};

enum class InsertResult : int {
  kInserted = 0,  // a new key
  kReplaced = 1,  // the key was live already (its free went around us); its entry was overwritten
  kNoMemory = 2,  // DepotMemory returned nullptr: not recorded
};

class LiveTable {
 public:
  static constexpr uint32_t kDefaultStripes = 256;
  static constexpr uint64_t kMaxSize = (uint64_t{1} << 56) - 1;  // larger sizes are stored as this

  // Takes the stripe array (256 bytes per stripe) from `memory` now; each stripe's buckets and
  // entries on its first insert. `stripes` is rounded up to a power of two in [1, 65536]. If the stripe
  // array cannot be had, every Insert returns kNoMemory.
  explicit LiveTable(DepotMemory* memory, uint32_t stripes = kDefaultStripes);
  LiveTable(const LiveTable&) = delete;
  LiveTable& operator=(const LiveTable&) = delete;

  InsertResult Insert(uintptr_t ptr, uint64_t size, uint32_t stack_id, uint8_t flags);
  // Removes `ptr` and copies its entry to *out (when out is not null); false when `ptr` is not live.
  bool Erase(uintptr_t ptr, LiveEntry* out);
  bool Find(uintptr_t ptr, LiveEntry* out) const;

  // Calls fn(entry, arg) for every live block; see the thread-safety rule above.
  void ForEach(void (*fn)(const LiveEntry& entry, void* arg), void* arg) const;
  template <typename F>
  void ForEach(F&& f) const {
    ForEach([](const LiveEntry& e, void* a) { (*static_cast<F*>(a))(e); }, &f);
  }

  // Live blocks, summed over the stripes without locking (exact when nothing runs concurrently).
  uint64_t size() const;
  // Bytes taken from DepotMemory so far.
  size_t memory_bytes() const { return memory_bytes_.load(std::memory_order_relaxed); }

  // Bytes of one entry (24).
  static size_t EntryBytes();

  void ForkPrepare();
  void ForkParent();
  void ForkChild();

 private:
  friend class LiveTablePeer;
  struct Slot;
  struct Stripe;
  static constexpr int kMaxSegments = 26;  // 64 << 25 entries in the last: 2^32 - 64 entries in all

  Stripe* StripeOf(uint64_t hash) const;
  Slot* SlotAt(const Stripe& s, uint32_t index) const;
  // Makes room for one more entry (a segment, a larger bucket array); false when out of memory.
  bool Reserve(Stripe* s);
  bool Grow(Stripe* s);
  void* AllocCounted(size_t bytes);

  DepotMemory* const memory_;
  Stripe* stripes_ = nullptr;
  uint32_t stripe_shift_ = 64;  // stripe = hash >> stripe_shift_
  uint32_t nstripes_ = 0;
  std::atomic<size_t> memory_bytes_{0};
};

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_LIVE_TABLE_H_
