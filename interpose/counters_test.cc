// File: interpose/counters_test.cc
#include "interpose/counters.h"

#include <cstring>

#include "gtest/gtest.h"

namespace poolscope {
namespace {

TEST(SizeBucketTest, PowersOfTwoUpperBounds) {
  EXPECT_EQ(SizeBucket(0), 0);
  EXPECT_EQ(SizeBucket(1), 0);
  EXPECT_EQ(SizeBucket(2), 1);
  EXPECT_EQ(SizeBucket(3), 2);
  EXPECT_EQ(SizeBucket(4), 2);
  EXPECT_EQ(SizeBucket(5), 3);
  EXPECT_EQ(SizeBucket(64), 6);
  EXPECT_EQ(SizeBucket(65), 7);
  EXPECT_EQ(SizeBucket(size_t{1} << 40), 40);
  EXPECT_EQ(SizeBucket(~size_t{0}), kSizeBuckets - 1);  // clamped
  // The shim's CountPooled uses the highest bit of 2n - 1 for 1 <= n <= 1 MiB: the same bucket.
  for (size_t n = 1; n <= (size_t{1} << 20); n = n * 3 / 2 + 1) {
    EXPECT_EQ(63 - __builtin_clzll(2 * n - 1), SizeBucket(n)) << n;
  }
}

// The inline pooled fast paths count one number per call; settling turns it into the call and the
// block in the logical ledger and the hit or pooled free of the pool, as the slow paths count them. A
// LIFO free that left the pool fresh counts in nfast_reset: all that, and the reset in place.
TEST(LedgerTest, SettleMakesTheCountsAFastPathCallStandsFor) {
  ThreadCounters c;
  memset(&c, 0, sizeof c);
  c.nfast[FreeIndex(kFree)] = 5;
  c.nfast[FreeIndex(kDelete)] = 1;
  c.nfast_reset[FreeIndex(kFree)] = 4;
  c.nfast_reset[FreeIndex(kDeleteArray)] = 3;
  c.logical.ncalls[kMalloc] = 3;  // counted by a slow path
  c.logical.nallocs = 3;
  uint64_t hits = 3, pooled_frees = 0, resets = 2;
  FastCarves carves;
  memset(&carves, 0, sizeof carves);
  carves.n[kFastMalloc][5] = 7;  // 7 malloc(5)
  carves.n[kFastNew][24] = 2;    // 2 new of 24 bytes
  Settle(&c, carves, &hits, &pooled_frees, &resets);
  EXPECT_EQ(c.logical.ncalls[kMalloc], 10u);
  EXPECT_EQ(c.logical.ncalls[kNew], 2u);
  EXPECT_EQ(c.logical.ncalls[kFree], 9u);
  EXPECT_EQ(c.logical.ncalls[kDelete], 1u);
  EXPECT_EQ(c.logical.ncalls[kDeleteArray], 3u);
  EXPECT_EQ(c.logical.nallocs, 12u);
  EXPECT_EQ(c.logical.nfrees, 13u);
  EXPECT_EQ(hits, 12u);
  EXPECT_EQ(pooled_frees, 13u);
  EXPECT_EQ(resets, 9u);
  for (int f = 0; f < kNumFreeApis; ++f) {
    EXPECT_EQ(c.nfast[f], 0u) << ApiName(kFreeApis[f]);
    EXPECT_EQ(c.nfast_reset[f], 0u) << ApiName(kFreeApis[f]);
    EXPECT_EQ(FreeIndex(kFreeApis[f]), f);
  }
  EXPECT_EQ(c.logical.nbytes, 7u * 5 + 2u * 24);
  EXPECT_EQ(c.sizes[SizeBucket(5)], 7u);
  EXPECT_EQ(c.sizes[SizeBucket(24)], 2u);
  // Settling again with the table cleared (as its thread does) changes nothing.
  memset(&carves, 0, sizeof carves);
  Settle(&c, carves, &hits, &pooled_frees, &resets);
  EXPECT_EQ(c.logical.nallocs, 12u);
  EXPECT_EQ(c.logical.nfrees, 13u);
  EXPECT_EQ(hits, 12u);
  EXPECT_EQ(resets, 9u);
}

// The inline malloc, new and new[] count a block in one cell of the table, by entry point and size:
// settled, every cell must give what the slow path counts for each of its blocks (CountPooled in
// shim.h, and the pool's hit), for every size the inline path serves.
TEST(LedgerTest, SettledCarveTableEqualsTheSlowPathsCounts) {
  FastCarves carves;
  ThreadCounters fast, slow;
  memset(&carves, 0, sizeof carves);
  memset(&fast, 0, sizeof fast);
  memset(&slow, 0, sizeof slow);
  uint64_t fast_hits = 0, slow_hits = 0, unused = 0;
  for (int f = 0; f < kNumFastApis; ++f) {
    for (size_t n = 1; n <= kFastSizes; ++n) {
      const uint64_t k = (n * 7 + static_cast<size_t>(f)) % 5;  // some cells empty
      carves.n[f][n] = k;
      for (uint64_t i = 0; i < k; ++i) {
        ++slow.logical.ncalls[kFastApis[f]];
        ++slow.logical.nallocs;
        slow.logical.nbytes += n;
        ++slow.sizes[SizeBucket(n)];
        ++slow_hits;
      }
    }
  }
  EXPECT_EQ(FastApiOf(kMalloc), kFastMalloc);
  EXPECT_EQ(FastApiOf(kNew), kFastNew);
  EXPECT_EQ(FastApiOf(kNewArray), kFastNewArray);
  const FastCarves before = carves;
  Settle(&fast, carves, &fast_hits, &unused, &unused);
  EXPECT_EQ(memcmp(&fast, &slow, sizeof fast), 0);
  EXPECT_EQ(fast.logical.nbytes, slow.logical.nbytes);
  for (int b = 0; b < kSizeBuckets; ++b) EXPECT_EQ(fast.sizes[b], slow.sizes[b]) << b;
  EXPECT_EQ(fast_hits, slow_hits);
  // The table is only read: a report settles a copy of a running thread's counters with its table.
  EXPECT_EQ(memcmp(&before, &carves, sizeof carves), 0);
}

TEST(LedgerTest, RegularCallsCountInBothLedgersOnce) {
  ThreadCounters c;
  memset(&c, 0, sizeof c);
  c.regular.nallocs = 10;
  c.regular.ncalls[kMalloc] = 12;  // two failed
  c.logical.nallocs = 5;           // pooled: the program's, not the allocator's
  c.logical.ncalls[kMalloc] = 5;
  c.real.nallocs = 2;              // pools: the allocator's, not the program's
  c.real.ncalls[kPosixMemalign] = 2;
  Ledger l = Logical(c);
  Ledger r = Real(c);
  EXPECT_EQ(l.nallocs, 15u);
  EXPECT_EQ(l.ncalls[kMalloc], 17u);
  EXPECT_EQ(l.ncalls[kPosixMemalign], 0u);
  EXPECT_EQ(r.nallocs, 12u);
  EXPECT_EQ(r.ncalls[kMalloc], 12u);
  EXPECT_EQ(r.ncalls[kPosixMemalign], 2u);
}

TEST(LedgerTest, ThreadCountersFoldFieldByField) {
  ThreadCounters a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  a.regular.nfrees = 3;
  a.sizes[4] = 7;
  b.regular.nfrees = 4;
  b.sizes[4] = 1;
  b.sizes[kSizeBuckets - 1] = 2;
  b.real.nbytes = 100;
  AddCounters(&a, b);
  EXPECT_EQ(a.regular.nfrees, 7u);
  EXPECT_EQ(a.sizes[4], 8u);
  EXPECT_EQ(a.sizes[kSizeBuckets - 1], 2u);
  EXPECT_EQ(a.real.nbytes, 100u);
}

TEST(ApiNameTest, EveryEntryPointHasItsReportKey) {
  EXPECT_STREQ(ApiName(kMalloc), "malloc");
  EXPECT_STREQ(ApiName(kNewArray), "new[]");
  EXPECT_STREQ(ApiName(kDeleteArray), "delete[]");
  EXPECT_STREQ(ApiName(kArenaClose), "poolscope_arena_close");
  EXPECT_STREQ(ApiName(kNumApis), "unknown");
}

}  // namespace
}  // namespace poolscope
