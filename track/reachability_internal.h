// File: track/reachability_internal.h
//
// What the classifier (reachability.cc) and its blocks' index (block_index.cc) share: the blocks'
// states, the index's regions and scratch arrays. Nothing here is for other users.
//
// Thread-safety: plain types and functions; a block's state is read and written as the classifier
// (reachability.cc) says.
#ifndef POOLSCOPE_TRACK_REACHABILITY_INTERNAL_H_
#define POOLSCOPE_TRACK_REACHABILITY_INTERNAL_H_

#include <cstddef>
#include <cstdint>

#include "track/reachability.h"

namespace poolscope {
namespace track {
namespace reachability_internal {

// A block's state while the classifier runs is its kind field, each state the kind it ends as: no pass
// at the end turns one into the other.
enum State : uint8_t {
  kReachable = static_cast<uint8_t>(LeakKind::kStillReachable),
  kPossible = static_cast<uint8_t>(LeakKind::kPossiblyLost),
  kIndirect = static_cast<uint8_t>(LeakKind::kIndirectlyLost),
  kUnreached = static_cast<uint8_t>(LeakKind::kDefinitelyLost),
};

constexpr uintptr_t kPage = 4096;
constexpr uintptr_t kRegionGap = uintptr_t{1} << 16;
constexpr size_t kReadBuffer = size_t{1} << 16;
constexpr uint32_t kNone = ~uint32_t{0};

struct Region {
  uintptr_t base;   // first block's start, rounded down to the index's page
  uintptr_t end;    // highest end of the region's blocks (a size-0 block ends at start + 1)
  uint32_t first;   // first block of the region
  uint32_t index;   // where its page index starts in BlockIndex::pages_
};

// One mapping of scratch memory, given back when the classifier returns.
class ScratchArray {
 public:
  ScratchArray(ScratchMemory& m, size_t bytes, bool sparse = false)
      : m_(m), bytes_(bytes), p_(sparse ? m.MapSparse(bytes) : m.Map(bytes)) {}
  ~ScratchArray() { m_.Unmap(p_, bytes_); }
  ScratchArray(const ScratchArray&) = delete;
  ScratchArray& operator=(const ScratchArray&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  bool ok() const { return p_ != nullptr; }

 private:
  ScratchMemory& m_;
  size_t bytes_;
  void* p_;
};

inline uintptr_t BlockEnd(const ScanBlock& b) { return b.start + (b.size() == 0 ? 1 : b.size()); }
inline uint8_t StateOf(const ScanBlock& b) { return static_cast<uint8_t>((b.bits >> ScanBlock::kKindShift) & 3); }
inline void SetState(ScanBlock& b, uint8_t s) {
  b.bits = (b.bits & ~(uint64_t{3} << ScanBlock::kKindShift)) | (uint64_t{s} << ScanBlock::kKindShift);
}

// The blocks in each state and, of the pooled ones, those unreached or indirect (lost), kept as blocks
// change state: the result needs no pass over the blocks at the end.
struct StateTotals {
  LeakTotal by_state[4];
  LeakTotal pooled_lost;
};

}  // namespace reachability_internal
}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_REACHABILITY_INTERNAL_H_
