// File: interpose/timeline.h
//
// Memory over time: the report's `timeline`, at most kTimelinePoints samples of the live-block counts
// of both ledgers, their live bytes (track=1: from the sizes tracking counts as it records and releases
// blocks, and the pooled blocks' sizes read from their pools), the pools that exist and the process's
// resident set, taken while the program runs. No thread of its own and nothing on the pooled fast
// paths: where regular allocations, frees off the inline path and the making and releasing of pools
// are counted, every kTimelineEvery-th call of one entry point of a thread's ledger (the count just
// incremented, tested with a mask: no counter of its own) reads the clock (CLOCK_MONOTONIC, in user
// space through the vDSO); the first thread to find the next sample due takes it (the registry's lock
// only when it is free: a thread that holds it, or a signal handler that interrupts one, skips the
// sample). Samples are `interval` apart; when the array is full, every other sample goes and the
// interval doubles, so that the samples always span the whole run.
#ifndef POOLSCOPE_INTERPOSE_TIMELINE_H_
#define POOLSCOPE_INTERPOSE_TIMELINE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "interpose/timeline_series.h"

namespace poolscope {

constexpr uint64_t kTimelineEvery = 256;  // a power of two: calls between looks at the clock


// At the library's start: sampling begins if `on` (a report will be written).
void TimelineStart(bool on);

// A sample if one is due (and sampling has begun).
void TimelineTick() __attribute__((noinline, cold));

// The peak's check (timeline_peak.h) before a real block of `bytes` (at least kTimelineLargeFree) is
// freed, when it alone is at least 1/kPeakDip of the highest real live bytes since the last snapshot:
// a fall the regular ticks could miss (a program may free its largest blocks and exit between two of
// them) is judged before it happens, and a snapshot it calls for taken with the block live.
constexpr uint64_t kTimelineLargeFree = uint64_t{64} << 10;
void TimelineLargeFree(uint64_t bytes) __attribute__((noinline, cold));

// `calls`: a per-thread call count just incremented.
inline void TimelineCount(uint64_t calls) {
  if (__builtin_expect((calls & (kTimelineEvery - 1)) == 0, 0)) TimelineTick();
}

// fork() child: a sample the forking thread did not take may have been in progress in a thread the
// child does not have. The samples so far stay: they are the history of the counters it inherits.
// fork(): no sample is half taken when the child copies the series (prepare, after the registry's
// lock), and the sampler is free again on both sides.
void TimelineForkPrepare();
void TimelineForkParent();
void TimelineForkChild();

// Copies the samples taken so far (at most kTimelinePoints) into `out`; returns how many, and sets
// *interval_ns to the spacing they were last taken at.
size_t TimelineRead(TimelinePoint* out, uint64_t* interval_ns);

// The pools each site pinned at the peak of real live bytes (timeline_peak.h), with track=1 and
// pooling on: every tick also sums the real live bytes over the threads (the registry's lock only when
// it is free), and a snapshot walks the pools when they passed the last snapshot's by 1/kPeakGrowth
// (with g_busy, as a sample).
struct PeakPinning {
  uint64_t snapshots;       // snapshots taken
  uint64_t t_ns;            // the last one's time, since the library started
  int64_t real_live_bytes;  // the real live bytes it was taken at
  int64_t max_seen;         // the highest real live bytes a check saw (-1: none)
  uint64_t checks;          // checks made
};
// Copies the last snapshot's pools per stack id into *pins (index: stack id) and sets *info; false
// when none was taken (or a snapshot in progress did not end in a while). Allocates: report time only.
bool TimelineReadPeak(std::vector<uint64_t>* pins, PeakPinning* info);

// The live counts of `s` as a point at time `t_ns` (the report's last point, at its snapshot).
// `pooled_bytes`: the live pooled blocks' bytes as the report read them from the pools (so that the
// point's logical bytes are the report's even if a pooled block was freed since: a signal handler's
// free while the report is written); -1 to read them now.
struct Snapshot;
TimelinePoint TimelinePointOf(const Snapshot& s, uint64_t t_ns, int64_t pooled_bytes = -1);
uint64_t TimelineNowNs();

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_TIMELINE_H_
