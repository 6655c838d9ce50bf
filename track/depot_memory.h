// File: track/depot_memory.h
//
// Where the tracking structures (StackDepot, LiveTable) get their memory. They never call malloc: the
// preload library passes an implementation over poolscope's own mmap-backed allocator, so nothing they
// hold shows up in either ledger nor in a leak detector below poolscope; tests pass a counting fake.
//
// StackDepot keeps every stack for the life of the process and never frees; LiveTable gives back a
// stripe's array when it doubles it (see live_table.h).
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
  // `bytes` of zero-filled memory aligned to 64 bytes, or nullptr when none is left.
  virtual void* Alloc(size_t bytes) = 0;
  // Gives back what Alloc(bytes) returned. Implementations may keep it (the default does).
  virtual void Free(void* /*p*/, size_t /*bytes*/) {}
};

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_DEPOT_MEMORY_H_
