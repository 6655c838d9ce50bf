// File: track/depot_memory.h
//
// Where the tracking structures (StackDepot, LiveTable) get their memory. They never call malloc: the
// preload library passes an implementation over poolscope's own mmap-backed allocator, so nothing they
// hold shows up in either ledger nor in a leak detector below poolscope; tests pass a counting fake.
//
// Memory is taken, never given back: StackDepot keeps every stack for the life of the process, and
// LiveTable grows in segments that it reuses slot by slot (see live_table.h).
//
// Thread-safety: Alloc may be called from any thread at once; implementations must be thread-safe and
// must not call malloc (they run inside malloc, under poolscope's reentrancy guard).
#ifndef POOLSCOPE_TRACK_DEPOT_MEMORY_H_
#define POOLSCOPE_TRACK_DEPOT_MEMORY_H_

#include <cstddef>

namespace poolscope {
namespace track {

class DepotMemory {
 public:
  virtual ~DepotMemory() = default;
  // `bytes` of zero-filled memory aligned to 64 bytes, or nullptr when none is left. Never freed.
  virtual void* Alloc(size_t bytes) = 0;
};

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_DEPOT_MEMORY_H_
