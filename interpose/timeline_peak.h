// File: interpose/timeline_peak.h
//
// The pools each call site kept alive at the peak of the process's real live bytes (the report's
// `sites[].peak_pools_pinned` and `pinning_peak`, track=1 with pooling on). The timeline's checks
// (timeline.h) hand it the real live bytes they see and the highest seen since the last snapshot. A
// snapshot (one walk of every pool that counts, per stack id, the pools holding at least one of its
// live blocks) is due when the real live bytes fall 1/kPeakDip below that highest, once it passed the
// last snapshot's by more than 1/kPeakGrowth: a peak is walked once, on the way down from it, within a
// check's fall of 1/kPeakDip below it. Checks are not made on every path (a program may free much
// between two of them, and exit before the next), so a snapshot is due too when they reach kPeakJump
// times the last one's (or none was taken): a heap that only grows is walked at each doubling, the
// report's own walk at exit standing for its peak, and no snapshot is below 1/kPeakJump of the
// highest a check saw. Snapshots are taken at real live bytes that grow geometrically (by
// (1 + 1/kPeakGrowth) * (1 - 1/kPeakDip) at least), so their walks cost at most six walks of the
// pools at the highest the checks saw, whatever the run's length; two for a heap that only grows.
//
// A plain value: no lock, no allocation (its arrays are handed in, poolscope's own memory); the caller
// serialises its use.
#ifndef POOLSCOPE_INTERPOSE_TIMELINE_PEAK_H_
#define POOLSCOPE_INTERPOSE_TIMELINE_PEAK_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace poolscope {

// A snapshot is due when real live bytes, having passed the last snapshot's by more than 1/kPeakGrowth,
// fall 1/kPeakDip below the highest they reached since; or when they reach kPeakJump times the last's.
constexpr int64_t kPeakGrowth = 4;
constexpr int64_t kPeakDip = 32;
constexpr int64_t kPeakJump = 2;

// The rule of PeakPins::Due over the thresholds the last snapshot left (`next`, `jump`): `real` the real
// live bytes a check sees, `after` what they are once a block being freed goes (else real), `high` the
// highest seen since the last snapshot. (The timeline's checks apply it to copies of the thresholds
// before they take the sampler, Due to the snapshot's own after.)
inline bool PeakSnapshotDue(int64_t next, int64_t jump, int64_t high, int64_t real, int64_t after) {
  return real > jump || (high > next && after < high - high / kPeakDip);
}

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

  // Whether a snapshot at `real_live_bytes` is due, `high` the highest real live bytes seen since the
  // last snapshot (or since the start), `after` what they are once a block being freed goes: they
  // exceed kPeakJump times the last one's (any, when none was taken); or high exceeds the last one's
  // by more than 1/kPeakGrowth and `after` is more than 1/kPeakDip below it.
  bool Due(int64_t high, int64_t real_live_bytes, int64_t after) const {
    return on() && PeakSnapshotDue(next_, jump_, high, real_live_bytes, after);
  }
  bool Due(int64_t high, int64_t real_live_bytes) const { return Due(high, real_live_bytes, real_live_bytes); }
  // The highest real live bytes that call for no snapshot however far they fall.
  int64_t next() const { return next_; }
  // The real live bytes above which a snapshot is due at once.
  int64_t jump() const { return jump_; }

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
    jump_ = real_live_bytes * kPeakJump;
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
  int64_t next_ = 0;   // a snapshot is due on the way down from a high above this
  int64_t jump_ = 0;   // and at once above this
  int64_t real_live_bytes_ = 0;
  uint64_t t_ns_ = 0;
  uint64_t snapshots_ = 0;
};

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_TIMELINE_PEAK_H_
