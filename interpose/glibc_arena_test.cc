// File: interpose/glibc_arena_test.cc
#include "interpose/glibc_arena.h"

#include <dlfcn.h>
#include <link.h>
#include <malloc.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "track/proc_maps.h"

namespace poolscope {
namespace scan {
namespace {

// The search as its contract states it, one boundary at a time: the reference the one-pass search
// is held to.
uintptr_t ReferenceFindMainArena(uintptr_t lo, const uint64_t* words, size_t n, track::MemoryReader& reader) {
  const uintptr_t hi = lo + 8 * n;
  auto word = [&](uintptr_t addr) { return words[(addr - lo) / 8]; };
  for (uintptr_t a = lo; a + kArenaBytes <= hi; a += 16) {
    int empty = 0;
    for (uintptr_t bin = a + kArenaBins; bin < a + kArenaBinsEnd; bin += 16) {
      if (word(bin) == bin - 16 && word(bin + 8) == bin - 16) ++empty;
    }
    if (empty < 16) continue;
    uint64_t next = word(a + kArenaNext);
    if (next == 0 || (next != a && (next % 16 != 0 || (next >= lo && next < hi)))) continue;
    for (int step = 0; step < 64 && next != a && next != 0; ++step) {
      if (reader.Read(next + kArenaNext, &next, sizeof next) != sizeof next) next = 0;
    }
    if (next == a) return a;
  }
  return 0;
}

// A segment of words at a 16-byte aligned address; the search reads `words`, a copy, as the scan does.
struct Segment {
  explicit Segment(size_t n) : memory(n + 2, 0), words(n) {}
  uintptr_t lo() const { return (reinterpret_cast<uintptr_t>(memory.data()) + 15) & ~uintptr_t{15}; }
  uint64_t& at(uintptr_t addr) { return words[(addr - lo()) / 8]; }
  // An arena at `a` with bins [first_empty, first_empty + empties) empty and `next`.
  void PutArena(uintptr_t a, int first_empty, int empties, uint64_t next) {
    for (int i = first_empty; i < first_empty + empties; ++i) {
      const uintptr_t bin = a + kArenaBins + 16 * static_cast<uintptr_t>(i);
      at(bin) = at(bin + 8) = bin - 16;
    }
    at(a + kArenaNext) = next;
  }
  uintptr_t Find(track::MemoryReader& reader) { return FindMainArena(lo(), words.data(), words.size(), reader); }
  uintptr_t Reference(track::MemoryReader& reader) {
    return ReferenceFindMainArena(lo(), words.data(), words.size(), reader);
  }
  std::vector<uint64_t> memory;
  std::vector<uint64_t> words;
};

TEST(GlibcArenaTest, FindsAnArenaAloneOnItsList) {
  track::ProcessVmReader reader;
  Segment s(4096);
  EXPECT_EQ(s.Find(reader), 0u);  // zeros: no arena
  const uintptr_t a = s.lo() + 16 * 37;
  s.PutArena(a, 100, 16, a);
  EXPECT_EQ(s.Find(reader), a);
  // 15 empty bins are not enough.
  Segment fewer(4096);
  fewer.PutArena(a - s.lo() + fewer.lo(), 100, 15, a - s.lo() + fewer.lo());
  EXPECT_EQ(fewer.Find(reader), 0u);
  // The empty bins may lie anywhere among the bins, the first and the last included.
  for (int first : {0, 50, 127 - 16}) {
    Segment anywhere(4096);
    const uintptr_t b = anywhere.lo() + 16 * 5;
    anywhere.PutArena(b, first, 16, b);
    EXPECT_EQ(anywhere.Find(reader), b) << first;
  }
}

TEST(GlibcArenaTest, FollowsTheListThroughArenasOutsideTheSegment) {
  track::ProcessVmReader reader;
  Segment s(4096);
  const uintptr_t a = s.lo() + 16 * 3;
  // Two other arenas, in memory of their own, whose `next` words lead back to the main one.
  std::vector<uint64_t> heap1(kArenaBytes / 8 + 4), heap2(kArenaBytes / 8 + 4);
  const uintptr_t h1 = (reinterpret_cast<uintptr_t>(heap1.data()) + 15) & ~uintptr_t{15};
  const uintptr_t h2 = (reinterpret_cast<uintptr_t>(heap2.data()) + 15) & ~uintptr_t{15};
  *reinterpret_cast<uint64_t*>(h1 + kArenaNext) = h2;
  *reinterpret_cast<uint64_t*>(h2 + kArenaNext) = a;
  s.PutArena(a, 10, 40, h1);
  EXPECT_EQ(s.Find(reader), a);
  // A list that does not come back is no arena's.
  *reinterpret_cast<uint64_t*>(h2 + kArenaNext) = h1;
  EXPECT_EQ(s.Find(reader), 0u);
  // Nor is a `next` inside the segment other than the arena itself.
  Segment inside(4096);
  const uintptr_t b = inside.lo() + 16 * 3;
  inside.PutArena(b, 10, 40, inside.lo() + 16 * 200);
  EXPECT_EQ(inside.Find(reader), 0u);
}

// Random segments: pointers into and out of the segment, runs of empty bins, arenas of every kind;
// the one-pass search answers as the reference does.
TEST(GlibcArenaTest, AgreesWithTheReferenceOnRandomSegments) {
  track::ProcessVmReader reader;
  std::mt19937_64 rng(12345);
  std::vector<uint64_t> other(kArenaBytes / 8 + 4);
  const uintptr_t outside = (reinterpret_cast<uintptr_t>(other.data()) + 15) & ~uintptr_t{15};
  int found = 0;
  for (int round = 0; round < 300; ++round) {
    Segment s(600 + rng() % 3000);
    const uintptr_t lo = s.lo();
    const size_t nslots = s.words.size() / 2;
    for (size_t i = 0; i < s.words.size(); ++i) {
      switch (rng() % 8) {
        case 0: s.words[i] = lo + 16 * (rng() % nslots); break;        // into the segment
        case 1: s.words[i] = outside; break;                             // an arena elsewhere
        case 2: s.words[i] = rng(); break;                               // anything
        default: break;                                                  // zero
      }
    }
    // Runs of empty bins, some long enough for an arena.
    for (int runs = static_cast<int>(rng() % 6); runs > 0; --runs) {
      const size_t start = rng() % nslots, len = rng() % 40;
      for (size_t k = start; k < start + len && k < nslots; ++k) {
        const uintptr_t bin = lo + 16 * k;
        s.at(bin) = s.at(bin + 8) = bin - 16;
      }
    }
    if (s.words.size() * 8 >= kArenaBytes && rng() % 2 == 0) {
      const uintptr_t a = lo + 16 * (rng() % ((s.words.size() * 8 - kArenaBytes) / 16 + 1));
      s.PutArena(a, static_cast<int>(rng() % 100), 14 + static_cast<int>(rng() % 5), rng() % 2 ? a : outside);
    }
    *reinterpret_cast<uint64_t*>(outside + kArenaNext) = rng() % 2 ? outside : lo + 16 * (rng() % nslots);
    const uintptr_t want = s.Reference(reader);
    EXPECT_EQ(s.Find(reader), want) << round;
    found += want != 0;
  }
  EXPECT_GT(found, 30);  // the rounds found arenas, and missed them
  EXPECT_LT(found, 270);
}

int LibcData(struct dl_phdr_info* info, size_t, void* arg) {
  if (info->dlpi_name == nullptr || strstr(info->dlpi_name, "/libc.so") == nullptr) return 0;
  auto* ranges = static_cast<std::vector<std::pair<uintptr_t, uintptr_t>>*>(arg);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W) == 0 || ph.p_memsz == 0) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    ranges->emplace_back(lo & ~uintptr_t{15}, lo + ph.p_memsz);
  }
  return 1;
}

// Whether malloc is glibc's here (not a sanitizer's, which leaves glibc's arenas unmade).
bool MallocIsGlibcs() {
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  const bool glibc = libc != nullptr && dlsym(RTLD_DEFAULT, "malloc") == dlsym(libc, "malloc");
  if (libc != nullptr) dlclose(libc);
  return glibc;
}

// This process's glibc: the search answers as the reference does on libc's data; with glibc's malloc
// in use, it finds the main arena, and the arena a thread's malloc made is on its list.
TEST(GlibcArenaTest, FindsThisProcesssMainArena) {
  // A thread's arena, so that the main arena's list is not itself alone.
  std::thread([] { free(malloc(100)); }).join();
  std::vector<std::pair<uintptr_t, uintptr_t>> data;
  dl_iterate_phdr(LibcData, &data);
  ASSERT_FALSE(data.empty()) << "libc's writable segment not found";
  track::ProcessVmReader reader;
  uintptr_t arena = 0;
  for (const auto& r : data) {
    const size_t n = (r.second - r.first) / 8;
    std::vector<uint64_t> copy(n);
    memcpy(copy.data(), reinterpret_cast<const void*>(r.first), 8 * n);
    arena = FindMainArena(r.first, copy.data(), n, reader);
    EXPECT_EQ(arena, ReferenceFindMainArena(r.first, copy.data(), n, reader));
    if (arena != 0) break;
  }
  if (!MallocIsGlibcs()) return;  // (under ASan: no arena was made, and none may be found)
  ASSERT_NE(arena, 0u);
  // Its list goes through the thread's arena (outside libc) and back.
  const uint64_t next = *reinterpret_cast<const uint64_t*>(arena + kArenaNext);
  EXPECT_NE(next, arena);
  bool outside_libc = true;
  for (const auto& r : data) outside_libc = outside_libc && (next < r.first || next >= r.second);
  EXPECT_TRUE(outside_libc);
}

}  // namespace
}  // namespace scan
}  // namespace poolscope
