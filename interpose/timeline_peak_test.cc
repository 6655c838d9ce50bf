#include "interpose/timeline_peak.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace poolscope {
namespace {

// Pools as the walk sees them: each a list of its live blocks' stack ids.
std::vector<std::vector<uint32_t>> g_pools;

void FakeWalk(void (*fn)(uintptr_t, uint32_t, uint32_t, void*), void* arg, void (*on_pool)(void*)) {
  uintptr_t p = 0x1000;
  for (const std::vector<uint32_t>& pool : g_pools) {
    on_pool(arg);
    for (uint32_t id : pool) fn(p += 16, 16, id, arg);
  }
}

struct Peak {
  explicit Peak(uint32_t capacity) : pins(capacity), last(capacity) { peak.Init(pins.data(), last.data(), capacity); }
  std::vector<uint32_t> pins, last;
  PeakPins peak;
};

// A pool counts once for each stack with a live block in it, however many blocks it has there.
TEST(PeakPinsTest, APoolCountsOnceForEachStackInIt) {
  Peak p(16);
  g_pools = {{3, 3, 5}, {5}, {}, {3, 7, 3, 7}};
  ASSERT_TRUE(p.peak.Due(1));
  p.peak.Take(42, 1000, FakeWalk);
  EXPECT_EQ(p.peak.pins(3), 2u);
  EXPECT_EQ(p.peak.pins(5), 2u);
  EXPECT_EQ(p.peak.pins(7), 1u);
  EXPECT_EQ(p.peak.pins(4), 0u);
  EXPECT_EQ(p.peak.ids(), 8u);
  EXPECT_EQ(p.peak.t_ns(), 42u);
  EXPECT_EQ(p.peak.real_live_bytes(), 1000);
  EXPECT_EQ(p.peak.snapshots(), 1u);
}

// The next snapshot replaces the last one whole: stacks gone from the pools pin nothing, and a stack
// that was counted for the last walk's final pool counts again in this walk's.
TEST(PeakPinsTest, ASnapshotReplacesTheLastOne) {
  Peak p(16);
  g_pools = {{9}, {2, 9}};
  p.peak.Take(1, 800, FakeWalk);
  g_pools = {{2}, {2}, {2}};
  p.peak.Take(2, 1000, FakeWalk);
  EXPECT_EQ(p.peak.pins(2), 3u);
  EXPECT_EQ(p.peak.pins(9), 0u);
  EXPECT_EQ(p.peak.ids(), 3u);
  EXPECT_EQ(p.peak.snapshots(), 2u);
}

// Due: the first time the program holds anything, then only more than 1/kPeakGrowth above the last
// snapshot's real live bytes, so that snapshots follow a growing heap geometrically.
TEST(PeakPinsTest, DueOnlyWhenGrownByTheFraction) {
  Peak p(4);
  g_pools = {};
  EXPECT_FALSE(p.peak.Due(0));
  EXPECT_TRUE(p.peak.Due(1));
  p.peak.Take(0, 8000, FakeWalk);
  EXPECT_FALSE(p.peak.Due(8000));
  EXPECT_FALSE(p.peak.Due(8000 + 8000 / kPeakGrowth));
  EXPECT_TRUE(p.peak.Due(8000 + 8000 / kPeakGrowth + 1));
  // A heap checked as it grows by 1/64 at a time from 1 KiB to 1 GiB takes at most
  // log(2^20) / log(1 + 1/4) = 62.1 snapshots, not one per check (each lands up to 1/64 past its due).
  int64_t taken = 0;
  for (int64_t real = 1024; real <= (int64_t{1} << 30); real += real / 64 + 1) {
    if (!p.peak.Due(real)) continue;
    p.peak.Take(0, real, FakeWalk);
    ++taken;
  }
  EXPECT_LE(taken, 63);
  EXPECT_GE(taken, 40);
}

// Stack ids past the arrays are not counted (a slot's stale word read while it was carved).
TEST(PeakPinsTest, IdsPastTheCapacityAreLeftOut) {
  Peak p(4);
  g_pools = {{1, 4, 1000000}, {3}};
  p.peak.Take(0, 1, FakeWalk);
  EXPECT_EQ(p.peak.pins(1), 1u);
  EXPECT_EQ(p.peak.pins(3), 1u);
  EXPECT_EQ(p.peak.ids(), 4u);
}

}  // namespace
}  // namespace poolscope
