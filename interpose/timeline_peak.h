// File: interpose/timeline_peak.h
//
// The pools each call site kept alive at the peak of the process's real live bytes (the report's
// `sites[].peak_pools_pinned` and `pinning_peak`, track=1 with pooling on). The timeline's checks
// (timeline.h) hand it the real live bytes they see; when they are more than 1/kPeakGrowth above
// those of the last snapshot (or there is none yet), a snapshot is due: one walk of every pool that
// counts, per stack id, the pools holding at least one of its live blocks. Snapshots are so taken at
// real live bytes that grow geometrically, so the walks cost at most (kPeakGrowth + 1) walks of the
// pools at the highest the checks saw, whatever the run's length; and every check saw at most
// (1 + 1/kPeakGrowth) times the last snapshot's real live bytes, unless a snapshot it called for could
// not be taken (then the next check calls for it again).
//
// A plain value: no lock, no allocation (its arrays are handed in, poolscope's own memory); the caller
// serialises its use.
#ifndef POOLSCOPE_INTERPOSE_TIMELINE_PEAK_H_
#define POOLSCOPE_INTERPOSE_TIMELINE_PEAK_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace poolscope {

// A snapshot is due when real live bytes exceed the last snapshot's by more than 1/kPeakGrowth.
constexpr int64_t kPeakGrowth = 4;

// How a snapshot finds the live pooled blocks (as tracking.h PooledBlockWalk): fn(ptr, size, stack_id,
// arg) for each, on_pool(arg) before each pool's.
using PeakBlockWalk = void (*)(void (*fn)(uintptr_t ptr, uint32_t size, uint32_t stack_id, void* arg), void* arg,
                               void (*on_pool)(void* arg));

class PeakPins {
 public:
  // `pins` and `last_pool`: `capacity` entries each (stack ids 0 .. capacity - 1), zeroed.
  void Init(uint32_t* pins, uint32_t* last_pool, uint32_t capacity) {
    pins_ = pins;
    last_pool_ = last_pool;
    capacity_ = capacity;
  }
  bool on() const { return pins_ != nullptr; }

  // Whether a snapshot at `real_live_bytes` is due: none was taken yet (and the program holds
  // something), or it exceeds the last one's by more than 1/kPeakGrowth.
  bool Due(int64_t real_live_bytes) const { return on() && real_live_bytes > next_; }

  // Takes the snapshot at `real_live_bytes`, `t_ns`: walks the pools with `walk`.
  void Take(uint64_t t_ns, int64_t real_live_bytes, PeakBlockWalk walk) {
    if (!on()) return;
    memset(pins_, 0, ids_ * sizeof(uint32_t));
    ids_ = 0;
    walk(
        [](uintptr_t, uint32_t, uint32_t stack_id, void* arg) { static_cast<PeakPins*>(arg)->Block(stack_id); },
        this, [](void* arg) { static_cast<PeakPins*>(arg)->NextPool(); });
    t_ns_ = t_ns;
    real_live_bytes_ = real_live_bytes;
    next_ = real_live_bytes + real_live_bytes / kPeakGrowth;
    ++snapshots_;
  }

  uint64_t snapshots() const { return snapshots_; }
  uint64_t t_ns() const { return t_ns_; }
  int64_t real_live_bytes() const { return real_live_bytes_; }
  // 1 + the highest stack id with a pool pinned in the snapshot (0: none).
  uint32_t ids() const { return ids_; }
  // The pools the live blocks of `stack_id` held at the snapshot.
  uint32_t pins(uint32_t stack_id) const { return stack_id < ids_ ? pins_[stack_id] : 0; }

 private:
  // The pools are numbered as the walks meet them, across snapshots: a stack's pool counts once, at
  // its first block there (last_pool_ remembers the pool it was last counted for: no set per pool).
  void NextPool() {
    if (++pool_ == 0) {  // numbered past 2^32 - 1: the old numbers could repeat
      memset(last_pool_, 0, capacity_ * sizeof(uint32_t));
      pool_ = 1;
    }
  }
  void Block(uint32_t stack_id) {
    if (stack_id >= capacity_ || last_pool_[stack_id] == pool_) return;
    last_pool_[stack_id] = pool_;
    ++pins_[stack_id];
    if (stack_id >= ids_) ids_ = stack_id + 1;
  }

  uint32_t* pins_ = nullptr;
  uint32_t* last_pool_ = nullptr;
  uint32_t capacity_ = 0;
  uint32_t ids_ = 0;
  uint32_t pool_ = 0;  // the number of the pool being walked (0: none yet)
  int64_t next_ = 0;   // a snapshot is due above this
  int64_t real_live_bytes_ = 0;
  uint64_t t_ns_ = 0;
  uint64_t snapshots_ = 0;
};

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_TIMELINE_PEAK_H_
