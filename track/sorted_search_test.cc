#include "track/sorted_search.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace poolscope {
namespace track {
namespace {

uint64_t Self(const uint64_t& x) { return x; }

// Every value at and around every key, from every hint, against std::lower_bound.
TEST(LowerBoundFromTest, AgreesWithLowerBoundFromAnyHint) {
  for (std::vector<uint64_t> a : std::vector<std::vector<uint64_t>>{
           {}, {5}, {5, 5}, {1, 3, 5, 7, 9}, {2, 2, 2, 8, 8, 9, 100, 1000, 1001}}) {
    std::vector<uint64_t> values = {0, ~uint64_t{0}};
    for (uint64_t k : a) {
      values.push_back(k - 1);
      values.push_back(k);
      values.push_back(k + 1);
    }
    for (uint64_t v : values) {
      const size_t want = static_cast<size_t>(std::lower_bound(a.begin(), a.end(), v) - a.begin());
      for (size_t hint = 0; hint <= a.size() + 2; ++hint) {
        ASSERT_EQ(LowerBoundFrom(a.data(), a.size(), hint, v, Self), want)
            << "v " << v << " hint " << hint << " n " << a.size();
      }
    }
  }
}

// Lookups in nearly ascending order, each from the last answer, as the report makes them; and random
// ones from far hints.
TEST(LowerBoundFromTest, WalksAndJumps) {
  std::mt19937_64 rng(3);
  std::vector<uint64_t> a;
  for (int i = 0; i < 100000; ++i) a.push_back(rng() % (uint64_t{1} << 30));
  std::sort(a.begin(), a.end());
  size_t hint = 0;
  for (size_t i = 0; i < a.size(); i += 1 + rng() % 3) {
    const uint64_t v = rng() % 50 == 0 ? rng() % (uint64_t{1} << 31) : a[i] + rng() % 2;
    const size_t want = static_cast<size_t>(std::lower_bound(a.begin(), a.end(), v) - a.begin());
    const size_t got = LowerBoundFrom(a.data(), a.size(), hint, v, Self);
    ASSERT_EQ(got, want) << "v " << v << " hint " << hint;
    hint = got;
  }
}

TEST(PartitionPointTest, AgreesWithTheStandardOneOnEveryPrefix) {
  const std::vector<int> a = {1, 1, 2, 3, 5, 8, 8, 8, 13};
  for (size_t lo = 0; lo <= a.size(); ++lo) {
    for (size_t hi = lo; hi <= a.size(); ++hi) {
      for (int v = 0; v <= 14; ++v) {
        const size_t want = static_cast<size_t>(
            std::partition_point(a.begin() + lo, a.begin() + hi, [&](int x) { return x < v; }) - a.begin());
        EXPECT_EQ(PartitionPoint(lo, hi, [&](size_t i) { return a[i] < v; }), want)
            << "[" << lo << ", " << hi << ") v " << v;
      }
    }
  }
}

}  // namespace
}  // namespace track
}  // namespace poolscope
