#include "interpose/timeline_series.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace poolscope {
namespace {

TimelinePoint At(uint64_t t_ns, int64_t live) { return TimelinePoint{t_ns, live, live, 0, -1, live, live}; }

// A sampler that asks every millisecond for `ms` milliseconds and adds a point whenever one is due;
// returns the times it added.
std::vector<uint64_t> SampleEveryMs(TimelineSeries* s, uint64_t ms) {
  std::vector<uint64_t> added;
  for (uint64_t t = 0; t <= ms * 1000000; t += 1000000) {
    if (!s->Due(t)) continue;
    s->Add(At(t, static_cast<int64_t>(t / 1000000)));
    added.push_back(t);
  }
  return added;
}

TEST(TimelineSeriesTest, SamplesAnIntervalApartFromTheFirst) {
  TimelineSeries s;
  EXPECT_TRUE(s.Due(123));  // the first sample is always due
  std::vector<uint64_t> added = SampleEveryMs(&s, 100);
  ASSERT_EQ(added.size(), 21u);  // 0, 5, ..., 100 ms
  for (size_t i = 0; i < added.size(); ++i) EXPECT_EQ(added[i], i * kTimelineFirstIntervalNs);
  EXPECT_EQ(s.size(), 21u);
  EXPECT_EQ(s.interval_ns(), kTimelineFirstIntervalNs);
  EXPECT_FALSE(s.Due(100 * 1000000 + kTimelineFirstIntervalNs - 1));
  EXPECT_TRUE(s.Due(100 * 1000000 + kTimelineFirstIntervalNs));
}

// A long run: never more than kTimelinePoints; every other sample goes each time the array fills,
// the interval doubles, and what stays spans the run evenly from its first sample.
TEST(TimelineSeriesTest, ALongRunThinsOutAndStillSpansIt) {
  TimelineSeries s;
  const uint64_t ms = 10000;  // 10 s: 2,000 intervals of 5 ms
  SampleEveryMs(&s, ms);
  ASSERT_LE(s.size(), kTimelinePoints);
  EXPECT_GE(s.size(), kTimelinePoints / 2);
  // 5 ms doubled until 200 samples cover 10 s: 5 -> 10 -> 20 -> 40 -> 80 ms (at 40 ms, 200 samples
  // reach 8 s; the array filled again).
  EXPECT_EQ(s.interval_ns(), 16 * kTimelineFirstIntervalNs);
  EXPECT_EQ(s[0].t_ns, 0u);
  for (size_t i = 1; i < s.size(); ++i) {
    EXPECT_EQ(s[i].t_ns - s[i - 1].t_ns, s.interval_ns()) << i;
    EXPECT_EQ(s[i].logical_live, static_cast<int64_t>(s[i].t_ns / 1000000)) << i;  // points kept whole
  }
  EXPECT_GT(s[s.size() - 1].t_ns + s.interval_ns(), ms * 1000000);  // the last sample is the run's end
}

TEST(TimelineSeriesTest, FullArrayKeepsEveryOtherPoint) {
  TimelineSeries s;
  for (size_t i = 0; i < kTimelinePoints; ++i) s.Add(At(i * 10, static_cast<int64_t>(i)));
  ASSERT_EQ(s.size(), kTimelinePoints);
  s.Add(At(kTimelinePoints * 10, -1));
  ASSERT_EQ(s.size(), kTimelinePoints / 2 + 1);
  for (size_t i = 0; i < kTimelinePoints / 2; ++i) EXPECT_EQ(s[i].logical_live, static_cast<int64_t>(2 * i));
  EXPECT_EQ(s[kTimelinePoints / 2].logical_live, -1);
  EXPECT_EQ(s.interval_ns(), 2 * kTimelineFirstIntervalNs);
}

TEST(TimelineSeriesTest, LiveBytesOfBothLedgers) {
  TimelinePoint p = At(0, 0);
  LiveByteCounts c{};
  c.unpooled = 1000;
  c.unpooled_freed = 300;  // 700 bytes of real blocks live
  c.arena_pooled = 50;
  c.arena_pooled_freed = 20;  // 30 in open arenas' pools
  c.pooled = 40;              // 40 in pooled blocks
  c.pools = 3;
  c.pool_bytes = 64;
  SetLiveBytes(&p, c);
  EXPECT_EQ(p.logical_live_bytes, 700 + 30 + 40);
  EXPECT_EQ(p.real_live_bytes, 700 + 3 * 64);  // pools whole, whatever they hold
}

TEST(TimelineSeriesTest, LogicalLiveBytesUnknownWithoutThePoolsBytes) {
  TimelinePoint p = At(0, 0);
  LiveByteCounts c{};
  c.unpooled = 10;
  c.pooled = -1;  // the pools' marks were not read
  c.pools = 2;
  c.pool_bytes = 128;
  SetLiveBytes(&p, c);
  EXPECT_EQ(p.logical_live_bytes, -1);
  EXPECT_EQ(p.real_live_bytes, 10 + 2 * 128);
}

TEST(TimelineSeriesTest, PoolsAreReadWhileTheLastReadTookAShareOfTheInterval) {
  const uint64_t interval = kTimelineFirstIntervalNs;
  EXPECT_TRUE(WalkAffordable(0, 0, interval));  // the first sample reads them
  const uint64_t share = interval / kTimelineWalkShare;
  EXPECT_TRUE(WalkAffordable(share, interval, interval));
  EXPECT_FALSE(WalkAffordable(share + 1, interval, interval));
  EXPECT_TRUE(WalkAffordable(share + 1, interval, 2 * interval));  // once the interval doubled
}

// A read that took many intervals is made again only once the program has run 32 times as long: the
// reads never take more than a 32nd of its time, however many samples fall between them.
TEST(TimelineSeriesTest, ASlowReadWaitsInProportionToItsCost) {
  const uint64_t interval = kTimelineFirstIntervalNs;
  const uint64_t slow = 16 * interval;  // 80 ms, as 3.6 million pools take
  uint64_t since = 0, samples = 0;
  while (samples < 1000000 && !WalkAffordable(slow, since, interval)) {
    since += interval;
    ++samples;
  }
  EXPECT_EQ(since, slow * kTimelineWalkShare);
  EXPECT_EQ(samples, 16 * kTimelineWalkShare);
}

}  // namespace
}  // namespace poolscope
