// File: track/stack_depot.h
//
// Interns call stacks (arrays of up to kMaxStackDepth pcs) and names each distinct stack by a dense
// 32-bit id: the same stack always gets the same id, so a live block or an allocation site stores 4
// bytes instead of its frames, and grouping leaks by stack is grouping by id.
//
// Pure: the depot stores stacks and nothing else (per-site counters belong to the caller, indexed by
// id). Bounded: it keeps at most `capacity` stacks; past that, and when its memory runs out, Insert
// returns kOverflowStackId, a reserved id that stands for "a stack we could not keep".
//
// Design: an open-addressing table of 32-bit ids (load <= 2/3, linear probing) over records kept in
// chunks taken from DepotMemory, plus a two-level id -> record directory. Lookups of a known stack, the
// common case inside malloc, are lock-free: one hash, a probe or two, one record compare. A new stack
// is added under a short spin lock, which looks again (another thread may have added it), takes the
// next id, writes the record and publishes the id in a table slot; ids are dense. The table starts
// small and doubles when it is two-thirds full (under the lock: a lookup that raced with the doubling
// and missed in the old table looks again under the lock, in the new one), so that its memory, and
// the pages a process touches for it, grow with the stacks it holds. Nothing is ever removed; an
// outgrown table is kept (a lookup may still read it), its bytes counted.
//
// Cost: Insert of an already known 16-frame stack, 70 ns CPU (1,000 stacks in the depot; hash of 16
// words, one probe, one compare of 16 frames); see docs/tracking.md.
//
// Thread-safety: every method may be called from any thread at once; an id stays valid for the
// depot's life. No method calls malloc. ForkPrepare/ForkParent/ForkChild take and release
// the one internal lock around fork().
#ifndef POOLSCOPE_TRACK_STACK_DEPOT_H_
#define POOLSCOPE_TRACK_STACK_DEPOT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "track/depot_memory.h"
#include "track/spin_lock.h"

namespace poolscope {
namespace track {

constexpr int kMaxStackDepth = 64;
constexpr uint32_t kNoStackId = 0;        // an empty stack (stack_depth=0): Insert(_, 0) returns it
constexpr uint32_t kOverflowStackId = 1;  // a stack the depot could not keep (full or out of memory)
constexpr uint32_t kFirstStackId = 2;

class StackDepot {
 public:
  static constexpr uint32_t kDefaultCapacity = 1u << 20;

  // Takes a first table (kFirstTableSlots, 4 bytes each) and the id directory (8 bytes per 4,096 ids
  // of capacity) from `memory` now; records, directory leaves and bigger tables as stacks arrive.
  // `capacity` is clamped to [16, 1 << 28]. If the first allocations fail, every Insert returns
  // kOverflowStackId.
  explicit StackDepot(DepotMemory* memory, uint32_t capacity = kDefaultCapacity);
  StackDepot(const StackDepot&) = delete;
  StackDepot& operator=(const StackDepot&) = delete;

  // The id of the stack pcs[0..depth) (depth clamped to kMaxStackDepth), adding it if new.
  uint32_t Insert(const uintptr_t* pcs, int depth) { return Insert(pcs, depth, Hash(pcs, depth)); }
  // The same, for a caller that hashed the stack already (`hash` must be Hash(pcs, depth)).
  uint32_t Insert(const uintptr_t* pcs, int depth, uint32_t hash);
  // The hash the depot places a stack by (depth clamped as Insert clamps it).
  static uint32_t Hash(const uintptr_t* pcs, int depth);

  // The frames of stack `id`, copied into pcs[0..kMaxStackDepth), and their count; 0 for kNoStackId,
  // kOverflowStackId and ids never handed out.
  int Get(uint32_t id, uintptr_t* pcs) const;

  // A stack's record, kept by a caller beside its id (StackIdCache) to compare a stack with it later
  // without the table's and the directory's reads. Records never move nor change.
  using RecordRef = const void*;
  // The record of `id` (an id Insert returned); nullptr for kNoStackId, kOverflowStackId and ids never
  // handed out.
  RecordRef Ref(uint32_t id) const { return RecordOf(id); }
  // Whether the record `ref` (from Ref, not nullptr) holds the stack pcs[0..depth).
  bool Holds(RecordRef ref, const uintptr_t* pcs, int depth) const {
    return Holds(static_cast<const Record*>(ref), pcs, depth);
  }

  uint32_t capacity() const { return capacity_; }
  // Distinct stacks kept (ids taken, including the rare ids lost to insert races).
  uint32_t size() const;
  // Inserts answered with kOverflowStackId.
  uint64_t overflows() const { return noverflows_.load(std::memory_order_relaxed); }
  // Bytes taken from DepotMemory so far.
  size_t memory_bytes() const { return memory_bytes_.load(std::memory_order_relaxed); }

  void ForkPrepare() { lock_.Lock(); }
  void ForkParent() { lock_.Unlock(); }
  void ForkChild() { lock_.Unlock(); }

 private:
  // A stack's frames, each in 4 bytes where every frame lies in one of the regions (kRegionBits of
  // address space each, at most kRegions of them, numbered as the depot first meets them: code is a
  // few objects' text, mapped close together): its region's number above its offset in the region.
  // Else (a process with code in more regions) its 8 bytes; `depth` then has kWide set, and the frames
  // start 8 bytes in. A record of 17 frames was 144 bytes, a page of new memory for every 28 stacks.
  struct Record {
    uint32_t depth;  // | kWide
    uint32_t codes[];  // depth entries (compact)
    const uintptr_t* pcs() const { return reinterpret_cast<const uintptr_t*>(this) + 1; }  // (kWide)
    uintptr_t* pcs() { return reinterpret_cast<uintptr_t*>(this) + 1; }
  };
  static constexpr uint32_t kWide = 1u << 31;
  static constexpr int kRegionBits = 28;
  static constexpr uint32_t kRegions = 16;  // 32 - kRegionBits bits of region number
  static constexpr uintptr_t kOffsetMask = (uintptr_t{1} << kRegionBits) - 1;
  // pcs[0..depth) as codes, adding their regions (lock_ held); false when a frame's region would be
  // one too many.
  bool Encode(const uintptr_t* pcs, int depth, uint32_t* codes);
  // The frame a compact record's code stands for.
  uintptr_t Decode(uint32_t code) const { return (regions_[code >> kRegionBits] << kRegionBits) | (code & kOffsetMask); }
  // Whether record r holds the stack pcs[0..depth).
  bool Holds(const Record* r, const uintptr_t* pcs, int depth) const {
    if ((r->depth & ~kWide) != static_cast<uint32_t>(depth)) return false;
    if ((r->depth & kWide) != 0) return memcmp(r->pcs(), pcs, sizeof(uintptr_t) * depth) == 0;
    for (int i = 0; i < depth; ++i) {
      if (Decode(r->codes[i]) != pcs[i]) return false;
    }
    return true;
  }
  struct Table {
    uint32_t mask;                    // slots - 1
    std::atomic<uint32_t> slots[1];  // mask + 1 of them: an id (never below kFirstStackId) or 0
  };
  static constexpr uint32_t kFirstTableSlots = 1024;
  static constexpr uint32_t kLeafBits = 12;  // ids per directory leaf
  static constexpr uint32_t kLeafSize = 1u << kLeafBits;
  static constexpr size_t kChunkBytes = 64 * 1024;

  // A directory leaf: the records of kLeafSize ids, and their hashes, so that a probe past another
  // stack's slot, and the table's doubling, read the hash from a dense array instead of the record
  // (once the depot outgrows the caches, a miss each: the doubling's reads of every record were a
  // third of the time of adding cc1's 6,000 stacks).
  struct Leaf {
    std::atomic<Record*> records[kLeafSize];
    uint32_t hashes[kLeafSize];  // written before the id is published in a table slot
  };
  const Leaf* LeafOf(uint32_t id) const;
  const Record* RecordOf(uint32_t id) const;
  // The hash of stack `id`, an id found in a table slot.
  uint32_t HashOf(uint32_t id) const;
  // Memory for a record of `depth` frames (`wide` or compact) and the directory leaf of `id`; nullptr
  // when out of memory. With lock_ held.
  Record* NewRecord(uint32_t id, int depth, bool wide);
  void* AllocCounted(size_t bytes);
  Table* NewTable(uint32_t slots);
  // The id of the stack in `t`, or 0; *empty: the slot where it would go.
  uint32_t Find(const Table* t, const uintptr_t* pcs, int depth, uint32_t hash, uint32_t* empty) const;
  // Adds a stack not in the current table (lock_ held); its id, or kOverflowStackId.
  uint32_t AddLocked(const uintptr_t* pcs, int depth, uint32_t hash);

  DepotMemory* const memory_;
  uint32_t capacity_;
  std::atomic<Table*> table_{nullptr};  // the current table; replaced under lock_ when it doubles
  uint32_t table_ids_ = 0;              // ids in the current table (lock_)
  // [ids / kLeafSize] leaves, each made when its first id is.
  std::atomic<Leaf*>* directory_ = nullptr;
  std::atomic<uint32_t> next_id_{kFirstStackId};
  std::atomic<uint64_t> noverflows_{0};
  std::atomic<size_t> memory_bytes_{0};
  SpinLock lock_;  // guards adding stacks: ids, records, chunk_, chunk_left_, leaves, the table's doubling, regions
  // The regions' bases (address >> kRegionBits), the first nregions_ of them; an entry is written once,
  // before the first record that uses it is published (a reader that found that record sees it).
  uintptr_t regions_[kRegions] = {};
  uint32_t nregions_ = 0;
  char* chunk_ = nullptr;
  size_t chunk_left_ = 0;
};

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_STACK_DEPOT_H_
