// File: interpose/owned_set_test.cc
#include "interpose/owned_set.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace poolscope {
namespace {

// Block-like addresses: 16-byte aligned, never 0 or 1 (the empty and removed marks), scattered
// (a bijection of i) so that they collide in the tables as heap addresses do.
uintptr_t Block(uint64_t i) {
  uint64_t x = i * 0xD1B54A32D192ED03ull;
  x ^= x >> 29;
  return 0x7f0000000000ull + (x & 0xffffffffull) * 16 + (i << 36);
}

TEST(OwnedSetTest, InsertRemoveContains) {
  auto set = std::make_unique<OwnedSet>();
  EXPECT_FALSE(set->Contains(Block(1)));
  EXPECT_FALSE(set->Remove(Block(1)));
  set->Insert(Block(1));
  set->Insert(Block(1));  // a second insert of the same block keeps one entry
  EXPECT_TRUE(set->Contains(Block(1)));
  EXPECT_FALSE(set->Contains(Block(2)));
  EXPECT_TRUE(set->Remove(Block(1)));
  EXPECT_FALSE(set->Contains(Block(1)));
  EXPECT_FALSE(set->Remove(Block(1)));
  EXPECT_EQ(set->lost(), 0u);
}

// Far more blocks than a shard's first table holds (64 shards of 512 slots, grown at half full),
// removed in an order unlike the insertion's, with reinsertion into removed slots in between.
TEST(OwnedSetTest, GrowsAndReusesRemovedSlots) {
  auto set = std::make_unique<OwnedSet>();
  constexpr uint64_t kBlocks = 200000;
  for (uint64_t i = 1; i <= kBlocks; ++i) set->Insert(Block(i));
  for (uint64_t i = 1; i <= kBlocks; i += 2) ASSERT_TRUE(set->Remove(Block(i))) << i;
  for (uint64_t i = 1; i <= kBlocks; ++i) {
    ASSERT_EQ(set->Contains(Block(i)), i % 2 == 0) << i;
  }
  for (uint64_t i = 1; i <= kBlocks; i += 4) set->Insert(Block(i));
  for (uint64_t i = kBlocks; i >= 1; --i) {
    const bool present = i % 2 == 0 || i % 4 == 1;
    ASSERT_EQ(set->Remove(Block(i)), present) << i;
  }
  for (uint64_t i = 1; i <= kBlocks; ++i) ASSERT_FALSE(set->Contains(Block(i))) << i;
  EXPECT_EQ(set->lost(), 0u);
}

}  // namespace
}  // namespace poolscope
