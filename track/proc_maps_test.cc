#include "track/proc_maps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace poolscope {
namespace track {
namespace {

std::string WriteFile(const std::string& text) {
  std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
                     "/maps." + std::to_string(getpid()) + "." + std::to_string(rand());
  FILE* f = fopen(path.c_str(), "w");
  fwrite(text.data(), 1, text.size(), f);
  fclose(f);
  return path;
}

TEST(ProcMapsTest, ParsesEveryField) {
  std::string path = WriteFile(
      "55d0c2a00000-55d0c2a21000 rw-p 00000000 00:00 0                          [heap]\n"
      "7f1a2b000000-7f1a2b028000 r-xp 00028000 fd:01 1316345                    /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      "7f1a2c000000-7f1a2c004000 rw-s 00000000 00:05 42                         /dev/shm/has space\n"
      "7ffd1e000000-7ffd1e021000 rw-p 00000000 00:00 0\n"
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]");
  MmapScratchMemory scratch;
  ProcMaps maps(scratch);
  ASSERT_TRUE(maps.Read(path.c_str()));
  ASSERT_EQ(maps.size(), 5u);
  EXPECT_EQ(maps[0].start, 0x55d0c2a00000u);
  EXPECT_EQ(maps[0].end, 0x55d0c2a21000u);
  EXPECT_STREQ(maps[0].perms, "rw-p");
  EXPECT_STREQ(maps[0].path, "[heap]");
  EXPECT_EQ(maps[1].offset, 0x28000u);
  EXPECT_EQ(maps[1].inode, 1316345u);
  EXPECT_STREQ(maps[1].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_STREQ(maps[2].path, "/dev/shm/has space");
  EXPECT_STREQ(maps[2].perms, "rw-s");
  EXPECT_STREQ(maps[3].path, "");
  EXPECT_EQ(maps[4].start, 0xffffffffff600000u);  // the last line has no newline
  EXPECT_STREQ(maps[4].path, "[vsyscall]");
  EXPECT_FALSE(IsRootCandidate(maps[0]));  // [heap]
  EXPECT_FALSE(IsRootCandidate(maps[1]));  // not writable
  EXPECT_TRUE(IsRootCandidate(maps[2]));  // /dev/shm/: memory
  EXPECT_TRUE(IsRootCandidate(maps[3]));
  EXPECT_FALSE(IsRootCandidate(maps[4]));
  unlink(path.c_str());
}

TEST(ProcMapsTest, DeviceMappingsAreNotRootsButSharedMemoryIs) {
  std::string path = WriteFile(
      "7f1a2c000000-7f1a2c004000 rw-s 00000000 00:01 1024                       /dev/zero (deleted)\n"
      "7f1a2d000000-7f1a2d004000 rw-s 00000000 00:05 3                          /dev/dri/card0\n"
      "7f1a2e000000-7f1a2e004000 rw-s 00000000 00:05 4                          /dev/zeroes\n");
  MmapScratchMemory scratch;
  ProcMaps maps(scratch);
  ASSERT_TRUE(maps.Read(path.c_str()));
  ASSERT_EQ(maps.size(), 3u);
  EXPECT_TRUE(IsRootCandidate(maps[0]));   // MAP_SHARED | MAP_ANONYMOUS
  EXPECT_FALSE(IsRootCandidate(maps[1]));  // a device
  EXPECT_FALSE(IsRootCandidate(maps[2]));
  unlink(path.c_str());
}

TEST(ProcMapsTest, ReadsAFileOfManyThousandLines) {
  std::string text;
  char line[128];
  for (int i = 0; i < 20000; ++i) {
    snprintf(line, sizeof(line), "%lx-%lx rw-p 00000000 00:00 0     /some/long/path/number/%d.so\n",
             0x100000000ul + i * 0x2000ul, 0x100001000ul + i * 0x2000ul, i);
    text += line;
  }
  std::string path = WriteFile(text);
  MmapScratchMemory scratch;
  ProcMaps maps(scratch);
  ASSERT_TRUE(maps.Read(path.c_str()));
  ASSERT_EQ(maps.size(), 20000u);
  EXPECT_EQ(maps[19999].start, 0x100000000ul + 19999 * 0x2000ul);
  EXPECT_STREQ(maps[19999].path, "/some/long/path/number/19999.so");
  unlink(path.c_str());
}

TEST(ProcMapsTest, ReadsItsOwnMapsAndFindsItsStackAndData) {
  MmapScratchMemory scratch;
  ProcMaps maps(scratch);
  ASSERT_TRUE(maps.Read());
  ASSERT_GT(maps.size(), 5u);
  static int global_data = 1;
  int local = 0;
  uintptr_t addrs[] = {reinterpret_cast<uintptr_t>(&global_data), reinterpret_cast<uintptr_t>(&local)};
  if (addrs[0] > addrs[1]) std::swap(addrs[0], addrs[1]);
  std::vector<uint8_t> hit(maps.size());
  const ScanBlock blocks[] = {ScanBlock::Of(addrs[0], 8), ScanBlock::Of(addrs[1], 8)};
  MarkMappingsHoldingBlocks(maps, blocks, 2, hit.data());
  int hits = 0;
  for (size_t i = 0; i < maps.size(); ++i) {
    if (!hit[i]) continue;
    ++hits;
    EXPECT_TRUE(IsRootCandidate(maps[i])) << maps[i].path;
  }
  EXPECT_EQ(hits, 2);
  bool stack_seen = false;
  for (size_t i = 0; i < maps.size(); ++i) stack_seen |= strcmp(maps[i].path, "[stack]") == 0;
  EXPECT_TRUE(stack_seen);
}

// Four pages mapped: the first two readable (two mappings, one read-only, one read-write), the third
// inaccessible, the fourth unmapped.
TEST(ProcMapsTest, ReadableThroughoutStopsAtAnInaccessibleOrUnmappedPage) {
  char* p = static_cast<char*>(mmap(nullptr, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  ASSERT_EQ(mprotect(p, 4096, PROT_READ), 0);
  ASSERT_EQ(mprotect(p + 2 * 4096, 4096, PROT_NONE), 0);
  ASSERT_EQ(munmap(p + 3 * 4096, 4096), 0);
  MmapScratchMemory scratch;
  ProcMaps maps(scratch);
  ASSERT_TRUE(maps.Read());
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  EXPECT_TRUE(ReadableThroughout(maps, a, a + 4096));
  EXPECT_TRUE(ReadableThroughout(maps, a + 16, a + 2 * 4096)) << "across two readable mappings";
  EXPECT_TRUE(ReadableThroughout(maps, a + 4096, a + 4096 + 8));
  EXPECT_FALSE(ReadableThroughout(maps, a, a + 2 * 4096 + 8)) << "into the inaccessible page";
  EXPECT_FALSE(ReadableThroughout(maps, a + 2 * 4096, a + 2 * 4096 + 8));
  EXPECT_FALSE(ReadableThroughout(maps, a + 3 * 4096, a + 3 * 4096 + 8)) << "unmapped";
  munmap(p, 3 * 4096);
}

TEST(ProcMapsTest, MissingFileFails) {
  MmapScratchMemory scratch;
  ProcMaps maps(scratch);
  EXPECT_FALSE(maps.Read("/nonexistent/maps"));
  EXPECT_EQ(maps.size(), 0u);
}

TEST(ProcMapsTest, RootRangesSubtractExclusions) {
  std::string path = WriteFile(
      "1000-5000 rw-p 00000000 00:00 0\n"
      "5000-6000 r--p 00000000 00:00 0\n"
      "6000-9000 rw-p 00000000 00:00 0       [heap]\n"
      "9000-10000 rw-p 00000000 00:00 0      [stack]\n"
      "10000-20000 rw-p 00000000 00:00 0\n");
  MmapScratchMemory scratch;
  ProcMaps maps(scratch);
  ASSERT_TRUE(maps.Read(path.c_str()));
  RootRange exclude[] = {{0x2000, 0x3000}, {0x2800, 0x3800}, {0x4800, 0x9800}, {0x11000, 0x12000},
                         {0x1f000, 0x30000}};
  RootRange out[8];
  size_t n = BuildRootRanges(maps, exclude, 5, out, 8);
  ASSERT_EQ(n, 5u);
  EXPECT_EQ(out[0].begin, 0x1000u);
  EXPECT_EQ(out[0].end, 0x2000u);
  EXPECT_EQ(out[1].begin, 0x3800u);
  EXPECT_EQ(out[1].end, 0x4800u);
  EXPECT_EQ(out[2].begin, 0x9800u);
  EXPECT_EQ(out[2].end, 0x10000u);
  EXPECT_EQ(out[3].begin, 0x10000u);
  EXPECT_EQ(out[3].end, 0x11000u);
  EXPECT_EQ(out[4].begin, 0x12000u);
  EXPECT_EQ(out[4].end, 0x1f000u);
  // Too small an array: the count is still right, the first ones are written.
  RootRange two[2];
  EXPECT_EQ(BuildRootRanges(maps, exclude, 5, two, 2), 5u);
  EXPECT_EQ(two[1].begin, 0x3800u);
  // No exclusions: the candidates whole.
  EXPECT_EQ(BuildRootRanges(maps, nullptr, 0, out, 8), 3u);
  EXPECT_EQ(out[1].begin, 0x9000u);
  EXPECT_EQ(out[1].end, 0x10000u);
  unlink(path.c_str());
}

TEST(ProcMapsTest, MarkMappingsHoldingBlocksMarksOnlyTheHoldingMappings) {
  std::string path = WriteFile(
      "1000-2000 rw-p 00000000 00:00 0\n"
      "2000-3000 rw-p 00000000 00:00 0\n"
      "5000-6000 rw-p 00000000 00:00 0\n"
      "7000-8000 rw-p 00000000 00:00 0\n");
  MmapScratchMemory scratch;
  ProcMaps maps(scratch);
  ASSERT_TRUE(maps.Read(path.c_str()));
  // In address order; 0x3000 and 0x6000 are ends (exclusive), 0x10, 0x4000 and 0x9000 in no mapping;
  // 0x1ff0 and 0x1ff8 two blocks in one mapping.
  auto mark = [&](std::vector<uintptr_t> starts, uint8_t* hit) {
    std::vector<ScanBlock> blocks;
    for (uintptr_t s : starts) blocks.push_back(ScanBlock::Of(s, 8));
    MarkMappingsHoldingBlocks(maps, blocks.data(), blocks.size(), hit);
  };
  uint8_t hit[4] = {0, 0, 0, 0};
  mark({0x10, 0x1ff0, 0x1ff8, 0x3000, 0x4000, 0x6000, 0x7000, 0x9000}, hit);
  EXPECT_EQ(hit[0], 1);
  EXPECT_EQ(hit[1], 0);
  EXPECT_EQ(hit[2], 0);
  EXPECT_EQ(hit[3], 1);
  mark({0x2000}, hit);  // a start (inclusive)
  EXPECT_EQ(hit[1], 1);
  mark({0x5fff}, hit);
  EXPECT_EQ(hit[2], 1);
  uint8_t untouched[4] = {7, 7, 7, 7};
  mark({0x4000}, untouched);
  EXPECT_EQ(std::count(untouched, untouched + 4, 7), 4);
  unlink(path.c_str());
}

// Blocks that are mappings of their own (apart) mark nothing: a mapping is marked by its first block
// that is not, and apart() is asked of its blocks in order up to that one only.
TEST(ProcMapsTest, MarkMappingsHoldingBlocksSkipsBlocksApartInOrder) {
  std::string path = WriteFile(
      "1000-2000 rw-p 00000000 00:00 0\n"
      "2000-3000 rw-p 00000000 00:00 0\n"
      "5000-6000 rw-p 00000000 00:00 0\n");
  MmapScratchMemory scratch;
  ProcMaps maps(scratch);
  ASSERT_TRUE(maps.Read(path.c_str()));
  std::vector<ScanBlock> blocks;
  for (uintptr_t s : {0x1100, 0x1200, 0x1300, 0x1400, 0x2100, 0x2200, 0x5100}) blocks.push_back(ScanBlock::Of(s, 8));
  const std::vector<uintptr_t> apart_ones = {0x1100, 0x1200, 0x2100, 0x2200};
  std::vector<uintptr_t> asked;
  uint8_t hit[3] = {0, 0, 0};
  MarkMappingsHoldingBlocks(maps, blocks.data(), blocks.size(), hit, [&](const ScanBlock& b) {
    asked.push_back(b.start);
    return std::find(apart_ones.begin(), apart_ones.end(), b.start) != apart_ones.end();
  });
  EXPECT_EQ(hit[0], 1);  // 0x1300
  EXPECT_EQ(hit[1], 0);  // both apart
  EXPECT_EQ(hit[2], 1);
  EXPECT_EQ(asked, (std::vector<uintptr_t>{0x1100, 0x1200, 0x1300, 0x2100, 0x2200, 0x5100}));
  unlink(path.c_str());
}

TEST(ProcessVmReaderTest, ReadsValidMemory) {
  ASSERT_TRUE(ProcessVmReader::Available());
  std::vector<uint8_t> src(3 * 4096 + 100);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  std::vector<uint8_t> dst(src.size());
  ProcessVmReader r;
  // 40 pages' worth would need three system calls; an unaligned start splits pages.
  EXPECT_EQ(r.Read(reinterpret_cast<uintptr_t>(src.data()) + 3, dst.data(), src.size() - 3),
            src.size() - 3);
  EXPECT_EQ(memcmp(src.data() + 3, dst.data(), src.size() - 3), 0);
  std::vector<uint8_t> big(40 * 4096, 0xAB), big_copy(big.size());
  EXPECT_EQ(r.Read(reinterpret_cast<uintptr_t>(big.data()), big_copy.data(), big.size()), big.size());
  EXPECT_EQ(big, big_copy);
}

TEST(ProcessVmReaderTest, UnmappedMemoryReadsShortWithoutFaulting) {
  const size_t page = 4096;
  char* p = static_cast<char*>(
      mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  memset(p, 0x11, 3 * page);
  ASSERT_EQ(munmap(p + page, page), 0);
  std::vector<char> buf(3 * page);
  ProcessVmReader r;
  EXPECT_EQ(r.Read(reinterpret_cast<uintptr_t>(p) + 100, buf.data(), 3 * page - 200), page - 100);
  EXPECT_EQ(buf[0], 0x11);
  // A failed read leaves errno as it was: a second scanning thread shares the first one's errno.
  errno = EDOM;
  EXPECT_EQ(r.Read(reinterpret_cast<uintptr_t>(p) + page + 8, buf.data(), 64), 0u);
  EXPECT_EQ(errno, EDOM);
  MemoryReader::Range unmapped[] = {{reinterpret_cast<uintptr_t>(p) + page, 64}, {reinterpret_cast<uintptr_t>(p), 64}};
  EXPECT_EQ(r.ReadMany(unmapped, 2, buf.data()), 0u);
  EXPECT_EQ(errno, EDOM);
  EXPECT_EQ(r.Read(reinterpret_cast<uintptr_t>(p) + 2 * page, buf.data(), page), page);
  // A page that is mapped but not readable reads short too.
  ASSERT_EQ(mprotect(p + 2 * page, page, PROT_NONE), 0);
  EXPECT_EQ(r.Read(reinterpret_cast<uintptr_t>(p) + 2 * page, buf.data(), page), 0u);
  // The range stays reserved: a later test's mapping at these addresses would meet the copies of
  // them this test left on the stack (ClassifiesThroughRealRoots reads the stack as roots).
  ASSERT_NE(mmap(p, 3 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), MAP_FAILED);
  munmap(p + 2 * page, page);
  EXPECT_EQ(r.Read(reinterpret_cast<uintptr_t>(p), buf.data(), page), 0u);
}

TEST(ProcessVmReaderTest, ReadManyStopsInTheFirstRangeItCannotRead) {
  const size_t page = 4096;
  char* p = static_cast<char*>(
      mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  for (size_t i = 0; i < 4 * page; ++i) p[i] = static_cast<char>(i * 13 + 1);
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  ProcessVmReader r;
  // Ranges in no particular order, one across a page boundary: all read, back to back.
  std::vector<MemoryReader::Range> ok = {{b + 3 * page + 16, 40}, {b + 100, 24}, {b + page - 8, 24}};
  std::vector<char> buf(200, 0);
  ASSERT_EQ(r.ReadMany(ok.data(), ok.size(), buf.data()), 88u);
  EXPECT_EQ(memcmp(buf.data(), p + 3 * page + 16, 40), 0);
  EXPECT_EQ(memcmp(buf.data() + 40, p + 100, 24), 0);
  EXPECT_EQ(memcmp(buf.data() + 64, p + page - 8, 24), 0);
  // The third page goes: a range that ends in it reads short, and nothing after it is counted.
  ASSERT_EQ(munmap(p + 2 * page, page), 0);
  std::vector<MemoryReader::Range> bad = {{b + 8, 16}, {b + 2 * page - 8, 32}, {b + 3 * page, 16}};
  EXPECT_EQ(r.ReadMany(bad.data(), bad.size(), buf.data()), 16u + 8u);
  EXPECT_EQ(memcmp(buf.data(), p + 8, 16), 0);
  EXPECT_EQ(memcmp(buf.data() + 16, p + 2 * page - 8, 8), 0);
  // More pieces than one system call takes (300 ranges of 8 bytes, one per 16): still all read.
  std::vector<MemoryReader::Range> many;
  for (size_t i = 0; i < 300; ++i) many.push_back({b + 16 * i, 8});
  std::vector<char> big(300 * 8);
  ASSERT_EQ(r.ReadMany(many.data(), many.size(), big.data()), 300u * 8);
  for (size_t i = 0; i < 300; ++i) ASSERT_EQ(memcmp(big.data() + 8 * i, p + 16 * i, 8), 0) << i;
  munmap(p, 2 * page);
  munmap(p + 3 * page, page);
}

// Heap blocks read in batches through process_vm_readv: a block on a page it cannot read reads as
// pointing nowhere, and its batch-mates are still read and followed.
TEST(ProcessVmReaderTest, BatchedHeapReadsSurviveAnUnreadableBlock) {
  const size_t page = 4096;
  uint64_t* heap = static_cast<uint64_t*>(
      mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(heap, MAP_FAILED);
  const size_t words = page / 8;
  // Block A (page 0) points at B0..B7: B5 on page 2, the others on page 1. Each Bi points at Ci on
  // page 3.
  uintptr_t a = reinterpret_cast<uintptr_t>(heap);
  std::vector<uintptr_t> bs, cs;
  for (size_t i = 0; i < 8; ++i) {
    const size_t at = i == 5 ? 2 * words : words + 8 * i;
    bs.push_back(reinterpret_cast<uintptr_t>(heap + at));
    cs.push_back(reinterpret_cast<uintptr_t>(heap + 3 * words + 8 * i));
    heap[i] = bs[i];
    heap[at] = cs[i];
  }
  std::vector<ScanBlock> blocks;
  blocks.push_back(ScanBlock::Of(a, 64));
  for (size_t i = 0; i < 8; ++i) blocks.push_back(ScanBlock::Of(bs[i], 32));
  for (size_t i = 0; i < 8; ++i) blocks.push_back(ScanBlock::Of(cs[i], 32));
  std::sort(blocks.begin(), blocks.end(), [](const ScanBlock& x, const ScanBlock& y) { return x.start < y.start; });
  // Not unmapped: the classifier's scratch mappings could land in the hole.
  ASSERT_EQ(mprotect(heap + 2 * words, page, PROT_NONE), 0);
  static uint64_t root[1];
  root[0] = a;
  std::vector<RootRange> roots = {{reinterpret_cast<uintptr_t>(root), reinterpret_cast<uintptr_t>(root + 1)}};
  DirectMemoryReader root_reader;
  ProcessVmReader heap_reader;
  MmapScratchMemory scratch;
  ReachabilityResult r;
  ASSERT_TRUE(ClassifyReachability(blocks.data(), blocks.size(), roots.data(), roots.size(), root_reader,
                                   heap_reader, scratch, &r));
  auto kind = [&](uintptr_t s) {
    for (const ScanBlock& blk : blocks) {
      if (blk.start == s) return blk.kind();
    }
    ADD_FAILURE() << "no block";
    return LeakKind::kStillReachable;
  };
  EXPECT_EQ(kind(a), LeakKind::kStillReachable);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(kind(bs[i]), LeakKind::kStillReachable) << i;
    EXPECT_EQ(kind(cs[i]), i == 5 ? LeakKind::kDefinitelyLost : LeakKind::kStillReachable) << i;
  }
  EXPECT_EQ(r.heap_bytes_unreadable, 32u);
  EXPECT_EQ(r.heap_bytes_scanned, 64u + 7 * 32 + 8 * 32);  // A, the B readable, every C (C5 as a leader)
  // Kept reserved, not unmapped: this test's vectors of these addresses linger in freed memory (under
  // ASan, in its quarantine), which ClassifiesThroughRealRoots reads as roots; a block of its own at a
  // reused address would be found reachable through them.
  ASSERT_NE(mmap(heap, 4 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), MAP_FAILED);
}

// The classifier over the process's own maps and memory: a block referenced only from an anonymous
// mapping is reachable once that mapping is a root, lost once it is excluded.
TEST(ProcessVmReaderTest, ClassifiesThroughRealRoots) {
  uint64_t* holder = static_cast<uint64_t*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(holder, MAP_FAILED);
  // The "heap": a mapping that is not a root.
  uint64_t* heap = static_cast<uint64_t*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(heap, MAP_FAILED);
  // The block's address is kept only in the holder and in the block list, which lives in the "heap"
  // too: not on this stack, which is a root.
  holder[10] = reinterpret_cast<uintptr_t>(heap + 200);
  MmapScratchMemory scratch;
  for (bool exclude_holder : {true, false}) {
    ProcMaps maps(scratch);
    ASSERT_TRUE(maps.Read());
    // The stack below this frame holds whatever the classifier's own frames leave there (its copies of
    // the block's address among them); memcheck scans a stack from its pointer up, and so does this
    // test.
    int here = 0;
    uintptr_t sp = reinterpret_cast<uintptr_t>(&here);
    uintptr_t stack_start = 0;
    for (size_t i = 0; i < maps.size(); ++i) {
      if (maps[i].start <= sp && sp < maps[i].end) stack_start = maps[i].start;
    }
    ASSERT_NE(stack_start, 0u);
    std::vector<RootRange> exclude = {
        {reinterpret_cast<uintptr_t>(heap), reinterpret_cast<uintptr_t>(heap) + 4096},
        {stack_start, sp}};
    if (exclude_holder) {
      exclude.push_back({reinterpret_cast<uintptr_t>(holder), reinterpret_cast<uintptr_t>(holder) + 4096});
    }
    std::sort(exclude.begin(), exclude.end(),
              [](const RootRange& a, const RootRange& b) { return a.begin < b.begin; });
    size_t nexclude = exclude.size();
    std::vector<RootRange> roots(maps.size() * 2 + 4);
    size_t n = BuildRootRanges(maps, exclude.data(), nexclude, roots.data(), roots.size());
    ASSERT_LE(n, roots.size());
    // Under ASan and TSan the sanitizers' shadow memory is terabytes of writable address space:
    // reading it would take the test's whole time. The holder is a page; such ranges are left out.
    n = static_cast<size_t>(std::remove_if(roots.begin(), roots.begin() + static_cast<long>(n),
                                           [](const RootRange& r) { return r.end - r.begin > (size_t{1} << 32); }) -
                            roots.begin());
    ScanBlock* blocks = reinterpret_cast<ScanBlock*>(heap + 64);
    // Field by field: a ScanBlock temporary would leave the address in this frame.
    blocks[0].start = reinterpret_cast<uintptr_t>(heap + 200);
    blocks[0].bits = 32;  // ScanBlock::Of(.., 32)
    ProcessVmReader reader;
    ReachabilityResult r;
    ASSERT_TRUE(ClassifyReachability(blocks, 1, roots.data(), n, reader, reader, scratch, &r));
    EXPECT_EQ(blocks[0].kind(), exclude_holder ? LeakKind::kDefinitelyLost : LeakKind::kStillReachable);
    EXPECT_GT(r.root_bytes_scanned, 4096u);
  }
  munmap(holder, 4096);
  munmap(heap, 4096);
}


// A private anonymous mapping of 16 pages with pages 1, 2, 5 and 15 written and page 2 then given back.
using Span = std::pair<uintptr_t, uintptr_t>;

class TouchedPagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = static_cast<char*>(mmap(nullptr, 16 * kPg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(base_, MAP_FAILED);
    for (int p : {1, 2, 5, 15}) base_[p * kPg + 7] = 1;
    ASSERT_EQ(madvise(base_ + 2 * kPg, kPg, MADV_DONTNEED), 0);
    fd_ = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    munmap(base_, 16 * kPg);
  }
  uintptr_t At(size_t page, size_t off = 0) const { return reinterpret_cast<uintptr_t>(base_) + page * kPg + off; }
  std::vector<Span> Runs(int fd, uintptr_t b, uintptr_t e) const {
    std::vector<Span> runs;
    ForEachTouchedRun(fd, b, e, [&](uintptr_t rb, uintptr_t re) { runs.push_back(Span{rb, re}); });
    return runs;
  }
  static constexpr size_t kPg = 4096;
  char* base_ = nullptr;
  int fd_ = -1;
};


TEST_F(TouchedPagesTest, RunsAreTheWrittenPages) {
  std::vector<Span> want = {{At(1), At(2)}, {At(5), At(6)}, {At(15), At(16)}};
  EXPECT_EQ(Runs(fd_, At(0), At(16)), want);
}

TEST_F(TouchedPagesTest, RunsAreClippedToTheRange) {
  std::vector<Span> want = {{At(1, 100), At(2)}, {At(5), At(5, 8)}};
  EXPECT_EQ(Runs(fd_, At(1, 100), At(5, 8)), want);
  EXPECT_TRUE(Runs(fd_, At(6), At(15)).empty());
}

TEST_F(TouchedPagesTest, UnreadablePagemapGivesTheWholeRange) {
  std::vector<Span> want = {{At(0, 8), At(16)}};
  EXPECT_EQ(Runs(-1, At(0, 8), At(16)), want);
}

TEST_F(TouchedPagesTest, RootRangesOfAnAnonymousMappingAreItsTouchedRuns) {
  // The test mapping as /proc/self/maps would list it, alone (the whole process's maps would include,
  // under the sanitizers, terabytes of shadow memory), and as a file mapping and a shared one.
  char range[64];
  snprintf(range, sizeof range, "%lx-%lx", static_cast<unsigned long>(At(0)), static_cast<unsigned long>(At(16)));
  MmapScratchMemory scratch;
  ProcMaps maps(scratch);
  ASSERT_TRUE(maps.Read(WriteFile(std::string(range) + " rw-p 00000000 00:00 0 \n").c_str()));
  RootRange roots[8];
  const RootRange exclude[] = {{At(5), At(5, 64)}};
  ASSERT_EQ(BuildRootRanges(maps, exclude, 1, roots, 8, fd_), 3u);
  std::vector<Span> got;
  for (const RootRange& r : roots) got.push_back(Span{r.begin, r.end});
  got.resize(3);
  std::vector<Span> want = {{At(1), At(2)}, {At(5, 64), At(6)}, {At(15), At(16)}};
  EXPECT_EQ(got, want);
  // Without pagemap, or for a mapping that is not private and anonymous: every page.
  ASSERT_EQ(BuildRootRanges(maps, nullptr, 0, roots, 8), 1u);
  EXPECT_EQ(Span(roots[0].begin, roots[0].end), Span(At(0), At(16)));
  for (const char* rest : {" rw-p 00000000 fd:01 1234 /tmp/data\n", " rw-s 00000000 00:01 7 /SYSV00000000 (deleted)\n"}) {
    ProcMaps other(scratch);
    ASSERT_TRUE(other.Read(WriteFile(std::string(range) + rest).c_str()));
    ASSERT_EQ(BuildRootRanges(other, nullptr, 0, roots, 8, fd_), 1u) << rest;
    EXPECT_EQ(Span(roots[0].begin, roots[0].end), Span(At(0), At(16))) << rest;
  }
}

TEST_F(TouchedPagesTest, PartsOfARangeAcrossMappingsKeepTheFilesPagesAndTheTouchedRuns) {
  // An object's writable segment as the maps list it: its file's pages (0 to 3, .data), then the
  // anonymous rest (.bss, 4 to 13), then a gap no mapping covers (14 and 15). The range starts inside
  // the file's pages and ends in the gap, as a segment's range from its program headers may.
  char lines[256];
  snprintf(lines, sizeof lines, "%lx-%lx rw-p 00002000 fd:01 1234 /tmp/lib.so\n%lx-%lx rw-p 00000000 00:00 0 \n",
           static_cast<unsigned long>(At(0)), static_cast<unsigned long>(At(4)), static_cast<unsigned long>(At(4)),
           static_cast<unsigned long>(At(14)));
  MmapScratchMemory scratch;
  ProcMaps maps(scratch);
  ASSERT_TRUE(maps.Read(WriteFile(lines).c_str()));
  base_[12 * kPg] = 1;
  auto parts = [&](int fd) {
    std::vector<Span> got;
    ForEachTouchedPart(maps, At(1, 8), At(15, 16), fd, [&](uintptr_t b, uintptr_t e) { got.push_back(Span{b, e}); });
    return got;
  };
  std::vector<Span> want = {{At(1, 8), At(4)}, {At(5), At(6)}, {At(12), At(13)}, {At(14), At(15, 16)}};
  EXPECT_EQ(parts(fd_), want);
  // Without pagemap: the parts whole, cut where the mappings are.
  want = {{At(1, 8), At(4)}, {At(4), At(14)}, {At(14), At(15, 16)}};
  EXPECT_EQ(parts(-1), want);
  // A range inside one mapping, and one before every mapping.
  std::vector<Span> got;
  ForEachTouchedPart(maps, At(5, 8), At(6), fd_, [&](uintptr_t b, uintptr_t e) { got.push_back(Span{b, e}); });
  ForEachTouchedPart(maps, At(0) - 64, At(0) - 8, fd_, [&](uintptr_t b, uintptr_t e) { got.push_back(Span{b, e}); });
  want = {{At(5, 8), At(6)}, {At(0) - 64, At(0) - 8}};
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace track
}  // namespace poolscope
