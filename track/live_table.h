// File: track/live_table.h
//
// The table of live logical blocks, keyed by address: what each block's size, allocation stack (a
// StackDepot id) and flags are, for leak accounting at report time.
//
// Design: the table is split into `stripes` (a power of two) by a hash of the address's 256-byte span
// (blocks next to each other in memory sit next to each other in the table: live_table.cc); each stripe is
// an open-addressing hash table (linear probing, backward-shift deletion, so no tombstones) under its own
// spin lock, so threads that touch different stripes never share a lock or a cache line. An entry is 16
// bytes and holds everything: the address (in 8-byte units), size, flags and stack id, packed so that
// neither word is ever a valid pointer (a conservative leak checker below us, memcheck, scans our memory
// and must not find the program's blocks there). Finding, inserting or erasing a block therefore touches
// one cache line of the table in the common case (the stripe header aside), where a chained table touched
// a bucket, then an entry. A stripe's array doubles when it is 3/4 full; the old array goes back through
// DepotMemory::Free. Memory per live block: 16 bytes over a load between 3/8 and 3/4, that is 21 to 43
// bytes.
//
// Measured at 3 million live blocks: 22.4 bytes per block, everything included (the chained table it
// replaced: 44.6). On python3 (py_bench), the live table's share of the process's cycles fell from 32%
// to 27%: what is left is one cache miss per Insert and per Erase once a million blocks are live.
//
// Keys are addresses: multiples of 8 below 2^47 (every block malloc and its family return on x86-64
// Linux). Insert refuses any other key with kNoMemory. Sizes up to 2^43 - 1 are exact; larger ones are
// stored as kMaxSize.
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
  kNoMemory = 2,  // DepotMemory returned nullptr, or the key is not an address: not recorded
};

class LiveTable {
 public:
  static constexpr uint32_t kDefaultStripes = 256;
  static constexpr uint64_t kMaxSize = (uint64_t{1} << 43) - 1;  // larger sizes are stored as this

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
  // A hint: starts loading the lines an Insert or Erase of `ptr` will touch (at a million live blocks
  // each is a cache miss), so that work done meanwhile (a stack capture) hides the wait.
  void Prefetch(uintptr_t ptr) const;

  // Calls fn(entry, arg) for every live block; see the thread-safety rule above.
  void ForEach(void (*fn)(const LiveEntry& entry, void* arg), void* arg) const;
  template <typename F>
  void ForEach(F&& f) const {
    ForEach([](const LiveEntry& e, void* a) { (*static_cast<F*>(a))(e); }, &f);
  }

  // Live blocks, summed over the stripes without locking (exact when nothing runs concurrently).
  uint64_t size() const;
  // Bytes held from DepotMemory now (arrays given back are not counted).
  size_t memory_bytes() const { return memory_bytes_.load(std::memory_order_relaxed); }
  // Inserts answered kNoMemory so far: blocks the table does not hold.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

  // Bytes of one entry (16).
  static size_t EntryBytes();

  void ForkPrepare();
  void ForkParent();
  void ForkChild();

 private:
  friend class LiveTablePeer;
  struct Slot;
  struct Stripe;
  Stripe* StripeOf(uint64_t hash) const;
  // The slot holding `ptr`'s entry, or the empty slot where it would go.
  static Slot* Probe(const Stripe& s, uint64_t hash, uint64_t unit);
  // Doubles the stripe's array (or makes its first); false when out of memory.
  bool Grow(Stripe* s);
  void* AllocCounted(size_t bytes);
  void FreeCounted(void* p, size_t bytes);
  DepotMemory* const memory_;
  Stripe* stripes_ = nullptr;
  uint32_t stripe_shift_ = 64;  // stripe = hash >> stripe_shift_
  uint32_t nstripes_ = 0;
  std::atomic<size_t> memory_bytes_{0};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_LIVE_TABLE_H_
