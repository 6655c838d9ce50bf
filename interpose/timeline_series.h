// File: interpose/timeline_series.h
//
// The timeline's samples (timeline.h): at most kTimelinePoints, taken `interval` apart. When the
// array is full, every other sample goes and the interval doubles, so that the samples always span
// the whole run with at most kTimelinePoints of them. A plain value: no lock, no allocation (the
// caller serialises its use).
#ifndef POOLSCOPE_INTERPOSE_TIMELINE_SERIES_H_
#define POOLSCOPE_INTERPOSE_TIMELINE_SERIES_H_

#include <cstddef>
#include <cstdint>

namespace poolscope {

constexpr size_t kTimelinePoints = 200;
constexpr uint64_t kTimelineFirstIntervalNs = 5000000;  // 5 ms, doubled each time the array fills

struct TimelinePoint {
  uint64_t t_ns;         // since the library started (CLOCK_MONOTONIC)
  int64_t logical_live;  // logical.allocs - logical.frees
  int64_t real_live;     // real.allocs - real.frees
  int64_t pools;         // pools created and not yet released
  int64_t rss_kib;       // resident set (/proc/self/statm), -1 when it could not be read
  // Live bytes of the program's blocks (requested sizes), and the same with each pool counted as the
  // real block it is; -1 when not known (SetLiveBytes).
  int64_t logical_live_bytes;
  int64_t real_live_bytes;
};

// What a point's live bytes are made of, summed over every thread (track=1: counters.h TrackedBytes).
struct LiveByteCounts {
  uint64_t unpooled;            // the program's real blocks: bytes recorded
  uint64_t unpooled_freed;      // and bytes of those released
  uint64_t arena_pooled;        // tracked arenas' pooled blocks: bytes recorded
  uint64_t arena_pooled_freed;  // and bytes of those released
  int64_t pooled;               // the live pooled blocks' bytes, from their pools' marks; -1: not read
  int64_t pools;                // pools that exist
  uint64_t pool_bytes;          // one pool's real bytes
};

// Sets p's live bytes from `c`: logical = unpooled + arena pooled + pooled, real = unpooled + every
// pool whole. Logical stays unknown (-1) when the pooled blocks' bytes were not read.
inline void SetLiveBytes(TimelinePoint* p, const LiveByteCounts& c) {
  const int64_t unpooled = static_cast<int64_t>(c.unpooled - c.unpooled_freed);
  const int64_t arena_pooled = static_cast<int64_t>(c.arena_pooled - c.arena_pooled_freed);
  p->real_live_bytes = unpooled + c.pools * static_cast<int64_t>(c.pool_bytes);
  p->logical_live_bytes = c.pooled < 0 ? -1 : unpooled + arena_pooled + c.pooled;
}

// A sample's logical live bytes (track=1) read the pooled blocks' sizes from every pool's marks, which
// takes time in proportion to the pools (about 0.5 ms at 60,000; 80 ms at 3.6 million). A sample reads
// them when the last read took at most 1/kTimelineWalkShare of the time since it began (or of the
// interval, when that is longer): reads then cost the program that share of its time at most, and
// the samples between them leave the logical bytes unknown. (The report's own last point reads them
// always.)
constexpr uint64_t kTimelineWalkShare = 32;
inline bool WalkAffordable(uint64_t last_walk_ns, uint64_t since_last_walk_ns, uint64_t interval_ns) {
  const uint64_t budget = since_last_walk_ns > interval_ns ? since_last_walk_ns : interval_ns;
  return last_walk_ns * kTimelineWalkShare <= budget;
}

class TimelineSeries {
 public:
  // Whether a sample is due at `t_ns`: the first one always, then one interval after the last.
  bool Due(uint64_t t_ns) const { return n_ == 0 || t_ns >= points_[n_ - 1].t_ns + interval_ns_; }

  // Keeps `p` (taken when Due said so, at a time no earlier than the last point's).
  void Add(const TimelinePoint& p) {
    if (n_ == kTimelinePoints) {
      for (size_t i = 0; i < kTimelinePoints / 2; ++i) points_[i] = points_[2 * i];
      n_ = kTimelinePoints / 2;
      interval_ns_ *= 2;
    }
    points_[n_++] = p;
  }

  size_t size() const { return n_; }
  const TimelinePoint& operator[](size_t i) const { return points_[i]; }
  uint64_t interval_ns() const { return interval_ns_; }

 private:
  TimelinePoint points_[kTimelinePoints];
  size_t n_ = 0;
  uint64_t interval_ns_ = kTimelineFirstIntervalNs;
};

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_TIMELINE_SERIES_H_
