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
  ASSERT_TRUE(p.peak.Due(1000, 900));
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

// Due: at the first check that sees anything, then on the way down from a high that passed the last
// snapshot's real live bytes by more than 1/kPeakGrowth, once the fall exceeds 1/kPeakDip of that high;
// or at once past kPeakJump times the last snapshot's.
TEST(PeakPinsTest, DueOnTheWayDownFromAHighPastTheLastSnapshotOrPastAJump) {
  Peak p(4);
  g_pools = {};
  EXPECT_FALSE(p.peak.Due(0, 0));
  EXPECT_TRUE(p.peak.Due(1, 1));
  p.peak.Take(0, 8000, FakeWalk);
  EXPECT_FALSE(p.peak.Due(8000, 100));
  const int64_t above = 8000 + 8000 / kPeakGrowth;
  EXPECT_EQ(p.peak.next(), above);
  EXPECT_FALSE(p.peak.Due(above, 0));  // a high no higher than that calls for none, however far it falls
  EXPECT_FALSE(p.peak.Due(above + 1, above + 1));  // still rising
  EXPECT_FALSE(p.peak.Due(above + 1, above + 1 - (above + 1) / kPeakDip));
  EXPECT_TRUE(p.peak.Due(above + 1, above - (above + 1) / kPeakDip));
  EXPECT_TRUE(p.peak.Due(above + 1, 0));
  // A large free judged before it is made: the fall is to `after`, the bytes still counted in `real`.
  EXPECT_TRUE(p.peak.Due(above + 1, above + 1, 0));
  EXPECT_FALSE(p.peak.Due(above + 1, above + 1, above + 1 - (above + 1) / kPeakDip));
  EXPECT_EQ(p.peak.jump(), 8000 * kPeakJump);
  EXPECT_FALSE(p.peak.Due(8000 * kPeakJump, 8000 * kPeakJump));
  EXPECT_TRUE(p.peak.Due(8000 * kPeakJump + 1, 8000 * kPeakJump + 1));
}

// The checks as the timeline makes them: the highest real live bytes since the last snapshot, and a
// snapshot when Due. `heap` gives the real live bytes at each check.
template <typename Heap>
int64_t Checks(Peak* p, int64_t n, Heap&& heap, int64_t* max_seen) {
  int64_t taken = 0, high = 0;
  *max_seen = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t real = heap(i);
    if (real > high) high = real;
    if (real > *max_seen) *max_seen = real;
    if (!p->peak.Due(high, real)) continue;
    p->peak.Take(0, real, FakeWalk);
    high = real;
    ++taken;
  }
  return taken;
}

// A heap that only grows (from 1 KiB to 1 GiB by 1/64 a check) is walked at each doubling, not at
// each 1/kPeakGrowth: its walks cost two of the largest (the report's own moment is its peak); the last
// is within 1/kPeakJump and a check's step of the highest seen, whatever a program frees after its
// last check.
TEST(PeakPinsTest, AHeapThatOnlyGrowsIsSnapshottedAtEachDoubling) {
  Peak p(4);
  g_pools = {};
  int64_t real = 1024, max_seen;
  const int64_t taken = Checks(&p, 900, [&](int64_t) { return real += real / 64 + 1; }, &max_seen);
  // The first check's 1,041 bytes, then each doubling up to 1,024 * (65/64)^900: 2^20.1 times as much.
  EXPECT_GT(max_seen, int64_t{1} << 30);
  EXPECT_GE(taken, 20);
  EXPECT_LE(taken, 22);
  EXPECT_GE(p.peak.real_live_bytes() * 2 * 65, max_seen * 64);
}

// A heap that grows by 1/64 a check and falls back by 1/16 at each doubling (a sawtooth), then falls to
// half its top: its snapshots follow it geometrically, each at most one check past its fall's start,
// so the last is within 1/kPeakDip and a check's step of the highest seen. From 1 KiB to 1 GiB: 20
// doublings, at most log(2^20) / log((1 + 1/4) * (1 - 1/32)) = 72.5 snapshots whatever the steps,
// here one a doubling.
TEST(PeakPinsTest, ASawtoothHeapIsSnapshottedOnceAPeak) {
  Peak p(4);
  g_pools = {};
  const int64_t top = int64_t{1} << 30;
  int64_t real = 1024, next_fall = 2048, falling = 0, max_seen;
  bool topped = false;
  const int64_t taken = Checks(&p, 100000, [&](int64_t) {
    if (topped || real >= top) {
      topped = true;
      return real > top / 2 ? real -= real / 64 : real;
    }
    if (falling > 0) {
      --falling;
      return real -= real / 64;
    }
    real += real / 64 + 1;
    if (real >= next_fall) {
      next_fall = real * 2;
      falling = 4;
    }
    return real;
  }, &max_seen);
  EXPECT_GE(taken, 20);
  EXPECT_LE(taken, 22);
  EXPECT_GE(max_seen, top);
  EXPECT_LE(real, max_seen / 2);
  EXPECT_GE(p.peak.real_live_bytes() * 64, max_seen * 61);  // (31/32 - 1/64 = 61/64)
  EXPECT_LT(p.peak.real_live_bytes(), max_seen);
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
