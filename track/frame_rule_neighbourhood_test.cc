// File: track/frame_rule_neighbourhood_test.cc
//
// The frame rules' cache in a process of its own, from its first table: a pc whose neighbourhood of
// probed slots is full (every slot from its home on claimed by other pcs) is cached all the same, and
// looking it up again computes nothing.
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "track/frame_rules.h"

namespace poolscope {
namespace track {
namespace {

TEST(FrameRuleNeighbourhoodTest, APcWhoseNeighbourhoodIsFullIsCachedAllTheSame) {
  using frame_rules_internal::g_bits;
  const int bits = g_bits.load();
  ASSERT_EQ(bits, frame_rules_internal::kFirstTableBits) << "not the process's first lookups";
  // Addresses in no object (their rule is kRuleUnsupported, found without reading CFI), all with the
  // same home slot in the first table: 16 fill the slots from it on, the 17th finds them full.
  constexpr uintptr_t kBase = uintptr_t{0x7e0000000000};
  std::vector<uintptr_t> pcs;
  const size_t home = frame_rules_internal::Hash(kBase, bits);
  for (uintptr_t pc = kBase; pcs.size() < 17; pc += 16) {
    if (frame_rules_internal::Hash(pc, bits) == home) pcs.push_back(pc);
  }
  for (size_t i = 0; i < 16; ++i) LookupFrameRule(pcs[i]);
  EXPECT_EQ(FrameRulesComputed(), 16u);
  EXPECT_EQ(g_bits.load(), bits) << "16 claims should not have doubled a table of " << (1 << bits);
  // The 17th: computed once, then answered from the cache however often it is asked for.
  for (int round = 0; round < 100; ++round) LookupFrameRule(pcs[16]);
  EXPECT_EQ(FrameRulesComputed(), 17u) << "the pc whose neighbourhood was full was computed again";
  EXPECT_GT(g_bits.load(), bits) << "the table did not move on";
  // The 16 before it are still cached (in the smaller table, then in the current one).
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < 16; ++i) LookupFrameRule(pcs[i]);
  }
  EXPECT_EQ(FrameRulesComputed(), 17u);
}

}  // namespace
}  // namespace track
}  // namespace poolscope
