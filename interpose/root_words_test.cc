// File: interpose/root_words_test.cc
//
// The exit scan's roots read once for every view (root_words.h): each view gets exactly the words of
// its own ranges that fall in a block's span, every byte of the union is read once, a read cut short
// skips to the next page as the classifier's does, and classifying over the words gives the classes
// classifying over the ranges gives.
#include "interpose/root_words.h"

#include <sys/mman.h>

#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace poolscope {
namespace scan {
namespace {

using track::RootRange;
using track::ScanBlock;

struct Words {
  std::vector<uint64_t> v;
  bool Push(uint64_t x) {
    v.push_back(x);
    return true;
  }
};

// Counts the bytes it is asked for at each address, reads in place nothing, and fails reads that
// reach [bad_begin, bad_end) (to a page's end, as the kernel fails them).
class CountingReader : public track::MemoryReader {
 public:
  size_t Read(uintptr_t addr, void* buf, size_t n) override {
    size_t ok = n;
    if (addr < bad_end && addr + n > bad_begin) ok = addr < bad_begin ? bad_begin - addr : 0;
    memcpy(buf, reinterpret_cast<const void*>(addr), ok);
    for (size_t i = 0; i < ok; i += 8) ++reads[addr + i];
    return ok;
  }
  uintptr_t bad_begin = 0, bad_end = 0;
  std::map<uintptr_t, int> reads;
};

// Pages of words, some of which point into made-up blocks' spans.
class RootWordsTest : public ::testing::Test {
 protected:
  static constexpr size_t kPages = 4;
  void SetUp() override {
    mem_ = static_cast<uint64_t*>(mmap(nullptr, kPages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(mem_, MAP_FAILED);
    // Word i holds, in turn: a pointer into span 0, into span 1, between them, above both.
    for (size_t i = 0; i < kPages * 512; ++i) {
      switch (i % 4) {
        case 0: mem_[i] = 0x10000 + 8 * (i % 64); break;
        case 1: mem_[i] = 0x50000 + i; break;
        case 2: mem_[i] = 0x30000 + i; break;
        default: mem_[i] = 0x90000 + i; break;
      }
    }
  }
  void TearDown() override { munmap(mem_, kPages * 4096); }
  uintptr_t at(size_t word) const { return reinterpret_cast<uintptr_t>(mem_ + word); }

  // What a view should get: the words of its ranges (each address once) that lie in a span, in address
  // order, skipping [bad_begin, bad_end) rounded out to pages from where reading fails.
  std::vector<uint64_t> Expected(const std::vector<RootRange>& ranges, const std::vector<RootRange>& spans) const {
    std::set<uintptr_t> addrs;
    for (const RootRange& r : ranges) {
      for (uintptr_t a = (r.begin + 7) & ~uintptr_t{7}; a + 8 <= r.end; a += 8) addrs.insert(a);
    }
    std::vector<uint64_t> out;
    for (uintptr_t a : addrs) {
      const uint64_t x = *reinterpret_cast<const uint64_t*>(a);
      for (const RootRange& s : spans) {
        if (x >= s.begin && x < s.end) out.push_back(x);
      }
    }
    return out;
  }

  uint64_t* mem_ = nullptr;
  track::MmapScratchMemory scratch_;
};

TEST_F(RootWordsTest, EachViewGetsTheWordsOfItsOwnRangesThatFallInASpan) {
  const std::vector<RootRange> spans = {{0x10000, 0x10200}, {0x50000, 0x60000}};
  // Overlapping views, a range inside another, unaligned ends, a range of one view overlapping
  // another range of the same view, an empty range.
  const std::vector<std::vector<RootRange>> ranges = {
      {{at(0), at(1024)}, {at(1500) + 3, at(2000) + 5}},
      {{at(512), at(1600)}, {at(600), at(700)}},
      {{at(100), at(101)}, {at(50), at(50)}},
      {{at(1999), at(2048)}, {at(0), at(2)}},
  };
  RootView views[4];
  for (int v = 0; v < 4; ++v) views[v] = RootView{ranges[v].data(), ranges[v].size()};
  Words out[4];
  Words* outs[4] = {&out[0], &out[1], &out[2], &out[3]};
  CountingReader reader;
  RootWordsRead read;
  ASSERT_TRUE(CollectRootWords(views, 4, reader, spans.data(), spans.size(), scratch_, outs, &read));
  for (int v = 0; v < 4; ++v) {
    EXPECT_EQ(out[v].v, Expected(ranges[v], spans)) << "view " << v;
  }
  // Every word of the union read once, none twice, none outside it.
  std::set<uintptr_t> all;
  for (const auto& rs : ranges) {
    for (const RootRange& r : rs) {
      for (uintptr_t a = (r.begin + 7) & ~uintptr_t{7}; a + 8 <= r.end; a += 8) all.insert(a);
    }
  }
  EXPECT_EQ(reader.reads.size(), all.size());
  for (const auto& [addr, times] : reader.reads) {
    EXPECT_EQ(times, 1) << std::hex << addr;
    EXPECT_EQ(all.count(addr), 1u) << std::hex << addr;
  }
  EXPECT_EQ(read.bytes_read, 8 * all.size());
  EXPECT_EQ(read.bytes_unreadable, 0u);
}

TEST_F(RootWordsTest, SparseWordsInSpansAreFoundAtEveryPlace) {
  // Words far from every span but a few: one in a span, or between the spans (inside their whole
  // extent), at each place of a group of four and in a range's last few words, ranges of every length
  // from 1 to 13 words starting at every word of a group.
  for (size_t i = 0; i < kPages * 512; ++i) mem_[i] = 0x900000 + 8 * i;
  const std::vector<RootRange> spans = {{0x10000, 0x10200}, {0x50000, 0x60000}};
  for (size_t i : {3u, 8u, 13u, 18u, 40u, 41u, 47u, 62u, 63u}) mem_[i] = 0x50000 + 8 * i;
  for (size_t i : {5u, 22u, 44u, 60u}) mem_[i] = 0x30000 + 8 * i;
  mem_[29] = 0x10008;
  for (size_t first = 0; first < 8; ++first) {
    for (size_t len = 1; len <= 13; ++len) {
      for (size_t start = first; start + len <= 64; start += 16) {
        const std::vector<RootRange> ranges = {{at(start), at(start + len)}};
        const RootView view{ranges.data(), ranges.size()};
        Words out;
        Words* outs[1] = {&out};
        CountingReader reader;
        RootWordsRead read;
        ASSERT_TRUE(CollectRootWords(&view, 1, reader, spans.data(), spans.size(), scratch_, outs, &read));
        EXPECT_EQ(out.v, Expected(ranges, spans)) << "words " << start << " to " << start + len;
      }
    }
  }
}

TEST_F(RootWordsTest, AReadCutShortSkipsToTheNextPage) {
  const std::vector<RootRange> spans = {{0x10000, 0x10200}, {0x50000, 0x60000}};
  const std::vector<RootRange> a = {{at(0), at(kPages * 512)}}, b = {{at(300), at(900)}};
  RootView views[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
  Words out[2];
  Words* outs[2] = {&out[0], &out[1]};
  CountingReader reader;
  reader.bad_begin = at(700);  // inside the second page, to its end
  reader.bad_end = at(1024);
  RootWordsRead read;
  ASSERT_TRUE(CollectRootWords(views, 2, reader, spans.data(), spans.size(), scratch_, outs, &read));
  // Unreadable from word 700 to the end of its page (word 1024), counted once for the union.
  std::vector<RootRange> a_read = {{at(0), at(700)}, {at(1024), at(kPages * 512)}}, b_read = {{at(300), at(700)}};
  EXPECT_EQ(out[0].v, Expected(a_read, spans));
  EXPECT_EQ(out[1].v, Expected(b_read, spans));
  EXPECT_EQ(read.bytes_unreadable, 8u * (1024 - 700));
}

TEST_F(RootWordsTest, NoSpanNoWords) {
  const std::vector<RootRange> a = {{at(0), at(512)}};
  RootView view{a.data(), a.size()};
  Words out;
  Words* outs[1] = {&out};
  CountingReader reader;
  RootWordsRead read;
  ASSERT_TRUE(CollectRootWords(&view, 1, reader, nullptr, 0, scratch_, outs, &read));
  EXPECT_TRUE(out.v.empty());
}

TEST(BlockSpansTest, RunsOfBlocksCloserThanTheGapAreOneSpan) {
  const ScanBlock blocks[] = {ScanBlock::Of(0x1000, 16), ScanBlock::Of(0x1100, 0x800), ScanBlock::Of(0x1200, 8),
                              ScanBlock::Of(0x9000, 0), ScanBlock::Of(0x20000, 32)};
  RootRange spans[5];
  ASSERT_EQ(BlockSpans(blocks, 5, 0x1000, spans), 3u);
  EXPECT_EQ(spans[0].begin, 0x1000u);
  EXPECT_EQ(spans[0].end, 0x1900u);  // the block inside another does not shorten it
  EXPECT_EQ(spans[1].begin, 0x9000u);
  EXPECT_EQ(spans[1].end, 0x9001u);  // a size-0 block spans its start
  EXPECT_EQ(spans[2].begin, 0x20000u);
  EXPECT_EQ(spans[2].end, 0x20020u);
}

// Classifying over the collected words gives each block the class classifying over the ranges gives.
TEST(RootWordsClassifyTest, WordsClassifyAsTheirRanges) {
  constexpr size_t kBlocks = 64, kBlockWords = 8;
  std::vector<uint64_t> heap(kBlocks * kBlockWords, 0), roots(4096 / 8 * 3, 0);
  std::vector<ScanBlock> blocks;
  for (size_t i = 0; i < kBlocks; ++i) blocks.push_back(ScanBlock::Of(reinterpret_cast<uintptr_t>(&heap[i * kBlockWords]), 8 * kBlockWords));
  // A chain from a root through blocks 0..9, an interior pointer to 20, pointers between blocks
  // 30..33, roots of view 1 alone reaching 40, and words that point nowhere.
  for (size_t i = 0; i < 9; ++i) heap[i * kBlockWords] = blocks[i + 1].start;
  heap[30 * kBlockWords] = blocks[31].start;
  heap[31 * kBlockWords + 1] = blocks[32].start + 8;
  roots[5] = blocks[0].start;
  roots[7] = blocks[20].start + 16;
  roots[9] = 12345;
  roots[600] = blocks[40].start;
  roots[700] = blocks[50].start;  // in neither view's ranges
  const uintptr_t r = reinterpret_cast<uintptr_t>(roots.data());
  const std::vector<RootRange> view0 = {{r, r + 8 * 512}}, view1 = {{r, r + 8 * 100}, {r + 8 * 550, r + 8 * 650}};
  RootView views[2] = {{view0.data(), view0.size()}, {view1.data(), view1.size()}};
  std::vector<RootRange> spans(kBlocks);
  spans.resize(BlockSpans(blocks.data(), blocks.size(), 1 << 16, spans.data()));
  Words out[2];
  Words* outs[2] = {&out[0], &out[1]};
  track::DirectMemoryReader direct;
  track::MmapScratchMemory scratch;
  RootWordsRead read;
  ASSERT_TRUE(CollectRootWords(views, 2, direct, spans.data(), spans.size(), scratch, outs, &read));
  for (int v = 0; v < 2; ++v) {
    const std::vector<RootRange>& ranges = v == 0 ? view0 : view1;
    std::vector<ScanBlock> by_ranges = blocks, by_words = blocks;
    track::ReachabilityResult a, b;
    ASSERT_TRUE(track::ClassifyReachability(by_ranges.data(), by_ranges.size(), ranges.data(), ranges.size(), direct,
                                            direct, scratch, &a));
    WordsInPlaceReader words(direct, out[v].v.data(), out[v].v.size());
    const RootRange one = words.range();
    ASSERT_TRUE(track::ClassifyReachability(by_words.data(), by_words.size(), &one, 1, words, direct, scratch, &b));
    for (size_t i = 0; i < kBlocks; ++i) {
      EXPECT_EQ(by_words[i].kind(), by_ranges[i].kind()) << "view " << v << " block " << i;
    }
    EXPECT_EQ(b.still_reachable.blocks, a.still_reachable.blocks);
    EXPECT_EQ(b.possibly_lost.blocks, a.possibly_lost.blocks);
    EXPECT_EQ(b.definitely_lost.blocks, a.definitely_lost.blocks);
    EXPECT_EQ(b.indirectly_lost.blocks, a.indirectly_lost.blocks);
  }
  // The views differ where their ranges do: block 40 is reachable in view 1 alone.
  EXPECT_EQ(out[0].v.size(), 2u);  // blocks 0 and 20's interior
  EXPECT_EQ(out[1].v.size(), 3u);
}

}  // namespace
}  // namespace scan
}  // namespace poolscope
