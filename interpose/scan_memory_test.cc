// File: interpose/scan_memory_test.cc
//
// The exit scan's readers: what the maps call unreadable reads as zeros and is counted, never read;
// a deadline that passed stops every read. Its arrays: faulted in as they fill, small rooms reused.
#include "interpose/scan_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace poolscope {
namespace scan {
namespace {

// Three pages, the middle one PROT_NONE: a read of it would fault.
class GuardedPages : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = static_cast<char*>(mmap(nullptr, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(base_, MAP_FAILED);
    memset(base_, 0x11, 3 * 4096);
    ASSERT_EQ(mprotect(base_ + 4096, 4096, PROT_NONE), 0);
    const uintptr_t b = reinterpret_cast<uintptr_t>(base_);
    readable_[0] = RootRange{b, b + 4096};
    readable_[1] = RootRange{b + 2 * 4096, b + 3 * 4096};
  }
  void TearDown() override { munmap(base_, 3 * 4096); }
  uintptr_t at(size_t off) const { return reinterpret_cast<uintptr_t>(base_) + off; }

  char* base_ = nullptr;
  RootRange readable_[2];
  track::DirectMemoryReader direct_;
};

TEST_F(GuardedPages, ReadAcrossTheUnreadablePageZeroFillsItAndCountsIt) {
  CheckedReader reader(direct_, readable_, 2);
  static unsigned char buf[3 * 4096];
  memset(buf, 0xee, sizeof buf);
  ASSERT_EQ(reader.Read(at(0), buf, sizeof buf), sizeof buf);
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(buf[i], 0x11) << i;
  for (size_t i = 4096; i < 2 * 4096; ++i) ASSERT_EQ(buf[i], 0) << i;
  for (size_t i = 2 * 4096; i < 3 * 4096; ++i) ASSERT_EQ(buf[i], 0x11) << i;
  EXPECT_EQ(reader.unreadable(), 4096u);
}

TEST_F(GuardedPages, InPlaceOnlyWithinOneReadableRange) {
  CheckedReader reader(direct_, readable_, 2);
  EXPECT_EQ(reader.InPlace(at(64), 64), reinterpret_cast<const uint64_t*>(at(64)));
  EXPECT_EQ(reader.InPlace(at(4096 - 32), 64), nullptr);  // runs into the unreadable page
  EXPECT_EQ(reader.InPlace(at(4096 + 8), 8), nullptr);
  EXPECT_EQ(reader.InPlace(at(2 * 4096), 4096), reinterpret_cast<const uint64_t*>(at(2 * 4096)));
  EXPECT_EQ(reader.unreadable(), 0u);
}

TEST_F(GuardedPages, ReadManyFallsBackToReadsWhenARangeIsNotReadable) {
  CheckedReader reader(direct_, readable_, 2);
  const track::MemoryReader::Range ranges[2] = {{at(0), 16}, {at(4096 + 16), 16}};
  uint64_t buf[4];
  memset(buf, 0xee, sizeof buf);
  ASSERT_EQ(reader.ReadMany(ranges, 2, buf), 32u);
  EXPECT_EQ(buf[0], 0x1111111111111111u);
  EXPECT_EQ(buf[2], 0u);
  EXPECT_EQ(reader.unreadable(), 16u);
}

uint64_t NowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000 + static_cast<uint64_t>(t.tv_nsec);
}

TEST(DeadlineReaderTest, NoDeadlineReadsEverything) {
  track::DirectMemoryReader direct;
  ScanDeadline none(0);
  DeadlineReader reader(direct, none);
  uint64_t word = 42, out = 0;
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(reader.Read(reinterpret_cast<uintptr_t>(&word), &out, 8), 8u);
  EXPECT_EQ(out, 42u);
  EXPECT_FALSE(none.passed());
}

TEST(DeadlineReaderTest, APassedDeadlineStopsEveryReadOfEveryReader) {
  track::DirectMemoryReader direct;
  ScanDeadline past(NowNs() - 1);
  DeadlineReader first(direct, past), second(direct, past);
  uint64_t word = 42, out = 0;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(&word);
  EXPECT_EQ(first.Read(addr, &out, 8), 0u);  // the first question looks at the clock
  EXPECT_TRUE(past.passed());
  EXPECT_EQ(second.InPlace(addr, 8), nullptr);
  const track::MemoryReader::Range r = {addr, 8};
  EXPECT_EQ(second.ReadMany(&r, 1, &out), 0u);
  EXPECT_EQ(out, 0u);
}

TEST(DeadlineReaderTest, AFutureDeadlineReadsUntilItPasses) {
  track::DirectMemoryReader direct;
  ScanDeadline soon(NowNs() + 50 * 1000000);
  DeadlineReader reader(direct, soon);
  uint64_t word = 42, out = 0;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(&word);
  EXPECT_EQ(reader.Read(addr, &out, 8), 8u);
  size_t reads = 0;
  const uint64_t give_up = NowNs() + 30ull * 1000000000;
  while (reader.Read(addr, &out, 8) == 8 && NowNs() < give_up) ++reads;
  EXPECT_TRUE(soon.passed());
  EXPECT_GT(reads, 0u);
}

// Pages of `p`'s mapping in memory, over `bytes`.
size_t ResidentPages(const void* p, size_t bytes) {
  unsigned char vec[64];
  const size_t pages = bytes / 4096;
  EXPECT_LE(pages, sizeof vec);
  EXPECT_EQ(mincore(const_cast<void*>(p), pages * 4096, vec), 0);
  size_t n = 0;
  for (size_t i = 0; i < pages; ++i) n += vec[i] & 1;
  return n;
}

// A small process's scan makes a dozen arrays that hold a few dozen elements: each costs the pages
// it is written in, not its mapping's whole room (128 KiB, 32 pages faulted in and zeroed).
TEST(ScratchArrayTest, AFewElementsFaultInOnePageAndGrowthTheRest) {
  InternalScratch scratch;
  Array<RootRange> a(scratch);
  for (uintptr_t i = 0; i < 10; ++i) ASSERT_TRUE(a.Push(RootRange{i, i + 1}));
  EXPECT_EQ(ResidentPages(a.data(), 128 * 1024), 1u);
  for (uintptr_t i = 10; i < 1000; ++i) ASSERT_TRUE(a.Push(RootRange{i, i + 1}));
  EXPECT_GE(ResidentPages(a.data(), 128 * 1024), 1000 * sizeof(RootRange) / 4096);
  EXPECT_LE(ResidentPages(a.data(), 128 * 1024), 4u);  // the capacity doubled to 1024: 16 KiB
  for (uintptr_t i = 0; i < 1000; ++i) EXPECT_EQ(a[i].begin, i);
}

// Two threads fill two parts of one array's room; joined, the second part's elements follow the
// first's in the same room, whichever part is empty.
TEST(ScratchArrayTest, TwoPartsAreJoinedInTheirRoom) {
  InternalScratch scratch;
  for (size_t n1 : {0, 1, 1000}) {
    for (size_t n2 : {0, 1, 3000}) {
      Array<RootRange> whole(scratch, /*sparse=*/true), first(scratch), second(scratch);
      ASSERT_TRUE(RoomInTwoParts(&whole, 1000, 3000, 10, &first, &second));
      EXPECT_EQ(first.data(), whole.data());
      EXPECT_EQ(reinterpret_cast<uintptr_t>(second.data()) % 4096, 0u);
      for (uintptr_t i = 0; i < n1; ++i) ASSERT_TRUE(first.Push(RootRange{i, 1}));
      for (uintptr_t i = 0; i < n2; ++i) ASSERT_TRUE(second.Push(RootRange{i, 2}));
      EXPECT_TRUE(first.borrowed() && second.borrowed());
      RootRange* const room = whole.data();
      ASSERT_TRUE(JoinTwoParts(&whole, &first, &second));
      EXPECT_EQ(whole.data(), room);
      ASSERT_EQ(whole.size(), n1 + n2);
      for (uintptr_t i = 0; i < n1 + n2; ++i) {
        ASSERT_EQ(whole[i].begin, i < n1 ? i : i - n1) << i;
        ASSERT_EQ(whole[i].end, i < n1 ? 1u : 2u) << i;
      }
      EXPECT_EQ(first.size() + second.size(), 0u);
      // (The room holds the extra elements asked for, with no growth.)
      EXPECT_GE(whole.capacity(), n1 + n2 + 10);
    }
  }
}

// A part that outgrows its room moves to memory of its own, the room it borrowed left as it was; the
// join then copies both parts, in order.
TEST(ScratchArrayTest, APartThatOutgrowsItsRoomIsJoinedByCopy) {
  InternalScratch scratch;
  for (int which = 0; which < 2; ++which) {
    Array<RootRange> whole(scratch, /*sparse=*/true), first(scratch), second(scratch);
    ASSERT_TRUE(RoomInTwoParts(&whole, 1000, 1000, 0, &first, &second));
    const size_t n1 = which == 0 ? 5000 : 700, n2 = which == 0 ? 600 : 9000;
    for (uintptr_t i = 0; i < n2; ++i) ASSERT_TRUE(second.Push(RootRange{i, 2}));
    for (uintptr_t i = 0; i < n1; ++i) ASSERT_TRUE(first.Push(RootRange{i, 1}));
    EXPECT_EQ(first.borrowed(), which != 0);
    EXPECT_EQ(second.borrowed(), which == 0);
    if (which == 0) {
      EXPECT_EQ(second[0].end, 2u) << "the first part wrote past its room";
    }
    ASSERT_TRUE(JoinTwoParts(&whole, &first, &second));
    ASSERT_EQ(whole.size(), n1 + n2);
    for (uintptr_t i = 0; i < n1 + n2; ++i) {
      ASSERT_EQ(whole[i].begin, i < n1 ? i : i - n1) << i;
      ASSERT_EQ(whole[i].end, i < n1 ? 1u : 2u) << i;
    }
  }
}

// Whether [p, p + bytes) is listed among the scratch's mappings (left out of every view's roots).
bool Listed(InternalScratch& scratch, const void* p, size_t bytes) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  bool listed = false;
  scratch.ForEachLive([&](const RootRange& r) { listed = listed || (r.begin <= b && b + bytes <= r.end); });
  return listed;
}

// How many mappings poolscope's internal memory has now.
size_t InternalMappingCount() {
  uintptr_t begin[1], end[1], used[1];
  uint8_t pointer_free[1];
  return InternalMappings(begin, end, used, pointer_free, 0);
}

// A small array given back leaves its room to the next one: no new mapping, no unmapping. The room
// stays listed while the slab lives (it still holds what the array held); the slab goes at
// ReleaseIdle once none of its rooms is in use.
TEST(ScratchArrayTest, ASmallRoomGivenBackIsTheNextArraysRoom) {
  InternalScratch scratch;
  void* first = nullptr;
  {
    Array<RootRange> a(scratch);
    ASSERT_TRUE(a.Push(RootRange{1, 2}));
    first = a.data();
  }
  EXPECT_TRUE(Listed(scratch, first, 4096)) << "a room given back is left out of the roots";
  Array<uint64_t> b(scratch);
  ASSERT_TRUE(b.Push(7));
  EXPECT_EQ(static_cast<void*>(b.data()), first);
  // It grows in place within the room, then beyond it (copied to a mapping of its own).
  for (uint64_t i = 1; i < 100000; ++i) ASSERT_TRUE(b.Push(i));
  for (uint64_t i = 1; i < 100000; ++i) ASSERT_EQ(b[i], i);
  EXPECT_EQ(b[0], 7u);
  EXPECT_NE(static_cast<void*>(b.data()), first);
  EXPECT_TRUE(Listed(scratch, b.data(), 100000 * sizeof(uint64_t)));
  Array<uint64_t> c(scratch), d(scratch);
  ASSERT_TRUE(c.Push(1));
  ASSERT_TRUE(d.Push(2));
  EXPECT_EQ(static_cast<void*>(c.data()), first) << "the room b left is the next array's";
  const void* const big = b.data();
  b.Free();  // a mapping of its own: unmapped at once
  EXPECT_FALSE(Listed(scratch, big, 4096));
  c.Free();
  scratch.ReleaseIdle();
  EXPECT_TRUE(Listed(scratch, first, 4096)) << "the slab stays while d uses a room of it";
  EXPECT_EQ(d[0], 2u);
  d.Free();
  scratch.ReleaseIdle();
  EXPECT_FALSE(Listed(scratch, first, 4096));
}

// Forty small arrays at once (a small process's scan) are one mapping, given back with one unmapping;
// more than the slab holds get mappings of their own, which go when their arrays do.
TEST(ScratchArrayTest, SmallArraysShareOneMapping) {
  InternalScratch scratch;
  const size_t before = InternalMappingCount();
  std::vector<std::unique_ptr<Array<uint64_t>>> arrays;
  for (uint64_t i = 0; i < 40; ++i) {
    arrays.push_back(std::make_unique<Array<uint64_t>>(scratch));
    ASSERT_TRUE(arrays.back()->Push(i));
  }
  EXPECT_EQ(InternalMappingCount(), before + 1);
  for (uint64_t i = 40; i < 100; ++i) {
    arrays.push_back(std::make_unique<Array<uint64_t>>(scratch));
    ASSERT_TRUE(arrays.back()->Push(i));
  }
  const size_t full = InternalMappingCount();
  EXPECT_GT(full, before + 1);
  EXPECT_LE(full, before + 1 + 100 - 40);
  for (uint64_t i = 0; i < 100; ++i) {
    EXPECT_EQ((*arrays[i])[0], i);
    EXPECT_TRUE(Listed(scratch, arrays[i]->data(), 4096)) << i;
  }
  arrays.clear();
  EXPECT_EQ(InternalMappingCount(), before + 1) << "the slab stays until ReleaseIdle";
  scratch.ReleaseIdle();
  EXPECT_EQ(InternalMappingCount(), before);
}

// Every mapping made is listed: the scan leaves the listed ones out of the roots it reads in place,
// and one it unmaps while the other thread reads would fault there. A request the list has no room
// for fails (the scan then says it had no memory) rather than make a mapping no list holds.
TEST(ScratchArrayTest, AMappingTheListCannotHoldIsNotMade) {
  InternalScratch scratch;
  constexpr size_t kBytes = 256 << 10;  // above the slab's rooms: a mapping each
  std::vector<void*> made;
  for (int i = 0; i < 1000; ++i) {
    void* p = scratch.MapSparse(kBytes);
    if (p == nullptr) break;
    made.push_back(p);
  }
  ASSERT_GT(made.size(), 8u);
  EXPECT_LT(made.size(), 1000u) << "the list's room is finite";
  for (void* p : made) EXPECT_TRUE(Listed(scratch, p, kBytes));
  scratch.Unmap(made.back(), kBytes);
  made.pop_back();
  void* again = scratch.MapSparse(kBytes);
  EXPECT_NE(again, nullptr) << "a slot given back is the next mapping's";
  if (again != nullptr) made.push_back(again);
  for (void* p : made) scratch.Unmap(p, kBytes);
}

// Whether the page at `p` is present (pagemap), the zero page mapped by a read included.
bool Present(const void* p) {
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  uint64_t entry = 0;
  EXPECT_EQ(pread(fd, &entry, 8, static_cast<off_t>(reinterpret_cast<uintptr_t>(p) / 4096 * 8)), 8);
  close(fd);
  return (entry >> 63) != 0;
}

// A large block whose pages were mostly never written (calloc's own mapping) reads as what it holds,
// without mapping a page of it: the untouched pages read as zeros, and stay unmapped.
TEST(TouchedPagesReaderTest, UntouchedPagesReadAsZerosWithoutAFault) {
  constexpr size_t kPages = 64;
  char* const block = static_cast<char*>(mmap(nullptr, kPages * 4096, PROT_READ | PROT_WRITE,
                                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(block, MAP_FAILED);
  const uint64_t marks[] = {0x1111, 0x2222};
  memcpy(block + 3 * 4096 + 8, &marks[0], 8);
  memcpy(block + 40 * 4096 + 4088, &marks[1], 8);
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  track::DirectMemoryReader direct;
  TouchedPagesReader reader(direct, fd);
  const uintptr_t b = reinterpret_cast<uintptr_t>(block);
  EXPECT_EQ(reader.InPlace(b, kPages * 4096), nullptr);  // large with untouched pages: through Read
  EXPECT_NE(reader.InPlace(b, 4096), nullptr);          // small: as the base reads it
  EXPECT_EQ(reader.InPlace(b + 3 * 4096, TouchedPagesReader::kSparse), nullptr) << "page 3 alone is touched";
  std::vector<uint64_t> words(kPages * 512, ~uint64_t{0});
  ASSERT_EQ(reader.Read(b, words.data(), kPages * 4096), kPages * 4096);
  for (size_t w = 0; w < words.size(); ++w) {
    const uint64_t want = w == 3 * 512 + 1 ? marks[0] : w == 40 * 512 + 511 ? marks[1] : 0;
    ASSERT_EQ(words[w], want) << "word " << w;
  }
  EXPECT_FALSE(Present(block + 10 * 4096));
  EXPECT_FALSE(Present(block + 63 * 4096));
  // The base alone maps them (the zero page), as the scan did.
  ASSERT_EQ(direct.Read(b, words.data(), kPages * 4096), kPages * 4096);
  EXPECT_TRUE(Present(block + 10 * 4096));
  close(fd);
  munmap(block, kPages * 4096);
}

// pagemap's answer for a large range is kept for that range's next question (InPlace and then Read,
// in each view): asked again after the pagemap stopped answering (/dev/null in its place: every page
// then counts as touched), the range reads as it did; a range not asked about before sees the change.
TEST(TouchedPagesReaderTest, APagemapAnswerIsKeptForTheRangesNextQuestion) {
  constexpr size_t kPages = 16;
  char* const block = static_cast<char*>(mmap(nullptr, kPages * 4096, PROT_READ | PROT_WRITE,
                                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(block, MAP_FAILED);
  block[3 * 4096] = 1;
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  track::DirectMemoryReader direct;
  TouchedPagesReader reader(direct, fd);
  const uintptr_t b = reinterpret_cast<uintptr_t>(block);
  EXPECT_EQ(reader.InPlace(b, kPages * 4096), nullptr) << "page 3 alone is touched";
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(null_fd, 0);
  ASSERT_EQ(dup2(null_fd, fd), fd);
  close(null_fd);
  EXPECT_EQ(reader.InPlace(b, kPages * 4096), nullptr) << "the range's answer was asked for again";
  std::vector<uint64_t> words(kPages * 512, ~uint64_t{0});
  ASSERT_EQ(reader.Read(b, words.data(), kPages * 4096), kPages * 4096);
  EXPECT_EQ(words[3 * 512], 1u);
  EXPECT_FALSE(Present(block + 10 * 4096)) << "an untouched page was read";
  EXPECT_NE(reader.InPlace(b, (kPages - 1) * 4096), nullptr) << "another range: every page counts as touched now";
  close(fd);
  munmap(block, kPages * 4096);
}

// A large range every page of which was touched (a block the program filled) is read where it lies:
// each view copied each large block before.
TEST(TouchedPagesReaderTest, ALargeRangeTouchedThroughoutIsReadInPlace) {
  constexpr size_t kPages = 16;
  static_assert(kPages * 4096 >= TouchedPagesReader::kSparse, "a large range");
  char* const block = static_cast<char*>(mmap(nullptr, kPages * 4096, PROT_READ | PROT_WRITE,
                                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(block, MAP_FAILED);
  memset(block, 7, kPages * 4096);
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  track::DirectMemoryReader direct;
  TouchedPagesReader reader(direct, fd);
  const uintptr_t b = reinterpret_cast<uintptr_t>(block);
  EXPECT_EQ(reader.InPlace(b + 8, kPages * 4096 - 16), reinterpret_cast<const uint64_t*>(b + 8));
  // A page given back (never touched since) makes the range one to copy, zero-filled there.
  ASSERT_EQ(madvise(block + 5 * 4096, 4096, MADV_DONTNEED), 0);
  EXPECT_EQ(reader.InPlace(b, kPages * 4096), nullptr);
  std::vector<uint64_t> words(kPages * 512);
  ASSERT_EQ(reader.Read(b, words.data(), kPages * 4096), kPages * 4096);
  EXPECT_EQ(words[5 * 512], 0u);
  EXPECT_EQ(words[6 * 512], 0x0707070707070707u);
  EXPECT_FALSE(Present(block + 5 * 4096));
  // Read among others (the classifier groups blocks of up to 64 KiB), the same.
  const track::MemoryReader::Range ranges[] = {{b + 8 * 4096, 8}, {b, 8 * 4096}};
  std::fill(words.begin(), words.end(), ~uint64_t{0});
  ASSERT_EQ(reader.ReadMany(ranges, 2, words.data()), 8 + 8 * 4096);
  EXPECT_EQ(words[0], 0x0707070707070707u);
  EXPECT_EQ(words[1 + 5 * 512], 0u);
  EXPECT_FALSE(Present(block + 5 * 4096)) << "an untouched page read through the base maps the zero page";
  close(fd);
  munmap(block, kPages * 4096);
}

// A large range's touched runs are given where they lie, for the classifier to scan in place (each
// view copied them, the untouched pages zero-filled, before); untouched pages stay unmapped. More runs
// than the caller has room for, or a small range, must go through Read.
TEST(TouchedPagesReaderTest, ALargeRangesTouchedRunsAreGivenInPlace) {
  constexpr size_t kPages = 64;
  char* const block = static_cast<char*>(mmap(nullptr, kPages * 4096, PROT_READ | PROT_WRITE,
                                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(block, MAP_FAILED);
  block[3 * 4096] = 1;
  block[40 * 4096] = 1;
  block[41 * 4096 + 100] = 1;
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  track::DirectMemoryReader direct;
  TouchedPagesReader reader(direct, fd);
  const uintptr_t b = reinterpret_cast<uintptr_t>(block);
  track::MemoryReader::Range runs[4];
  ASSERT_EQ(reader.InPlaceRuns(b + 8, kPages * 4096 - 16, runs, 4), 2);
  EXPECT_EQ(runs[0].addr, b + 3 * 4096);
  EXPECT_EQ(runs[0].n, 4096u);
  EXPECT_EQ(runs[1].addr, b + 40 * 4096);
  EXPECT_EQ(runs[1].n, 2 * 4096u);
  EXPECT_FALSE(Present(block + 10 * 4096));
  EXPECT_EQ(reader.InPlaceRuns(b, kPages * 4096, runs, 1), -1) << "two runs, room for one";
  EXPECT_EQ(reader.InPlaceRuns(b + 3 * 4096, 4096, runs, 4), -1) << "a small range";
  close(fd);
  munmap(block, kPages * 4096);
}

}  // namespace
}  // namespace scan
}  // namespace poolscope
