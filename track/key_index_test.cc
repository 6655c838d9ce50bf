#include "track/key_index.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>

namespace poolscope {
namespace track {
namespace {

TEST(KeyIndexTest, EmptyAnswersNone) {
  KeyIndex index;
  EXPECT_EQ(index.Get(0), KeyIndex::kNone);
  EXPECT_EQ(index.Get(0x7f0000001234), KeyIndex::kNone);
  EXPECT_EQ(index.size(), 0u);
}

// Neighbouring addresses (a stack's return addresses, a table's offsets), key 0 among them, through
// several doublings, and values overwritten: every key answers its last value, absent keys none.
TEST(KeyIndexTest, AgreesWithAMapThroughGrowth) {
  KeyIndex index;
  std::unordered_map<uint64_t, uint32_t> want;
  std::mt19937_64 rng(99);
  for (uint32_t i = 0; i < 20000; ++i) {
    const uint64_t key = rng() % 3 == 0 ? rng() : 0x400000 + 16 * (rng() % 30000);
    const uint32_t value = static_cast<uint32_t>(rng() % 1000000);
    index.Put(key, value);
    want[key] = value;
  }
  index.Put(0, 7);
  want[0] = 7;
  EXPECT_EQ(index.size(), want.size());
  for (const auto& kv : want) ASSERT_EQ(index.Get(kv.first), kv.second) << kv.first;
  for (uint64_t k = 0x400008; k < 0x400000 + 16 * 30000; k += 16) ASSERT_EQ(index.Get(k), KeyIndex::kNone);
}

// Room reserved ahead holds that many keys without growing; reserving again, smaller or larger,
// keeps every key where it answers.
TEST(KeyIndexTest, ReservedRoomHoldsItsKeysAndKeepsThoseThere) {
  KeyIndex index;
  index.Reserve(5000);
  const size_t room = index.capacity();
  EXPECT_GE(room, 5000u);
  for (uint32_t i = 0; i < 5000; ++i) index.Put(0x7f0000000000 + 24 * uint64_t{i}, i);
  EXPECT_EQ(index.capacity(), room);
  index.Reserve(100);
  EXPECT_EQ(index.capacity(), room);
  index.Reserve(50000);
  EXPECT_GE(index.capacity(), 50000u);
  EXPECT_EQ(index.size(), 5000u);
  for (uint32_t i = 0; i < 5000; ++i) ASSERT_EQ(index.Get(0x7f0000000000 + 24 * uint64_t{i}), i);
  EXPECT_EQ(index.Get(0x7f0000000000 + 24 * 5000), KeyIndex::kNone);
}

}  // namespace
}  // namespace track
}  // namespace poolscope
