#include "track/reachability.h"

#include <string.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "track/reachability_reference.h"

namespace poolscope {
namespace track {
namespace {

// Blocks carved out of one arena of the test's own memory, so that their addresses, contents and
// sizes are fully under the test's control.
class Heap {
 public:
  explicit Heap(size_t bytes) : arena_(bytes / 8 + 1, 0) {}

  // A block of `size` bytes at arena offset `offset` (a multiple of 8 unless a test wants otherwise).
  uintptr_t Add(size_t offset, size_t size) {
    uintptr_t start = base() + offset;
    blocks_.push_back(ScanBlock::Of(start, size));
    return start;
  }
  uintptr_t base() const { return reinterpret_cast<uintptr_t>(arena_.data()); }
  void Put(uintptr_t addr, uint64_t v) { memcpy(reinterpret_cast<void*>(addr), &v, 8); }

  std::vector<ScanBlock>& blocks() { return blocks_; }
  const ScanBlock& At(uintptr_t start) const {
    for (const ScanBlock& b : blocks_) {
      if (b.start == start) return b;
    }
    ADD_FAILURE() << "no block at " << start;
    return blocks_[0];
  }
  LeakKind Kind(uintptr_t start) const { return At(start).kind(); }
  // The clique totals of the block at `start`, from the last Classify.
  const CliqueTotals& Clique(uintptr_t start) const {
    for (size_t i = 0; i < blocks_.size(); ++i) {
      if (blocks_[i].start == start) return cliques_[i];
    }
    ADD_FAILURE() << "no block at " << start;
    return cliques_[0];
  }
  // Clique totals by position in the (sorted) blocks, from the last Classify.
  const CliqueTotals& CliqueAt(size_t i) const { return cliques_[i]; }

  ReachabilityResult Classify(const std::vector<RootRange>& roots, MemoryReader* root_reader = nullptr,
                              MemoryReader* heap_reader = nullptr) {
    DirectMemoryReader direct;
    MmapScratchMemory scratch;
    ReachabilityResult r;
    cliques_.assign(blocks_.size(), CliqueTotals{77, 77});  // the classifier must zero them
    EXPECT_TRUE(ClassifyReachability(blocks_.data(), blocks_.size(), roots.data(), roots.size(),
                                     root_reader ? *root_reader : direct,
                                     heap_reader ? *heap_reader : direct, scratch, &r, cliques_.data()));
    return r;
  }

 private:
  std::vector<uint64_t> arena_;
  std::vector<ScanBlock> blocks_;
  std::vector<CliqueTotals> cliques_;
};

// Up to `count` blocks of min_size to min_size + 119 bytes (a tenth of them of 0) at random gaps (of
// 0 to 24 bytes) in h's arena, in address order.
void AddRandomBlocks(Heap& h, std::mt19937_64& rng, size_t count, size_t min_size) {
  size_t offset = 0;
  for (size_t i = 0; i < count; ++i) {
    offset += 8 * (rng() % 4);
    const size_t size = rng() % 10 == 0 ? 0 : min_size + rng() % 120;
    if (offset + size + 16 >= (1 << 16)) break;
    h.Add(offset, size);
    offset += size == 0 ? 8 : size;
  }
}

// A third of the time a small number, else the start of one of the blocks or a place inside it.
uint64_t RandomWord(const std::vector<ScanBlock>& blocks, std::mt19937_64& rng) {
  const ScanBlock& t = blocks[rng() % blocks.size()];
  if (rng() % 3 == 0) return rng() % 4096;
  return rng() % 2 ? t.start : t.start + (t.size() ? rng() % t.size() : 0);
}

// Sets about a third of each block's aligned words to RandomWord.
void FillRandomly(Heap& h, std::mt19937_64& rng) {
  const std::vector<ScanBlock> blocks = h.blocks();
  for (const ScanBlock& b : blocks) {
    for (uintptr_t a = (b.start + 7) & ~uintptr_t{7}; a + 8 <= b.start + b.size(); a += 8) {
      if (rng() % 3 == 0) h.Put(a, RandomWord(blocks, rng));
    }
  }
}

bool Lost(LeakKind k) { return k == LeakKind::kDefinitelyLost || k == LeakKind::kIndirectlyLost; }

// r's four classes are totals[kind], blocks and bytes.
void ExpectClasses(const ReachabilityResult& r, const LeakTotal* totals, int trial) {
  const LeakTotal* got[] = {&r.still_reachable, &r.possibly_lost, &r.indirectly_lost, &r.definitely_lost};
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(got[k]->blocks, totals[k].blocks) << "trial " << trial << " kind " << k;
    EXPECT_EQ(got[k]->bytes, totals[k].bytes) << "trial " << trial << " kind " << k;
  }
}

// A root area: words the test sets, scanned as a root range.
struct Roots {
  uint64_t words[16] = {};
  std::vector<RootRange> Range() const {
    return {{reinterpret_cast<uintptr_t>(words), reinterpret_cast<uintptr_t>(words + 16)}};
  }
};

// BlockHolding answers as a scan of every block with ScanBlock::Holds: blocks of size 0 by their start
// alone (one may start where another ends), nothing in the gaps or past the last block's end.
TEST(ReachabilityTest, BlockHoldingIsTheBlockAWordPointsInto) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<ScanBlock> blocks;
    uint64_t at = 0x1000 + rng() % 64;
    const size_t n = rng() % 12;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t size = rng() % 3 == 0 ? 0 : 1 + rng() % 40;
      blocks.push_back(ScanBlock::Of(at, size));
      at += size + (size == 0 ? 1 : rng() % 3 * 8);  // (0: the next block starts at this one's end)
    }
    for (uint64_t v = 0xFF8; v < at + 16; ++v) {
      size_t expect = blocks.size();
      for (size_t i = 0; i < blocks.size(); ++i) {
        const uint64_t size = blocks[i].size();
        if (v >= blocks[i].start && (v < blocks[i].start + size || (size == 0 && v == blocks[i].start))) expect = i;
      }
      ASSERT_EQ(BlockHolding(blocks.data(), blocks.size(), v), expect) << "round " << round << " v " << v;
    }
  }
}

TEST(ReachabilityTest, DroppedListIsOneDefiniteAndTheRestIndirect) {
  Heap h(4096);
  std::vector<uintptr_t> nodes;
  for (int i = 0; i < 10; ++i) nodes.push_back(h.Add(64 * i, 24));
  for (int i = 0; i + 1 < 10; ++i) h.Put(nodes[i], nodes[i + 1]);
  Roots roots;  // nothing points at the list
  ReachabilityResult r = h.Classify(roots.Range());
  EXPECT_EQ(r.definitely_lost.blocks, 1u);
  EXPECT_EQ(r.definitely_lost.bytes, 24u);
  EXPECT_EQ(r.indirectly_lost.blocks, 9u);
  EXPECT_EQ(r.indirectly_lost.bytes, 9u * 24);
  EXPECT_EQ(r.possibly_lost.blocks, 0u);
  EXPECT_EQ(r.still_reachable.blocks, 0u);
  EXPECT_EQ(h.Kind(nodes[0]), LeakKind::kDefinitelyLost);
  EXPECT_EQ(h.Clique(nodes[0]).blocks, 9u);
  EXPECT_EQ(h.Clique(nodes[0]).bytes, 9u * 24);
  for (int i = 1; i < 10; ++i) EXPECT_EQ(h.Kind(nodes[i]), LeakKind::kIndirectlyLost) << i;
  EXPECT_EQ(r.root_bytes_scanned, sizeof(roots.words));
  EXPECT_EQ(r.heap_bytes_scanned, 10u * 24);
}

// A list whose head is at the highest address: the earlier nodes lead cliques first and are then
// absorbed, with their indirect totals, into the head's clique.
TEST(ReachabilityTest, ListBuiltBackwardsMergesEarlierLeaders) {
  Heap h(4096);
  std::vector<uintptr_t> nodes;
  for (int i = 0; i < 5; ++i) nodes.push_back(h.Add(64 * (4 - i), 16 + 8 * i));
  for (int i = 0; i + 1 < 5; ++i) h.Put(nodes[i], nodes[i + 1]);
  Roots roots;
  ReachabilityResult r = h.Classify(roots.Range());
  EXPECT_EQ(r.definitely_lost.blocks, 1u);
  EXPECT_EQ(h.Kind(nodes[0]), LeakKind::kDefinitelyLost);
  EXPECT_EQ(h.Clique(nodes[0]).blocks, 4u);
  EXPECT_EQ(h.Clique(nodes[0]).bytes, 24u + 32 + 40 + 48);
  for (int i = 1; i < 5; ++i) {
    EXPECT_EQ(h.Kind(nodes[i]), LeakKind::kIndirectlyLost) << i;
    EXPECT_EQ(h.Clique(nodes[i]).bytes, 0u) << i;
  }
}

// The caller marks each block's origin in `pooled`; the classifier sorts the blocks but keeps the mark
// with its block (the exit scan counts the lost blocks hidden in pools by it).
TEST(ReachabilityTest, ClassifyingKeepsEachBlocksPooledMark) {
  Heap h(4096);
  std::vector<uintptr_t> starts;
  for (int i = 9; i >= 0; --i) starts.push_back(h.Add(64 * i, 16));  // in descending order
  for (ScanBlock& b : h.blocks()) b = ScanBlock::Of(b.start, b.size(), (b.start - h.base()) / 64 % 3 == 0);
  Roots roots;
  roots.words[0] = starts[0];
  h.Classify(roots.Range());
  ASSERT_TRUE(std::is_sorted(h.blocks().begin(), h.blocks().end(),
                             [](const ScanBlock& a, const ScanBlock& b) { return a.start < b.start; }));
  for (uintptr_t s : starts) EXPECT_EQ(h.At(s).pooled(), (s - h.base()) / 64 % 3 == 0) << s - h.base();
  EXPECT_EQ(h.Kind(starts[0]), LeakKind::kStillReachable);
  EXPECT_EQ(h.Kind(starts[1]), LeakKind::kDefinitelyLost);
}

// A leads a clique first and points at itself; B, the next leader, points at A alone: A joins B's
// clique. The last word of A's clique is the first of B's, and must count again.
TEST(ReachabilityTest, WordRepeatedAcrossCliquesStillJoins) {
  Heap h(4096);
  uintptr_t a = h.Add(0, 16), b = h.Add(256, 16);
  h.Put(a + 8, a);
  h.Put(b, a);
  Roots roots;
  ReachabilityResult r = h.Classify(roots.Range());
  EXPECT_EQ(h.Kind(b), LeakKind::kDefinitelyLost);
  EXPECT_EQ(h.Kind(a), LeakKind::kIndirectlyLost);
  EXPECT_EQ(h.Clique(b).blocks, 1u);
  EXPECT_EQ(r.definitely_lost.blocks, 1u);
}

// Words that repeat (the same pointer in consecutive fields, a structure's copies) mark as one does.
TEST(ReachabilityTest, RepeatedWordsMarkAsOne) {
  Heap h(4096);
  uintptr_t a = h.Add(0, 32), b = h.Add(256, 32), c = h.Add(512, 32);
  Roots roots;
  roots.words[0] = b + 8;  // interior: possibly lost
  roots.words[1] = b + 8;
  roots.words[2] = b;      // the same block's start right after: reachable
  roots.words[3] = c + 8;
  roots.words[4] = c + 8;
  h.Put(b, a);
  h.Put(b + 8, a);
  ReachabilityResult r = h.Classify(roots.Range());
  EXPECT_EQ(h.Kind(b), LeakKind::kStillReachable);
  EXPECT_EQ(h.Kind(a), LeakKind::kStillReachable);
  EXPECT_EQ(h.Kind(c), LeakKind::kPossiblyLost);
  EXPECT_EQ(r.possibly_lost.blocks, 1u);
}

TEST(ReachabilityTest, DroppedCycleIsOneDefiniteAndTheRestIndirect) {
  Heap h(4096);
  uintptr_t a = h.Add(0, 32), b = h.Add(128, 32), c = h.Add(256, 32), d = h.Add(512, 32);
  h.Put(a, b);
  h.Put(b + 8, c);
  h.Put(c + 16, d);
  h.Put(d + 24, a);
  Roots roots;
  ReachabilityResult r = h.Classify(roots.Range());
  EXPECT_EQ(r.definitely_lost.blocks, 1u);
  EXPECT_EQ(r.indirectly_lost.blocks, 3u);
  EXPECT_EQ(r.indirectly_lost.bytes, 96u);
  EXPECT_EQ(h.Kind(a), LeakKind::kDefinitelyLost);  // the lowest address leads
  EXPECT_EQ(h.Clique(a).bytes, 96u);
}

TEST(ReachabilityTest, GlobalRootKeepsChainReachable) {
  Heap h(4096);
  uintptr_t a = h.Add(0, 48), b = h.Add(64, 48), lost = h.Add(256, 8);
  h.Put(a + 40, b);  // A's last full word
  Roots roots;
  roots.words[3] = a;
  ReachabilityResult r = h.Classify(roots.Range());
  EXPECT_EQ(h.Kind(a), LeakKind::kStillReachable);
  EXPECT_EQ(h.Kind(b), LeakKind::kStillReachable);
  EXPECT_EQ(h.Kind(lost), LeakKind::kDefinitelyLost);
  EXPECT_EQ(r.still_reachable.blocks, 2u);
  EXPECT_EQ(r.still_reachable.bytes, 96u);
  EXPECT_EQ(r.definitely_lost.bytes, 8u);
}

// memcheck: an interior pointer makes a block possibly lost; the blocks that a possible block points
// to, even by their start, are possibly lost too (the source is not definite).
TEST(ReachabilityTest, InteriorPointerMakesPossibleAndSoAreItsTargets) {
  Heap h(4096);
  uintptr_t a = h.Add(0, 64), b = h.Add(128, 32), c = h.Add(256, 32);
  h.Put(a, b);      // a start pointer, from a possible block
  h.Put(b + 8, c + 8);
  Roots roots;
  roots.words[0] = a + 16;
  ReachabilityResult r = h.Classify(roots.Range());
  EXPECT_EQ(h.Kind(a), LeakKind::kPossiblyLost);
  EXPECT_EQ(h.Kind(b), LeakKind::kPossiblyLost);
  EXPECT_EQ(h.Kind(c), LeakKind::kPossiblyLost);
  EXPECT_EQ(r.possibly_lost.blocks, 3u);
  EXPECT_EQ(r.possibly_lost.bytes, 128u);
}

// A start pointer from a definite source upgrades a possible block, and what it points to by start.
TEST(ReachabilityTest, StartPointerUpgradesPossibleToReachable) {
  Heap h(4096);
  uintptr_t a = h.Add(0, 64), b = h.Add(128, 32), c = h.Add(256, 32);
  h.Put(a, b);
  h.Put(b, c + 8);  // interior: c stays possible
  Roots first, second;
  first.words[0] = a + 16;  // scanned first: a possible
  second.words[5] = a;      // then a definite start pointer
  std::vector<RootRange> roots = first.Range();
  roots.push_back(second.Range()[0]);
  h.Classify(roots);
  EXPECT_EQ(h.Kind(a), LeakKind::kStillReachable);
  EXPECT_EQ(h.Kind(b), LeakKind::kStillReachable);
  EXPECT_EQ(h.Kind(c), LeakKind::kPossiblyLost);
}

TEST(ReachabilityTest, ZeroSizeBlocksAreFoundByTheirStartOnly) {
  Heap h(4096);
  uintptr_t before = h.Add(0, 64);
  uintptr_t z1 = h.Add(64, 0);  // starts where `before` ends
  uintptr_t z2 = h.Add(128, 0);
  uintptr_t z3 = h.Add(256, 0);
  Roots roots;
  roots.words[0] = z1;
  roots.words[1] = z2 + 1;  // not into a size-0 block
  ReachabilityResult r = h.Classify(roots.Range());
  EXPECT_EQ(h.Kind(z1), LeakKind::kStillReachable);
  EXPECT_EQ(h.Kind(before), LeakKind::kDefinitelyLost);  // z1 == before's end: not into before
  EXPECT_EQ(h.Kind(z2), LeakKind::kDefinitelyLost);
  EXPECT_EQ(h.Kind(z3), LeakKind::kDefinitelyLost);
  EXPECT_EQ(r.definitely_lost.blocks, 3u);
  EXPECT_EQ(r.definitely_lost.bytes, 64u);
}

TEST(ReachabilityTest, PointerJustPastTheEndIsNotIntoTheBlock) {
  Heap h(4096);
  uintptr_t a = h.Add(0, 40), b = h.Add(256, 40);
  Roots roots;
  roots.words[0] = a + 40;
  roots.words[1] = b + 39;  // last byte: into
  h.Classify(roots.Range());
  EXPECT_EQ(h.Kind(a), LeakKind::kDefinitelyLost);
  EXPECT_EQ(h.Kind(b), LeakKind::kPossiblyLost);
}

TEST(ReachabilityTest, UnalignedWordsAndTrailingBytesAreIgnored) {
  Heap h(4096);
  uintptr_t holder = h.Add(0, 44);  // scanned up to byte 40: the word at 40 is not whole
  uintptr_t a = h.Add(128, 16), b = h.Add(256, 16);
  Roots roots;
  roots.words[0] = holder;
  h.Put(holder + 4, a);   // unaligned
  h.Put(holder + 36, b);  // unaligned, straddles the last whole word
  h.Classify(roots.Range());
  EXPECT_EQ(h.Kind(holder), LeakKind::kStillReachable);
  EXPECT_EQ(h.Kind(a), LeakKind::kDefinitelyLost);
  EXPECT_EQ(h.Kind(b), LeakKind::kDefinitelyLost);
  Heap h2(4096);
  uintptr_t holder2 = h2.Add(0, 44), c2 = h2.Add(384, 16), d2 = h2.Add(512, 16);
  h2.Put(holder2 + 32, c2);
  h2.Put(holder2 + 40, d2);  // only 4 of its bytes are inside the block
  Roots roots2;
  roots2.words[0] = holder2;
  h2.Classify(roots2.Range());
  EXPECT_EQ(h2.Kind(c2), LeakKind::kStillReachable);
  EXPECT_EQ(h2.Kind(d2), LeakKind::kDefinitelyLost);
}

TEST(ReachabilityTest, RootRangeAtAnUnalignedStartIsScannedFromTheNextWord) {
  Heap h(4096);
  uintptr_t a = h.Add(0, 16), b = h.Add(64, 16);
  Roots roots;
  roots.words[0] = a;
  roots.words[1] = b;
  uintptr_t begin = reinterpret_cast<uintptr_t>(roots.words) + 1;
  h.Classify({{begin, begin + 15}});  // whole words in it: words[1] only
  EXPECT_EQ(h.Kind(a), LeakKind::kDefinitelyLost);
  EXPECT_EQ(h.Kind(b), LeakKind::kStillReachable);
}

// Reads that stop short: the rest of that page is skipped, the next page is read again.
class FaultyReader : public MemoryReader {
 public:
  FaultyReader(uintptr_t bad_begin, uintptr_t bad_end) : bad_begin_(bad_begin), bad_end_(bad_end) {}
  size_t Read(uintptr_t addr, void* buf, size_t n) override {
    ++calls;
    size_t ok = n;
    if (addr < bad_end_ && addr + n > bad_begin_) ok = addr >= bad_begin_ ? 0 : bad_begin_ - addr;
    memcpy(buf, reinterpret_cast<const void*>(addr), ok);
    return ok;
  }
  int calls = 0;

 private:
  uintptr_t bad_begin_, bad_end_;
};

TEST(ReachabilityTest, ShortReadsSkipToTheNextPage) {
  Heap h(4096);
  uintptr_t a = h.Add(0, 16), b = h.Add(64, 16), c = h.Add(128, 16);
  // A root area of three pages; the middle one "faults".
  alignas(4096) static uint64_t area[3 * 512];
  memset(area, 0, sizeof(area));
  area[10] = a;
  area[512 + 7] = b;
  area[1024 + 511] = c;
  uintptr_t base = reinterpret_cast<uintptr_t>(area);
  FaultyReader reader(base + 4096 + 40, base + 4096 + 48);  // b's word and the rest of that page lost
  ReachabilityResult r = h.Classify({{base, base + sizeof(area)}}, &reader);
  EXPECT_EQ(h.Kind(a), LeakKind::kStillReachable);
  EXPECT_EQ(h.Kind(b), LeakKind::kDefinitelyLost);
  EXPECT_EQ(h.Kind(c), LeakKind::kStillReachable);
  // The read stops at byte 40 of the middle page; the rest of that page is skipped.
  EXPECT_EQ(r.root_bytes_unreadable, 4096u - 40);
  EXPECT_EQ(r.root_bytes_scanned, sizeof(area) - (4096 - 40));
}

TEST(ReachabilityTest, ABlockThatCannotBeReadPointsNowhere) {
  Heap h(4096);
  uintptr_t a = h.Add(0, 64), b = h.Add(128, 16);
  h.Put(a + 8, b);
  Roots roots;
  roots.words[0] = a;
  FaultyReader heap_reader(a, a + 64);
  ReachabilityResult r = h.Classify(roots.Range(), nullptr, &heap_reader);
  EXPECT_EQ(h.Kind(a), LeakKind::kStillReachable);
  EXPECT_EQ(h.Kind(b), LeakKind::kDefinitelyLost);
  EXPECT_EQ(r.heap_bytes_unreadable, 64u);
  EXPECT_EQ(r.heap_bytes_scanned, 16u);  // b, as a clique leader
}

// A reader that gives a large range as two parts read in place (as one that knows which pages were
// never touched does) and would read the rest as well through Read, which it counts.
class RunsReader : public MemoryReader {
 public:
  RunsReader(uintptr_t block, Range first, Range second) : block_(block), runs_{first, second} {}
  size_t Read(uintptr_t addr, void* buf, size_t n) override {
    large_reads += n >= kRunsMin;
    memcpy(buf, reinterpret_cast<const void*>(addr), n);
    return n;
  }
  int InPlaceRuns(uintptr_t addr, size_t n, Range* runs, int cap) override {
    if (addr != block_ || n < kRunsMin || cap < 2) return -1;
    runs[0] = runs_[0];
    runs[1] = runs_[1];
    return 2;
  }
  int large_reads = 0;

 private:
  uintptr_t block_;
  Range runs_[2];
};

// A large block the reader gives in parts is scanned in those parts alone, in place: a pointer in the
// rest (which such a reader reads as zeros) keeps nothing, and the block counts as scanned whole.
TEST(ReachabilityTest, ALargeBlockGivenInPartsIsScannedInThoseParts) {
  constexpr size_t kLarge = 64 << 10;
  Heap h(kLarge + 4096);
  const uintptr_t big = h.Add(0, kLarge);
  const uintptr_t b = h.Add(kLarge + 64, 16), c = h.Add(kLarge + 128, 16), d = h.Add(kLarge + 192, 16);
  h.Put(big + 4096 + 8, b);
  h.Put(big + 20000, c);  // outside both parts
  h.Put(big + 40960 + 4088, d);
  RunsReader reader(big, MemoryReader::Range{big + 4096, 4096}, MemoryReader::Range{big + 40960, 4096});
  Roots roots;
  roots.words[0] = big;
  ReachabilityResult r = h.Classify(roots.Range(), nullptr, &reader);
  EXPECT_EQ(h.Kind(b), LeakKind::kStillReachable);
  EXPECT_EQ(h.Kind(d), LeakKind::kStillReachable);
  EXPECT_EQ(h.Kind(c), LeakKind::kDefinitelyLost) << "a pointer outside the parts was read";
  EXPECT_EQ(reader.large_reads, 0);
  EXPECT_EQ(r.heap_bytes_scanned, kLarge + 3 * 16) << "the large block whole, then b, d and (a leader) c";
}

TEST(ReachabilityTest, NoBlocksAndNoRoots) {
  Heap h(64);
  ReachabilityResult r = h.Classify({});
  EXPECT_EQ(r.definitely_lost.blocks + r.still_reachable.blocks, 0u);
}

class FailingScratch : public ScratchMemory {
 public:
  explicit FailingScratch(int ok_maps) : ok_maps_(ok_maps) {}
  void* Map(size_t bytes) override {
    if (ok_maps_-- <= 0) return nullptr;
    ++live;
    return real_.Map(bytes);
  }
  void Unmap(void* p, size_t bytes) override {
    if (p == nullptr) return;
    --live;
    real_.Unmap(p, bytes);
  }
  int live = 0;

 private:
  int ok_maps_;
  MmapScratchMemory real_;
};

TEST(ReachabilityTest, OutOfScratchMemoryFailsCleanly) {
  Heap h(4096);
  h.Add(0, 16);
  for (int ok = 0; ok < 5; ++ok) {
    FailingScratch scratch(ok);
    DirectMemoryReader reader;
    ReachabilityResult r;
    r.definitely_lost.blocks = 77;
    EXPECT_FALSE(ClassifyReachability(h.blocks().data(), h.blocks().size(), nullptr, 0, reader,
                                      reader, scratch, &r));
    EXPECT_EQ(r.definitely_lost.blocks, 0u);
    EXPECT_EQ(scratch.live, 0);
  }
  FailingScratch enough(5);
  DirectMemoryReader reader;
  ReachabilityResult r;
  EXPECT_TRUE(ClassifyReachability(h.blocks().data(), h.blocks().size(), nullptr, 0, reader, reader,
                                   enough, &r));
  EXPECT_EQ(r.definitely_lost.blocks, 1u);
  EXPECT_EQ(enough.live, 0);
}

TEST(ReachabilityTest, AgreesWithAReferenceOnRandomHeaps) {
  std::mt19937_64 rng(12345);
  int kinds_seen[4] = {};
  for (int trial = 0; trial < 300; ++trial) {
    Heap h(1 << 16);
    size_t nblocks = 1 + rng() % 120;
    size_t offset = 0;
    for (size_t i = 0; i < nblocks; ++i) {
      offset += 8 * (rng() % 4);                               // gaps, sometimes none
      if (rng() % 8 == 0) offset += 4;                         // some unaligned starts
      size_t size = rng() % 10 == 0 ? 0 : 1 + rng() % 120;     // some size 0
      if (offset + size + 16 >= (1 << 16)) break;
      h.Add(offset, size);
      offset += size == 0 ? 8 : size;  // no two blocks start at one address
    }
    std::vector<ScanBlock>& blocks = h.blocks();
    if (rng() % 2) std::shuffle(blocks.begin(), blocks.end(), rng);
    for (ScanBlock& b : blocks) b = ScanBlock::Of(b.start, b.size(), rng() % 2 == 0);
    std::vector<uint64_t> root_words(1 + rng() % 8);
    double density = 0.02 + 0.3 * double(rng() % 100) / 100;
    auto random_word = [&]() -> uint64_t {
      const ScanBlock& t = blocks[rng() % blocks.size()];
      double x = double(rng() % 1000) / 1000;
      if (x > density) return rng() % 3 == 0 ? rng() : rng() % 4096;
      switch (rng() % 4) {
        case 0:
          return t.start + t.size();  // just past the end
        case 1:
          return t.start + (t.size() ? rng() % t.size() : 0);  // interior (or start)
        default:
          return t.start;
      }
    };
    for (auto& w : root_words) w = random_word();
    for (const ScanBlock& b : std::vector<ScanBlock>(blocks)) {
      for (uintptr_t a = (b.start + 7) & ~uintptr_t{7}; a + 8 <= b.start + b.size(); a += 8) {
        h.Put(a, random_word());
      }
      if (b.size() >= 12 && rng() % 4 == 0) h.Put(b.start + 4, random_word());  // an unaligned word
    }
    std::vector<RootRange> roots = {{reinterpret_cast<uintptr_t>(root_words.data()),
                                     reinterpret_cast<uintptr_t>(root_words.data() + root_words.size())}};
    Reference ref(blocks, roots);
    ReachabilityResult r = h.Classify(roots);
    ASSERT_EQ(blocks.size(), ref.blocks.size());
    LeakTotal totals[4] = {}, pooled_lost = {};
    for (size_t i = 0; i < blocks.size(); ++i) {
      ASSERT_EQ(blocks[i].start, ref.blocks[i].start) << "trial " << trial;
      if (blocks[i].pooled() && (ref.kind[i] == LeakKind::kDefinitelyLost || ref.kind[i] == LeakKind::kIndirectlyLost)) {
        pooled_lost.blocks++;
        pooled_lost.bytes += blocks[i].size();
      }
      ASSERT_EQ(blocks[i].kind(), ref.kind[i]) << "trial " << trial << " block " << i;
      ASSERT_EQ(h.CliqueAt(i).blocks, ref.ind_blocks[i]) << "trial " << trial << " block " << i;
      ASSERT_EQ(h.CliqueAt(i).bytes, ref.ind_bytes[i]) << "trial " << trial << " block " << i;
      LeakTotal& t = totals[int(ref.kind[i])];
      t.blocks++;
      t.bytes += blocks[i].size();
      kinds_seen[int(ref.kind[i])]++;
    }
    EXPECT_EQ(r.still_reachable.blocks, totals[0].blocks);
    EXPECT_EQ(r.possibly_lost.bytes, totals[1].bytes);
    EXPECT_EQ(r.indirectly_lost.bytes, totals[2].bytes);
    EXPECT_EQ(r.definitely_lost.blocks, totals[3].blocks);
    EXPECT_EQ(r.pooled_lost.blocks, pooled_lost.blocks) << "trial " << trial;
    EXPECT_EQ(r.pooled_lost.bytes, pooled_lost.bytes) << "trial " << trial;
  }
  // The random heaps exercised every outcome.
  for (int k = 0; k < 4; ++k) EXPECT_GT(kinds_seen[k], 100) << k;
}

// Words read in address order (poolscope's metadata, a structure pointing at what was allocated after
// it) are resolved next to the block found last, without a search: starts, interiors, ends and gaps,
// size-0 blocks among them, agree with the reference.
TEST(ReachabilityTest, AgreesWithAReferenceOnWordsInAddressOrder) {
  std::mt19937_64 rng(4242);
  for (int trial = 0; trial < 200; ++trial) {
    Heap h(1 << 16);
    size_t offset = 0;
    for (size_t i = 0, n = 2 + rng() % 60; i < n; ++i) {
      offset += 8 * (rng() % 3);
      const size_t size = rng() % 6 == 0 ? 0 : 8 + 8 * (rng() % 8);
      if (offset + size + 16 >= (1 << 16)) break;
      h.Add(offset, size);
      offset += size == 0 ? 8 : size;
    }
    std::vector<ScanBlock>& blocks = h.blocks();
    // In address order, each block's start, a word inside it, its end, and sometimes a skip ahead.
    auto ascending = [&](size_t from) {
      std::vector<uint64_t> words;
      for (size_t i = from; i < blocks.size(); i += 1 + (rng() % 4 == 0 ? rng() % 3 : 0)) {
        const ScanBlock& b = blocks[i];
        if (rng() % 3 != 0) words.push_back(b.start);
        if (b.size() > 0 && rng() % 2) words.push_back(b.start + 8 * (rng() % (b.size() / 8)));
        if (rng() % 3 == 0) words.push_back(b.start + b.size());
      }
      return words;
    };
    std::vector<uint64_t> root_words = ascending(rng() % blocks.size());
    if (root_words.empty()) root_words.push_back(0);
    for (const ScanBlock& b : std::vector<ScanBlock>(blocks)) {
      if (b.size() < 16 || rng() % 2) continue;
      // A block's words point at blocks after it, in order.
      std::vector<uint64_t> words = ascending(rng() % blocks.size());
      for (size_t k = 0; k < words.size() && 8 * (k + 1) <= b.size(); ++k) h.Put(b.start + 8 * k, words[k]);
    }
    std::vector<RootRange> roots = {{reinterpret_cast<uintptr_t>(root_words.data()),
                                     reinterpret_cast<uintptr_t>(root_words.data() + root_words.size())}};
    Reference ref(blocks, roots);
    h.Classify(roots);
    for (size_t i = 0; i < blocks.size(); ++i) {
      ASSERT_EQ(blocks[i].kind(), ref.kind[i]) << "trial " << trial << " block " << i;
      ASSERT_EQ(h.CliqueAt(i).blocks, ref.ind_blocks[i]) << "trial " << trial << " block " << i;
    }
  }
}

// Blocks known reachable beforehand (pooled(), each with a root pointer at its start), scanned as
// sources and never looked up, leave every other block the kind the reference gives it over all of
// them, and count as still reachable.
TEST(ReachabilityTest, ReachedBlocksBesideTheOthersAgreeWithAReference) {
  std::mt19937_64 rng(2468);
  int reached_only = 0;  // trials where a block is reachable through reached blocks alone
  for (int trial = 0; trial < 200; ++trial) {
    Heap h(1 << 16);
    AddRandomBlocks(h, rng, 2 + rng() % 100, 8);
    std::vector<ScanBlock>& blocks = h.blocks();
    std::vector<uint64_t> root_words;
    for (ScanBlock& b : blocks) {
      if (rng() % 3 != 0) continue;
      b = ScanBlock::Of(b.start, b.size(), /*pooled=*/true);
      root_words.push_back(b.start);
    }
    for (int k = 0, n = static_cast<int>(rng() % 3); k < n; ++k) root_words.push_back(RandomWord(blocks, rng));
    if (root_words.empty()) root_words.push_back(0);
    FillRandomly(h, rng);
    std::vector<RootRange> roots = {{reinterpret_cast<uintptr_t>(root_words.data()),
                                     reinterpret_cast<uintptr_t>(root_words.data() + root_words.size())}};
    Reference ref(blocks, roots);
    std::vector<ScanBlock> sorted = ref.blocks, others;
    for (const ScanBlock& b : sorted) {
      if (!b.pooled()) others.push_back(b);
    }
    DirectMemoryReader direct;
    MmapScratchMemory scratch;
    ReachabilityResult r;
    ASSERT_TRUE(ClassifyBesideReached(others.data(), others.size(), sorted.data(), sorted.size(), roots.data(),
                                      roots.size(), direct, direct, scratch, &r));
    LeakTotal totals[4] = {};
    size_t k = 0;
    for (size_t i = 0; i < sorted.size(); ++i) {
      const LeakKind want = ref.kind[i];
      totals[int(want)].blocks++;
      totals[int(want)].bytes += sorted[i].size();
      if (sorted[i].pooled()) {
        ASSERT_EQ(want, LeakKind::kStillReachable);
        continue;
      }
      ASSERT_EQ(others[k].start, sorted[i].start);
      ASSERT_EQ(others[k].kind(), want) << "trial " << trial << " block " << i;
      ++k;
      bool from_roots = false;
      for (const Reference::Edge& e : ref.root_out) from_roots = from_roots || e.to == i;
      if (want != LeakKind::kDefinitelyLost && want != LeakKind::kIndirectlyLost && !from_roots) ++reached_only;
    }
    EXPECT_EQ(r.still_reachable.blocks, totals[0].blocks) << "trial " << trial;
    EXPECT_EQ(r.still_reachable.bytes, totals[0].bytes) << "trial " << trial;
    EXPECT_EQ(r.possibly_lost.blocks, totals[1].blocks) << "trial " << trial;
    EXPECT_EQ(r.indirectly_lost.bytes, totals[2].bytes) << "trial " << trial;
    EXPECT_EQ(r.definitely_lost.blocks, totals[3].blocks) << "trial " << trial;
  }
  EXPECT_GT(reached_only, 100);
}

// Two views whose roots nest, classified by one marking: the classes over the whole roots are the
// reference's over them, and the blocks the first roots mark are those the reference does not call
// lost (definitely or indirectly) over the first roots alone.
TEST(ReachabilityTest, FirstRootsMarkWhatTheyAloneReach) {
  std::mt19937_64 rng(97531);
  int differ = 0;  // trials where a block the whole roots keep is lost to the first roots alone
  for (int trial = 0; trial < 200; ++trial) {
    Heap h(1 << 16);
    AddRandomBlocks(h, rng, 1 + rng() % 100, 1);
    std::vector<ScanBlock>& blocks = h.blocks();
    auto random_word = [&] { return RandomWord(blocks, rng); };
    FillRandomly(h, rng);
    // The whole roots' words; the first roots are some of them.
    std::vector<uint64_t> words(1 + rng() % 8), first_words;
    for (uint64_t& w : words) {
      w = random_word();
      if (rng() % 2 == 0) first_words.push_back(w);
    }
    const std::vector<RootRange> roots = {{reinterpret_cast<uintptr_t>(words.data()),
                                           reinterpret_cast<uintptr_t>(words.data() + words.size())}};
    const std::vector<RootRange> first = {{reinterpret_cast<uintptr_t>(first_words.data()),
                                           reinterpret_cast<uintptr_t>(first_words.data() + first_words.size())}};
    const Reference whole(blocks, roots), alone(blocks, first);
    DirectMemoryReader direct;
    MmapScratchMemory scratch;
    BlockIndex index(scratch);
    ASSERT_TRUE(index.Build(blocks.data(), blocks.size()));
    std::vector<uint8_t> reached(blocks.size(), 7);
    ReachabilityResult r;
    ASSERT_TRUE(ClassifyIndexedAfter(index, first.data(), first.size(), direct, reached.data(), roots.data(),
                                     roots.size(), direct, direct, scratch, &r));
    LeakTotal totals[4] = {};
    for (size_t i = 0; i < blocks.size(); ++i) {
      ASSERT_EQ(blocks[i].start, whole.blocks[i].start);
      ASSERT_EQ(blocks[i].kind(), whole.kind[i]) << "trial " << trial << " block " << i;
      ASSERT_EQ(reached[i], Lost(alone.kind[i]) ? 0 : 1) << "trial " << trial << " block " << i;
      differ += Lost(alone.kind[i]) && !Lost(whole.kind[i]);
      totals[int(whole.kind[i])].blocks++;
      totals[int(whole.kind[i])].bytes += blocks[i].size();
    }
    ExpectClasses(r, totals, trial);
    // The first roots' words are not counted as the roots': the whole roots' alone.
    EXPECT_EQ(r.root_bytes_scanned, words.size() * 8) << "trial " << trial;
  }
  EXPECT_GT(differ, 50);
}

// The detector's two views in one marking: LeakSanitizer's over the first roots and a few extra words,
// memcheck's over the roots with every pooled block reachable. Where the extra words change no block
// but pooled ones, both outputs are the reference's; where they would, the call says so.
TEST(ReachabilityTest, BesideMarkedAgreesWithTwoReferences) {
  std::mt19937_64 rng(86420);
  int nested = 0, not_nested = 0, differ = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Heap h(1 << 16);
    AddRandomBlocks(h, rng, 1 + rng() % 100, 1);
    std::vector<ScanBlock>& blocks = h.blocks();
    for (ScanBlock& b : blocks) b = ScanBlock::Of(b.start, b.size(), rng() % 3 == 0);
    auto random_word = [&] { return RandomWord(blocks, rng); };
    FillRandomly(h, rng);
    std::vector<uint64_t> words(1 + rng() % 8), first_words, extra(rng() % 3);
    for (uint64_t& w : words) {
      w = random_word();
      if (rng() % 2 == 0) first_words.push_back(w);
    }
    for (uint64_t& w : extra) w = random_word();
    // memcheck's roots: the words and a pointer at each pooled block's start (the pool list).
    std::vector<uint64_t> memcheck_words = words, lsan_words = first_words;
    for (const ScanBlock& b : blocks) {
      if (b.pooled()) memcheck_words.push_back(b.start);
    }
    lsan_words.insert(lsan_words.end(), extra.begin(), extra.end());
    auto range_of = [](const std::vector<uint64_t>& v) {
      return std::vector<RootRange>{{reinterpret_cast<uintptr_t>(v.data()), reinterpret_cast<uintptr_t>(v.data() + v.size())}};
    };
    const Reference memcheck(blocks, range_of(memcheck_words)), lsan(blocks, range_of(lsan_words)),
        first_alone(blocks, range_of(first_words));
    // Nested: each extra word points into no block, a pooled one, one the first roots make reachable,
    // or inside (not at the start of) one they make possibly lost.
    bool want_nested = true;
    for (uint64_t w : extra) {
      const long i = first_alone.Into(w);
      if (i < 0 || first_alone.blocks[i].pooled()) continue;
      const LeakKind k = first_alone.kind[i];
      want_nested = want_nested && (k == LeakKind::kStillReachable ||
                                    (k == LeakKind::kPossiblyLost && w != first_alone.blocks[i].start));
    }
    const std::vector<RootRange> first = range_of(first_words), roots = range_of(words);
    DirectMemoryReader direct;
    MmapScratchMemory scratch;
    std::vector<uint8_t> reached(blocks.size(), 7);
    bool got_nested = !want_nested;
    ReachabilityResult r;
    ASSERT_TRUE(ClassifyBesideMarked(blocks.data(), blocks.size(), first.data(), first.size(), direct, extra.data(),
                                     extra.size(), reached.data(), &got_nested, roots.data(), roots.size(), direct,
                                     direct, scratch, &r));
    ASSERT_EQ(got_nested, want_nested) << "trial " << trial;
    if (!want_nested) {
      ++not_nested;
      continue;
    }
    ++nested;
    LeakTotal totals[4] = {};
    for (size_t i = 0; i < blocks.size(); ++i) {
      ASSERT_EQ(blocks[i].start, memcheck.blocks[i].start);
      ASSERT_EQ(blocks[i].kind(), memcheck.kind[i]) << "trial " << trial << " block " << i;
      ASSERT_EQ(reached[i], Lost(lsan.kind[i]) ? 0 : 1) << "trial " << trial << " block " << i;
      differ += Lost(lsan.kind[i]) != Lost(memcheck.kind[i]);
      totals[int(memcheck.kind[i])].blocks++;
      totals[int(memcheck.kind[i])].bytes += blocks[i].size();
    }
    ExpectClasses(r, totals, trial);
  }
  EXPECT_GT(nested, 100);
  EXPECT_GT(not_nested, 20);
  EXPECT_GT(differ, 50);
}

// Blocks spread over distant regions and pages (the lookup's index) agree with the reference too.
TEST(ReachabilityTest, AgreesWithAReferenceAcrossRegions) {
  std::mt19937_64 rng(777);
  for (int trial = 0; trial < 20; ++trial) {
    Heap h(size_t{8} << 20);
    size_t offset = 0;
    while (true) {
      offset += rng() % 3 == 0 ? (rng() % (1 << 18)) & ~size_t{7} : 8 * (rng() % 4);
      size_t size = rng() % 50 == 0 ? 8192 + rng() % 20000 : rng() % 100;
      if (offset + size >= (size_t{8} << 20)) break;
      h.Add(offset, size);
      offset += size == 0 ? 8 : size;
      if (h.blocks().size() > 150) break;
    }
    std::vector<ScanBlock>& blocks = h.blocks();
    std::vector<uint64_t> root_words(4);
    auto random_word = [&]() -> uint64_t {
      const ScanBlock& t = blocks[rng() % blocks.size()];
      if (rng() % 10 < 7) return rng() % 7 == 0 ? t.start + rng() % 100000 : 0;
      return rng() % 2 ? t.start : t.start + (t.size() ? rng() % t.size() : 0);
    };
    for (auto& w : root_words) w = random_word();
    for (const ScanBlock& b : std::vector<ScanBlock>(blocks)) {
      size_t words = b.size() / 8;
      for (int k = 0; k < 6 && words > 0; ++k) h.Put(b.start + 8 * (rng() % words), random_word());
    }
    std::vector<RootRange> roots = {{reinterpret_cast<uintptr_t>(root_words.data()),
                                     reinterpret_cast<uintptr_t>(root_words.data() + 4)}};
    Reference ref(blocks, roots);
    h.Classify(roots);
    for (size_t i = 0; i < blocks.size(); ++i) {
      ASSERT_EQ(blocks[i].kind(), ref.kind[i]) << "trial " << trial << " block " << i;
      ASSERT_EQ(h.CliqueAt(i).bytes, ref.ind_bytes[i]) << "trial " << trial << " block " << i;
    }
  }
}

}  // namespace
}  // namespace track
}  // namespace poolscope
