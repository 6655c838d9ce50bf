// File: track/frame_rule_table_test.cc
//
// The frame rules' cache in a process of its own, from its first table: every pc looked up is cached
// through the table's doublings, so looking the same pcs up again computes nothing.
#include <cstdint>

#include "gtest/gtest.h"
#include "track/frame_rules.h"

namespace poolscope {
namespace track {
namespace {

TEST(FrameRuleTableTest, EveryPcLookedUpStaysCachedThroughTheDoublings) {
  using frame_rules_internal::g_bits;
  ASSERT_EQ(g_bits.load(), frame_rules_internal::kFirstTableBits) << "not the process's first lookups";
  // Addresses in no object (their rule is kRuleUnsupported, found without reading CFI): 20,000 keys.
  constexpr uintptr_t kBase = uintptr_t{0x7e0000000000};
  constexpr size_t kPcs = 20000;
  for (size_t i = 0; i < kPcs; ++i) LookupFrameRule(kBase + 16 * i);
  // A table doubles when the rules claimed since it became current fill half its slots.
  int want_bits = frame_rules_internal::kFirstTableBits;
  for (size_t claimed = 0, since = 0; claimed < kPcs; ++claimed) {
    if (++since >= (size_t{1} << want_bits) / 2 && want_bits < frame_rules_internal::kTableBits) {
      ++want_bits;
      since = 0;
    }
  }
  EXPECT_GE(want_bits, frame_rules_internal::kFirstTableBits + 3) << "fewer doublings than the test means to see";
  EXPECT_EQ(g_bits.load(), want_bits);
  const uint64_t computed = FrameRulesComputed();
  EXPECT_EQ(computed, kPcs) << "a pc was computed more than once while the pcs were new";
  for (size_t i = 0; i < kPcs; ++i) LookupFrameRule(kBase + 16 * i);
  EXPECT_EQ(FrameRulesComputed(), computed) << "pcs looked up before were computed again";
}

}  // namespace
}  // namespace track
}  // namespace poolscope
