#include "track/radix_sort.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace poolscope {
namespace track {
namespace {

struct Rec {
  uint64_t key;
  uint32_t seq;  // the record's place in the input: ties must keep it
  uint32_t pad;
};

// Sorts with RadixSortBy and with std::stable_sort and requires the same records in the same order.
void ExpectSortsLikeStableSort(std::vector<Rec> in) {
  for (uint32_t i = 0; i < in.size(); ++i) in[i].seq = i;
  std::vector<Rec> want = in;
  std::stable_sort(want.begin(), want.end(), [](const Rec& a, const Rec& b) { return a.key < b.key; });
  std::vector<Rec> tmp(in.size());
  RadixSortBy(in.data(), tmp.data(), in.size(), [](const Rec& r) { return r.key; });
  ASSERT_EQ(in.size(), want.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(in[i].key, want[i].key) << "at " << i << " of " << in.size();
    ASSERT_EQ(in[i].seq, want[i].seq) << "at " << i << " (a tie out of input order)";
  }
}

std::vector<Rec> Keys(std::vector<uint64_t> keys) {
  std::vector<Rec> v;
  for (uint64_t k : keys) v.push_back(Rec{k, 0, 0});
  return v;
}

TEST(RadixSortTest, SmallAndDegenerateInputs) {
  ExpectSortsLikeStableSort({});
  ExpectSortsLikeStableSort(Keys({7}));
  ExpectSortsLikeStableSort(Keys({9, 3}));
  ExpectSortsLikeStableSort(Keys({5, 5, 5, 5}));      // all equal
  ExpectSortsLikeStableSort(Keys({1, 2, 3, 4, 5}));   // in order already
  ExpectSortsLikeStableSort(Keys({5, 4, 3, 2, 1}));   // reversed
  ExpectSortsLikeStableSort(Keys({0, ~uint64_t{0}, 1, ~uint64_t{0} - 1, uint64_t{1} << 63}));  // the whole range
}

// Addresses as the scan sorts them: 16-byte aligned, in a span of a few hundred MiB at a heap's
// address, with repeats; and spans whose width needs one, several, and eight passes.
TEST(RadixSortTest, AddressesAndEveryPassCount) {
  std::mt19937_64 rng(12345);
  for (int width : {1, 3, 8, 9, 16, 17, 25, 33, 47, 63, 64}) {
    for (int align_bits : {0, 4, 6}) {
      std::vector<uint64_t> keys;
      const uint64_t base = uint64_t{0x5555} << 32;
      for (int i = 0; i < 5000; ++i) {
        uint64_t k = rng();
        if (width < 64) k &= (uint64_t{1} << width) - 1;
        k = (k >> align_bits) << align_bits;
        keys.push_back(width < 48 ? base + k : k);
      }
      for (int i = 0; i < 200; ++i) keys.push_back(keys[rng() % keys.size()]);  // ties
      SCOPED_TRACE(testing::Message() << "width " << width << " align " << align_bits);
      ExpectSortsLikeStableSort(Keys(keys));
    }
  }
}

// The key function is what is sorted by, not the record's first word.
TEST(RadixSortTest, SortsByTheKeyGiven) {
  std::vector<Rec> v = Keys({30, 10, 20});
  v[0].pad = 1;
  v[1].pad = 3;
  v[2].pad = 2;
  std::vector<Rec> tmp(v.size());
  RadixSortBy(v.data(), tmp.data(), v.size(), [](const Rec& r) { return uint64_t{r.pad}; });
  EXPECT_EQ(v[0].key, 30u);
  EXPECT_EQ(v[1].key, 20u);
  EXPECT_EQ(v[2].key, 10u);
}

// SortNearlyInOrder against std::sort: the keys in order, and every record kept (the seq numbers are a
// permutation). `room` as the caller gives it; `want_sorted` whether it must have sorted.
void ExpectNearlySorts(std::vector<Rec> in, size_t room, bool want_sorted) {
  for (uint32_t i = 0; i < in.size(); ++i) in[i].seq = i;
  std::vector<Rec> want = in;
  std::sort(want.begin(), want.end(), [](const Rec& a, const Rec& b) { return a.key < b.key; });
  std::vector<Rec> side(room + 1);
  side[room].key = 0xdeadbeef;  // a write past room would change it
  const bool sorted = SortNearlyInOrder(in.data(), in.size(), [](const Rec& r) { return r.key; }, side.data(), room);
  EXPECT_EQ(side[room].key, 0xdeadbeefu);
  ASSERT_EQ(sorted, want_sorted);
  std::vector<bool> seen(in.size());
  for (const Rec& r : in) {
    ASSERT_LT(r.seq, in.size());
    ASSERT_FALSE(seen[r.seq]) << "record " << r.seq << " twice";
    seen[r.seq] = true;
  }
  if (!sorted) return;
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(in[i].key, want[i].key) << "at " << i << " of " << in.size();
}

TEST(SortNearlyInOrderTest, FewOutOfOrderSortWithLittleRoom) {
  ExpectNearlySorts({}, 0, true);
  ExpectNearlySorts(Keys({4}), 0, true);
  ExpectNearlySorts(Keys({1, 2, 3, 4, 5}), 0, true);
  ExpectNearlySorts(Keys({2, 1}), 4, true);
  ExpectNearlySorts(Keys({9, 1, 2, 3, 4}), 4, true);    // a high record first
  ExpectNearlySorts(Keys({1, 2, 3, 4, 0}), 4, true);    // a low record last
  ExpectNearlySorts(Keys({5, 6, 7, 1, 2, 3, 8}), 12, true);  // a run below the records before it
  ExpectNearlySorts(Keys({3, 3, 1, 3, 2, 3}), 12, true);     // ties
  // Addresses appended in order with one in 500 placed anywhere, as the pools are listed.
  std::mt19937_64 rng(7);
  std::vector<uint64_t> keys;
  uint64_t at = uint64_t{0x5555} << 32;
  for (int i = 0; i < 100000; ++i) {
    at += 16 * (1 + rng() % 8);
    keys.push_back(rng() % 500 == 0 ? (uint64_t{0x5555} << 32) + 16 * (rng() % (1u << 24)) : at);
  }
  ExpectNearlySorts(Keys(keys), 100000 / 16, true);
}

TEST(SortNearlyInOrderTest, GivesUpWithEveryRecordKept) {
  ExpectNearlySorts(Keys({5, 4, 3, 2, 1}), 2, false);
  ExpectNearlySorts(Keys({2, 1}), 1, false);  // no room for the one pair
  std::mt19937_64 rng(9);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 10000; ++i) keys.push_back(rng());
  ExpectNearlySorts(Keys(keys), 1000, false);
  // and where the order breaks late, after records have moved
  std::vector<uint64_t> late;
  for (uint64_t i = 0; i < 10000; ++i) late.push_back(i < 9000 ? (i % 100 == 0 ? i + 50 : i) : 20000 - i);
  ExpectNearlySorts(Keys(late), 400, false);
}

}  // namespace
}  // namespace track
}  // namespace poolscope
