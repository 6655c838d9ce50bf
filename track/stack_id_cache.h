// File: track/stack_id_cache.h
//
// A thread's note of the stacks it interned lately, so that an allocation from a stack it used
// before takes the stack's depot id without the depot's lookup. That lookup of a known stack reads a
// table slot, a directory entry and the stack's record, and once the depot has outgrown the caches
// each of those is a miss (python3: a tenth of all samples with stack_depth=16). An entry keeps the
// stack's hash, its id and where its record is (StackDepot::Ref): 16 bytes, so the whole cache is 8
// KiB, and a hit reads the entry and the record, no more. The frames are not copied in: 16 of them
// would make the cache 72 KiB a thread, read at random, which a compiler (half its captures new
// stacks) does not earn back.
//
// Exact: an entry answers only a stack equal to its record frame for frame (no hash is trusted
// alone). Direct-mapped by the depot's hash of the stack (StackDepot::Hash). A zeroed cache is empty,
// so it can live in fresh mmap'd memory as it is.
//
// Thread-safety: none; one per thread. The depot's records may be read from any thread.
#ifndef POOLSCOPE_TRACK_STACK_ID_CACHE_H_
#define POOLSCOPE_TRACK_STACK_ID_CACHE_H_

#include <cstdint>

#include "track/stack_depot.h"

namespace poolscope {
namespace track {

class StackIdCache {
 public:
  static constexpr int kEntries = 512;

  // The id kept for the stack pcs[0..depth) whose hash is `hash`, or kNoStackId.
  uint32_t Find(const StackDepot& depot, uint32_t hash, const uintptr_t* pcs, int depth) const {
    const Entry& e = entries_[hash & (kEntries - 1)];
    if (e.hash != hash || e.record == nullptr || !depot.Holds(e.record, pcs, depth)) return kNoStackId;
    return e.id;
  }

  // Keeps `id` (an id the depot's Insert returned for a stack of hash `hash`) in place of whatever
  // stack shared its slot; reserved ids are not kept.
  void Put(const StackDepot& depot, uint32_t hash, uint32_t id) {
    const StackDepot::RecordRef record = depot.Ref(id);
    if (record == nullptr) return;
    Entry& e = entries_[hash & (kEntries - 1)];
    e.hash = hash;
    e.id = id;
    e.record = record;
  }

 private:
  struct Entry {
    uint32_t hash;
    uint32_t id;
    StackDepot::RecordRef record;  // nullptr: empty
  };
  Entry entries_[kEntries];
};

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_STACK_ID_CACHE_H_
