// File: track/frame_rule_table_test.cc
//
// The frame rules' cache in a process of its own, from its first table: every pc looked up is cached
// through the table's doublings, so looking the same pcs up again computes nothing; then (no function
// read before it) the functions' arena faulted in only as far as its first records need.
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

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

// The functions' arena is faulted in ahead of its records by as much as they hold: the first
// functions read fault in a page or two of it, not the 16 pages of the largest batch.
TEST(FrameRuleTableTest, TheFirstFunctionsReadFaultInAFewPagesOfTheirArena) {
  struct Piece {
    uintptr_t begin = 0, end = 0;
  } arena;
  ForEachFrameRuleMemory(
      [](uintptr_t b, uintptr_t e, void* arg) {
        if (e - b == size_t{1} << 20) *static_cast<Piece*>(arg) = Piece{b, e};  // the arena: 1 MiB
      },
      &arena);
  ASSERT_NE(arena.begin, 0u);
  auto resident = [&arena] {
    const uintptr_t from = (arena.begin + 4095) & ~uintptr_t{4095};
    const uintptr_t to = arena.end & ~uintptr_t{4095};
    std::vector<unsigned char> vec((to - from) / 4096);
    EXPECT_EQ(mincore(reinterpret_cast<void*>(from), to - from, vec.data()), 0);
    size_t n = 0;
    for (unsigned char v : vec) n += v & 1;
    return n;
  };
  ASSERT_EQ(resident(), 0u) << "a function was read before this test (the first one's pcs are in no object)";
  void* scratch = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(scratch, MAP_FAILED);
  const bool populates = madvise(scratch, 4096, MADV_POPULATE_WRITE) == 0;
  munmap(scratch, 4096);
  if (!populates) GTEST_SKIP() << "no MADV_POPULATE_WRITE: pages fault in as they are touched";
  const uintptr_t functions[] = {reinterpret_cast<uintptr_t>(&qsort), reinterpret_cast<uintptr_t>(&strtod),
                                 reinterpret_cast<uintptr_t>(&bsearch)};
  for (uintptr_t f : functions) ComputeFrameRule(f + 4);
  EXPECT_GE(FrameRulesFunctionsRead(), 1u);
  EXPECT_LE(resident(), 4u) << "the arena was faulted in far ahead of three functions' records";
}

}  // namespace
}  // namespace track
}  // namespace poolscope
