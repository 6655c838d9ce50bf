#include "track/granule_filter.h"

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace poolscope {
namespace track {
namespace {

constexpr uintptr_t kMiB = uintptr_t{1} << 20;

bool InAny(const std::vector<std::pair<uintptr_t, uintptr_t>>& ranges, uint64_t x) {
  for (const auto& r : ranges) {
    if (r.first <= x && x < r.second) return true;
  }
  return false;
}

// No word inside a range is ever turned away: random ranges (a low heap, high chunks, ranges across
// granule edges, one-byte ranges), every edge and random words.
TEST(GranuleFilterTest, NeverRefusesAWordInARange) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
    GranuleFilter f;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < n; ++i) {
      const uintptr_t base = (i % 2 == 0 ? uintptr_t{0x1000000} : uintptr_t{0x7f0000000000}) + (rng() % (1u << 30));
      const uintptr_t len = 1 + rng() % (i % 3 == 0 ? 3 * kMiB : 4096);
      ranges.emplace_back(base, base + len);
      f.Add(base, base + len);
    }
    for (const auto& r : ranges) {
      for (uint64_t x : {uint64_t{r.first}, uint64_t{r.second - 1}, uint64_t{(r.first + r.second) / 2}}) {
        ASSERT_TRUE(f.MayHold(x)) << std::hex << x;
      }
    }
    for (int k = 0; k < 2000; ++k) {
      const uint64_t x = rng();
      if (InAny(ranges, x)) ASSERT_TRUE(f.MayHold(x)) << std::hex << x;
    }
  }
}

// What it is for: pointers a megabyte and more away from every range are turned away, but for the
// few granules that hash onto a marked bit.
TEST(GranuleFilterTest, RefusesWordsInOtherGranules) {
  GranuleFilter f;
  const uintptr_t heap = 0x14000000, chunk = 0x7fb012300000;
  f.Add(heap, heap + 3 * kMiB);
  f.Add(chunk, chunk + 200 * 1024);
  EXPECT_TRUE(f.MayHold(heap + 2 * kMiB + 5));
  EXPECT_TRUE(f.MayHold(chunk + 100));
  EXPECT_FALSE(f.MayHold(heap + 3 * kMiB));  // the next granule
  EXPECT_FALSE(f.MayHold(heap - 1));
  EXPECT_FALSE(f.MayHold(0x400000));          // the program's code
  EXPECT_FALSE(f.MayHold(chunk + kMiB));      // the library mapped above the chunk
  EXPECT_FALSE(f.MayHold(0x7ffc12345678));    // a stack
  // Four granules marked: of 40,960 others, about 40 share a bit.
  int passed = 0;
  for (uint64_t g = 0; g < 10 * GranuleFilter::kBits; ++g) {
    passed += f.MayHold((uint64_t{0x7e0000000} + g) << 20) ? 1 : 0;
  }
  EXPECT_LT(passed, 200);
}

// A range wider than the table marks everything; an empty one nothing.
TEST(GranuleFilterTest, WideRangeMarksAllEmptyRangeNothing) {
  GranuleFilter f;
  f.Add(100, 100);
  f.Add(200, 100);
  for (uint64_t g = 0; g < GranuleFilter::kBits; ++g) ASSERT_FALSE(f.MayHold(g << 20));
  f.Add(0x10000000, 0x10000000 + (uint64_t{4096} << 20));
  for (uint64_t g = 0; g < GranuleFilter::kBits; ++g) ASSERT_TRUE(f.MayHold(g << 20));
  f.Clear();
  EXPECT_FALSE(f.MayHold(0x10000000));
}

}  // namespace
}  // namespace track
}  // namespace poolscope
