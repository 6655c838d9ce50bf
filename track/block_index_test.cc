// BlockIndex and ClassifyIndexed (track/reachability.h): ClassifyReachability taken apart, the index
// built on one thread and the blocks classified on another.
#include <string.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "track/reachability.h"
#include "track/reachability_reference.h"

namespace poolscope {
namespace track {
namespace {

// Scratch memory that counts its live mappings and every Map and Unmap.
class CountingScratch : public ScratchMemory {
 public:
  void* Map(size_t bytes) override {
    ++maps;
    ++live;
    return real_.Map(bytes);
  }
  void Unmap(void* p, size_t bytes) override {
    ++unmaps;
    --live;
    real_.Unmap(p, bytes);
  }
  int live = 0, maps = 0, unmaps = 0;

 private:
  MmapScratchMemory real_;
};

// A random heap in an arena of its own: blocks (some pooled, some of size 0, some unaligned), their
// words and a root area pointing at starts, interiors, just past ends, or nowhere.
struct RandomHeap {
  std::vector<uint64_t> arena = std::vector<uint64_t>(1 << 13, 0);
  std::vector<ScanBlock> blocks;
  std::vector<uint64_t> root_words;

  explicit RandomHeap(std::mt19937_64& rng) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(arena.data());
    const size_t bytes = arena.size() * 8;
    for (size_t offset = 0, n = 1 + rng() % 120; blocks.size() < n;) {
      offset += 8 * (rng() % 4);
      if (rng() % 8 == 0) offset += 4;
      const size_t size = rng() % 10 == 0 ? 0 : 1 + rng() % 120;
      if (offset + size + 16 >= bytes) break;
      blocks.push_back(ScanBlock::Of(base + offset, size, rng() % 2 == 0));
      offset += size == 0 ? 8 : size;
    }
    const double density = 0.02 + 0.3 * double(rng() % 100) / 100;
    auto word = [&]() -> uint64_t {
      const ScanBlock& t = blocks[rng() % blocks.size()];
      if (double(rng() % 1000) / 1000 > density) return rng() % 4096;
      switch (rng() % 4) {
        case 0:
          return t.start + t.size();
        case 1:
          return t.start + (t.size() ? rng() % t.size() : 0);
        default:
          return t.start;
      }
    };
    root_words.resize(1 + rng() % 8);
    for (uint64_t& w : root_words) w = word();
    for (const ScanBlock& b : blocks) {
      for (uintptr_t a = (b.start + 7) & ~uintptr_t{7}; a + 8 <= b.start + b.size(); a += 8) {
        const uint64_t v = word();
        memcpy(reinterpret_cast<void*>(a), &v, 8);
      }
    }
    if (rng() % 2) std::shuffle(blocks.begin(), blocks.end(), rng);
  }
  std::vector<RootRange> roots() const {
    return {{reinterpret_cast<uintptr_t>(root_words.data()),
             reinterpret_cast<uintptr_t>(root_words.data() + root_words.size())}};
  }
};

TEST(BlockIndexTest, BuiltOnOneThreadAndClassifiedOnAnotherAgreesWithTheReference) {
  std::mt19937_64 rng(777);
  int kinds_seen[4] = {};
  for (int trial = 0; trial < 200; ++trial) {
    RandomHeap h(rng);
    const Reference ref(h.blocks, h.roots());
    MmapScratchMemory scratch;
    BlockIndex index(scratch);
    bool built = false;
    std::thread([&] { built = index.Build(h.blocks.data(), h.blocks.size()); }).join();
    ASSERT_TRUE(built);
    DirectMemoryReader reader;
    ReachabilityResult r;
    const std::vector<RootRange> roots = h.roots();
    ASSERT_TRUE(ClassifyIndexed(index, roots.data(), roots.size(), reader, reader, scratch, &r));
    LeakTotal totals[4] = {}, pooled_lost = {};
    ASSERT_EQ(h.blocks.size(), ref.blocks.size());
    for (size_t i = 0; i < h.blocks.size(); ++i) {
      const ScanBlock& b = h.blocks[i];
      ASSERT_EQ(b.start, ref.blocks[i].start) << "trial " << trial << ": sorted by the build";
      ASSERT_EQ(b.kind(), ref.kind[i]) << "trial " << trial << " block " << i;
      totals[int(ref.kind[i])].blocks++;
      totals[int(ref.kind[i])].bytes += b.size();
      if (b.pooled() && (ref.kind[i] == LeakKind::kDefinitelyLost || ref.kind[i] == LeakKind::kIndirectlyLost)) {
        pooled_lost.blocks++;
        pooled_lost.bytes += b.size();
      }
      kinds_seen[int(ref.kind[i])]++;
    }
    EXPECT_EQ(r.still_reachable.blocks, totals[0].blocks) << "trial " << trial;
    EXPECT_EQ(r.still_reachable.bytes, totals[0].bytes) << "trial " << trial;
    EXPECT_EQ(r.possibly_lost.bytes, totals[1].bytes) << "trial " << trial;
    EXPECT_EQ(r.indirectly_lost.blocks, totals[2].blocks) << "trial " << trial;
    EXPECT_EQ(r.definitely_lost.bytes, totals[3].bytes) << "trial " << trial;
    EXPECT_EQ(r.pooled_lost.blocks, pooled_lost.blocks) << "trial " << trial;
    EXPECT_EQ(r.pooled_lost.bytes, pooled_lost.bytes) << "trial " << trial;
  }
  for (int k = 0; k < 4; ++k) EXPECT_GT(kinds_seen[k], 100) << k;
}

TEST(BlockIndexTest, AnIndexNotBuiltClassifiesNothing) {
  MmapScratchMemory scratch;
  BlockIndex index(scratch);
  DirectMemoryReader reader;
  ReachabilityResult r;
  r.definitely_lost.blocks = 77;
  EXPECT_FALSE(ClassifyIndexed(index, nullptr, 0, reader, reader, scratch, &r));
  EXPECT_EQ(r.definitely_lost.blocks, 0u);
}

TEST(BlockIndexTest, BuildsOnce) {
  std::vector<uint64_t> arena(4, 0);
  std::vector<ScanBlock> blocks = {ScanBlock::Of(reinterpret_cast<uintptr_t>(arena.data()), 16)};
  MmapScratchMemory scratch;
  BlockIndex index(scratch);
  EXPECT_TRUE(index.Build(blocks.data(), blocks.size()));
  EXPECT_FALSE(index.Build(blocks.data(), blocks.size()));
}

// What a caller building on another thread relies on: the build maps and never unmaps, classifying
// gives back what it mapped itself, and the index's memory goes with the index.
TEST(BlockIndexTest, HoldsItsMemoryUntilItGoes) {
  std::mt19937_64 rng(99);
  RandomHeap h(rng);
  CountingScratch scratch;
  {
    BlockIndex index(scratch);
    ASSERT_TRUE(index.Build(h.blocks.data(), h.blocks.size()));
    EXPECT_GT(scratch.maps, 0);
    EXPECT_EQ(scratch.unmaps, 0);
    const int held = scratch.live;
    DirectMemoryReader reader;
    ReachabilityResult r;
    const std::vector<RootRange> roots = h.roots();
    ASSERT_TRUE(ClassifyIndexed(index, roots.data(), roots.size(), reader, reader, scratch, &r));
    EXPECT_EQ(scratch.live, held);
  }
  EXPECT_EQ(scratch.live, 0);
}

}  // namespace
}  // namespace track
}  // namespace poolscope
