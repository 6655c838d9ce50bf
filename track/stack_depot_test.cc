#include "track/stack_depot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "track/fake_memory.h"
#include "track/stack_id_cache.h"

namespace poolscope {
namespace track {
namespace {

std::vector<uintptr_t> MakeStack(uint64_t seed, int depth) {
  std::vector<uintptr_t> s(depth);
  for (int i = 0; i < depth; ++i) s[i] = 0x400000 + seed * 4096 + i * 16 + (seed % 7);
  return s;
}

std::vector<uintptr_t> Frames(const StackDepot& d, uint32_t id) {
  uintptr_t pcs[kMaxStackDepth];
  const int n = d.Get(id, pcs);
  return std::vector<uintptr_t>(pcs, pcs + n);
}

TEST(StackDepotTest, SameStackSameIdDifferentStackDifferentId) {
  FakeMemory mem;
  StackDepot d(&mem, 1024);
  auto a = MakeStack(1, 16), b = MakeStack(2, 16);
  uint32_t ia = d.Insert(a.data(), 16);
  uint32_t ib = d.Insert(b.data(), 16);
  EXPECT_GE(ia, kFirstStackId);
  EXPECT_GE(ib, kFirstStackId);
  EXPECT_NE(ia, ib);
  EXPECT_EQ(d.Insert(a.data(), 16), ia);
  EXPECT_EQ(d.Insert(b.data(), 16), ib);
  EXPECT_EQ(Frames(d, ia), a);
  EXPECT_EQ(Frames(d, ib), b);
  EXPECT_EQ(d.size(), 2u);
  // A prefix is another stack.
  uint32_t prefix = d.Insert(a.data(), 15);
  EXPECT_NE(prefix, ia);
  EXPECT_EQ(Frames(d, prefix).size(), 15u);
}

TEST(StackDepotTest, ReservedIds) {
  FakeMemory mem;
  StackDepot d(&mem, 64);
  uintptr_t pc = 1;
  EXPECT_EQ(d.Insert(&pc, 0), kNoStackId);
  EXPECT_EQ(d.Insert(nullptr, -1), kNoStackId);
  uintptr_t pcs[kMaxStackDepth];
  EXPECT_EQ(d.Get(kNoStackId, pcs), 0);
  EXPECT_EQ(d.Get(kOverflowStackId, pcs), 0);
  EXPECT_EQ(d.Get(12345, pcs), 0);  // never handed out
  EXPECT_EQ(d.Get(0xffffffffu, pcs), 0);
}

TEST(StackDepotTest, DepthIsClampedTo64) {
  FakeMemory mem;
  StackDepot d(&mem, 64);
  auto s = MakeStack(3, 100);
  uint32_t id = d.Insert(s.data(), 100);
  EXPECT_EQ(Frames(d, id).size(), static_cast<size_t>(kMaxStackDepth));
  EXPECT_EQ(d.Insert(s.data(), kMaxStackDepth), id);
}

TEST(StackDepotTest, FullDepotReturnsOverflowAndKeepsWhatItHas) {
  FakeMemory mem;
  StackDepot d(&mem, 100);
  std::vector<uint32_t> ids;
  for (int i = 0; i < 100; ++i) {
    auto s = MakeStack(i, 8);
    ids.push_back(d.Insert(s.data(), 8));
    ASSERT_GE(ids.back(), kFirstStackId) << i;
  }
  EXPECT_EQ(d.size(), 100u);
  for (int i = 100; i < 150; ++i) {
    auto s = MakeStack(i, 8);
    EXPECT_EQ(d.Insert(s.data(), 8), kOverflowStackId);
  }
  EXPECT_EQ(d.overflows(), 50u);
  EXPECT_EQ(d.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    auto s = MakeStack(i, 8);
    EXPECT_EQ(d.Insert(s.data(), 8), ids[i]);  // known stacks still found
    EXPECT_EQ(Frames(d, ids[i]), s);
  }
}

TEST(StackDepotTest, OutOfMemoryReturnsOverflow) {
  {
    FakeMemory none(0);
    StackDepot d(&none, 1024);
    auto s = MakeStack(1, 4);
    EXPECT_EQ(d.Insert(s.data(), 4), kOverflowStackId);
    EXPECT_EQ(d.overflows(), 1u);
  }
  // Enough for the table and the directory, not for many records.
  FakeMemory some(16 * 1024 + 64 * 1024 + 64 * 1024);
  StackDepot d(&some, 1024);
  int kept = 0, overflowed = 0;
  for (int i = 0; i < 1000; ++i) {
    auto s = MakeStack(i, 64);
    uint32_t id = d.Insert(s.data(), 64);
    if (id == kOverflowStackId) {
      ++overflowed;
    } else {
      ++kept;
      EXPECT_EQ(Frames(d, id), s);
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(overflowed, 0);
  EXPECT_LE(some.bytes(), 16u * 1024 + 128 * 1024);
  EXPECT_EQ(d.memory_bytes(), some.bytes());
}

TEST(StackDepotTest, MemoryIsWhatTheStacksNeed) {
  FakeMemory mem;
  StackDepot d(&mem, 1u << 16);
  size_t after_ctor = mem.bytes();
  EXPECT_EQ(after_ctor, d.memory_bytes());
  // A first table of 1,024 4-byte slots plus the directory (8 bytes per 4,096 ids); no records yet:
  // nothing grows with the capacity but the directory.
  EXPECT_LE(after_ctor, 1024u * 4 + 64 + 17 * 8 + 64);
  for (int i = 0; i < 10000; ++i) {
    auto s = MakeStack(i, 16);
    d.Insert(s.data(), 16);
  }
  // 10,000 records of 4 + 16 * 4 bytes (the frames lie in one region) in 64 KiB chunks, plus
  // directory leaves of 48 KiB (4,096 record pointers and hashes), plus the tables it doubled through
  // (2,048 to 16,384 slots: at most 10,000 ids in two-thirds of the last).
  EXPECT_LE(mem.bytes() - after_ctor, 10000u * 68 + 64 * 1024 + 3 * 48 * 1024 + 2 * 16384 * 4 + 4 * 64);
  for (int i = 0; i < 10000; ++i) {
    auto s = MakeStack(i, 16);
    EXPECT_EQ(Frames(d, d.Insert(s.data(), 16)), s);
  }
  EXPECT_EQ(d.size(), 10000u);
}

// The depot's memory follows the stacks it holds, not its capacity: a few hundred stacks in a depot
// of the default capacity take a few pages.
TEST(StackDepotTest, FewStacksFewPages) {
  FakeMemory mem;
  StackDepot d(&mem);
  for (int i = 0; i < 300; ++i) {
    auto s = MakeStack(i, 16);
    d.Insert(s.data(), 16);
  }
  EXPECT_LE(mem.bytes(), 300u * 68 + 64 * 1024 + 48 * 1024 + 2048 * 4 + 2 * 1024 + 4 * 64);
}

// Frames far apart (an executable's text low, the libraries' high, a stack across both) come back
// exactly; so do stacks in regions past the sixteenth the compact records can number, kept with
// their frames whole, and each is found again.
TEST(StackDepotTest, FramesAnywhereComeBackExactly) {
  FakeMemory mem;
  StackDepot d(&mem, 1024);
  std::vector<std::vector<uintptr_t>> stacks = {
      {0x401234, 0x7f1234567890, 0x555555554abc, 0x7ffff7a3c1f0, 0x4000ff},
      {0xfffffffffffffff0, 0x10, 0x0fffffff, 0x10000000},
  };
  for (uintptr_t r = 1; r <= 24; ++r) stacks.push_back({r << 40 | 0x123, 0x401234, (r << 40) + 0xfffffff});
  std::vector<uint32_t> ids;
  for (const auto& s : stacks) ids.push_back(d.Insert(s.data(), static_cast<int>(s.size())));
  for (size_t i = 0; i < stacks.size(); ++i) {
    ASSERT_GE(ids[i], kFirstStackId) << i;
    EXPECT_EQ(Frames(d, ids[i]), stacks[i]) << "stack " << i;
    EXPECT_EQ(d.Insert(stacks[i].data(), static_cast<int>(stacks[i].size())), ids[i]) << "stack " << i;
  }
  // A stack that differs from a kept one in a frame's region alone is another stack.
  std::vector<uintptr_t> moved = stacks[0];
  moved[1] += uintptr_t{1} << 28;
  EXPECT_NE(d.Insert(moved.data(), static_cast<int>(moved.size())), ids[0]);
  EXPECT_EQ(d.size(), stacks.size() + 1);
}

TEST(StackDepotTest, ManyThreadsAgreeOnIds) {
  FakeMemory mem;
  StackDepot d(&mem, 1u << 16);
  constexpr int kThreads = 8;
  constexpr int kStacks = 3000;  // every thread inserts all of them, in different orders
  std::vector<std::vector<uint32_t>> seen(kThreads, std::vector<uint32_t>(kStacks));
  std::atomic<int> go{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int> order(kStacks);
      for (int i = 0; i < kStacks; ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), std::mt19937(t));
      go.fetch_add(1);
      while (go.load() < kThreads) {
      }
      for (int rep = 0; rep < 2; ++rep) {
        for (int i : order) {
          auto s = MakeStack(i, 1 + i % 32);
          uint32_t id = d.Insert(s.data(), static_cast<int>(s.size()));
          if (rep == 1 && seen[t][i] != id) seen[t][i] = 0;  // unstable id
          if (rep == 0) seen[t][i] = id;
          // Readers see complete records at once.
          uintptr_t pcs[kMaxStackDepth];
          int n = d.Get(id, pcs);
          if (n != static_cast<int>(s.size()) || !std::equal(s.begin(), s.end(), pcs)) seen[t][i] = 1;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint32_t> distinct;
  for (int i = 0; i < kStacks; ++i) {
    for (int t = 0; t < kThreads; ++t) ASSERT_EQ(seen[t][i], seen[0][i]) << "stack " << i << " thread " << t;
    ASSERT_GE(seen[0][i], kFirstStackId);
    distinct.insert(seen[0][i]);
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kStacks));
  // Ids lost to races are few.
  EXPECT_GE(d.size(), static_cast<uint32_t>(kStacks));
  EXPECT_LE(d.size(), static_cast<uint32_t>(kStacks + kStacks / 10));
}

TEST(StackDepotTest, ManyThreadsFillItPastCapacity) {
  FakeMemory mem;
  StackDepot d(&mem, 5000);
  std::vector<std::thread> threads;
  std::atomic<int> kept{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        auto s = MakeStack(t * 1000 + i, 8);
        uint32_t id = d.Insert(s.data(), 8);
        if (id != kOverflowStackId) {
          kept.fetch_add(1);
          if (Frames(d, id) != s) ADD_FAILURE() << "wrong frames";
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(d.size(), 5000u);
  EXPECT_LE(kept.load(), 5000);
  EXPECT_EQ(static_cast<uint64_t>(8000 - kept.load()), d.overflows());
}

// The hash places stacks in the depot's table and keys the per-thread cache: every frame, at every
// position, and the frames' order must move it, and distinct stacks must rarely share one.
TEST(StackDepotTest, HashSeesEveryFrameAndTheirOrder) {
  for (int depth = 1; depth <= 20; ++depth) {
    auto base = MakeStack(11, depth);
    const uint32_t h = StackDepot::Hash(base.data(), depth);
    for (int i = 0; i < depth; ++i) {
      auto changed = base;
      changed[i] += 16;
      EXPECT_NE(StackDepot::Hash(changed.data(), depth), h) << "depth " << depth << ", frame " << i;
      if (i + 1 < depth) {
        auto swapped = base;
        std::swap(swapped[i], swapped[i + 1]);
        EXPECT_NE(StackDepot::Hash(swapped.data(), depth), h) << "depth " << depth << ", frames " << i << "/" << i + 1;
      }
    }
    if (depth > 1) {
      EXPECT_NE(StackDepot::Hash(base.data(), depth - 1), h) << "a prefix, depth " << depth;
    }
  }
  // 200,000 stacks that differ in their inner frames only, as an interpreter's do: a 32-bit hash
  // should give about 5 pairs that collide; allow 50.
  std::set<uint32_t> seen;
  int collisions = 0;
  std::vector<uintptr_t> s = MakeStack(5, 16);
  for (uint32_t k = 0; k < 200000; ++k) {
    s[0] = 0x7f0000001000 + (k % 997) * 24;
    s[1] = 0x7f0000200000 + (k / 997) * 40;
    if (!seen.insert(StackDepot::Hash(s.data(), 16)).second) ++collisions;
  }
  EXPECT_LE(collisions, 50);
}

// ---- the per-thread cache of stack ids ---------------------------------------------------------------

TEST(StackIdCacheTest, AnswersOnlyTheVeryStackItKept) {
  FakeMemory mem;
  StackDepot d(&mem, 1 << 10);
  auto cache = std::make_unique<StackIdCache>();  // value-initialised: zeroed, as fresh mmap'd memory
  auto a = MakeStack(1, 16);
  const uint32_t ha = StackDepot::Hash(a.data(), 16);
  EXPECT_EQ(cache->Find(d, ha, a.data(), 16), kNoStackId) << "an empty cache answered";
  const uint32_t ida = d.Insert(a.data(), 16, ha);
  cache->Put(d, ha, ida);
  EXPECT_EQ(cache->Find(d, ha, a.data(), 16), ida);
  // The same hash with other frames (a collision, forced here), another depth, or another hash: no.
  auto b = a;
  b[9] += 16;
  EXPECT_EQ(cache->Find(d, ha, b.data(), 16), kNoStackId);
  EXPECT_EQ(cache->Find(d, ha, a.data(), 15), kNoStackId);
  EXPECT_EQ(cache->Find(d, ha ^ 1, a.data(), 16), kNoStackId);
  // A stack that maps to the same slot replaces it.
  auto c = MakeStack(3, 16);
  const uint32_t idc = d.Insert(c.data(), 16);
  cache->Put(d, ha, idc);
  EXPECT_EQ(cache->Find(d, ha, a.data(), 16), kNoStackId);
  EXPECT_EQ(cache->Find(d, ha, c.data(), 16), idc);
  // Reserved ids and ids never handed out are not kept.
  auto e = MakeStack(4, 16);
  const uint32_t he = StackDepot::Hash(e.data(), 16);
  for (uint32_t id : {kNoStackId, kOverflowStackId, idc + 100}) {
    cache->Put(d, he, id);
    EXPECT_EQ(cache->Find(d, he, e.data(), 16), kNoStackId) << "id " << id;
  }
  // Any depth the depot keeps, and a stack kept with 8-byte frames (code in more regions than the
  // depot numbers) as well as a compact one.
  auto deep = MakeStack(5, kMaxStackDepth);
  const uint32_t hdeep = StackDepot::Hash(deep.data(), kMaxStackDepth);
  const uint32_t iddeep = d.Insert(deep.data(), kMaxStackDepth, hdeep);
  cache->Put(d, hdeep, iddeep);
  EXPECT_EQ(cache->Find(d, hdeep, deep.data(), kMaxStackDepth), iddeep);
  std::vector<uintptr_t> wide;
  for (uintptr_t i = 0; i < 20; ++i) wide.push_back(((i + 40) << 28) + 0x40 * i + 8);
  const uint32_t hwide = StackDepot::Hash(wide.data(), 20);
  const uint32_t idwide = d.Insert(wide.data(), 20, hwide);
  cache->Put(d, hwide, idwide);
  EXPECT_EQ(cache->Find(d, hwide, wide.data(), 20), idwide);
  wide[19] += 1;
  EXPECT_EQ(cache->Find(d, hwide, wide.data(), 20), kNoStackId);
}

// The cache is read at random by every capture the memo cannot vouch for: small enough to stay near
// the CPU (with 16 frames copied into each entry it would be 72 KiB a thread).
TEST(StackIdCacheTest, IsSixteenBytesAnEntry) {
  EXPECT_LE(sizeof(StackIdCache), size_t{16} * StackIdCache::kEntries);
}

// In front of a depot, as tracking uses it: every answer is the depot's own id for the stack.
TEST(StackIdCacheTest, InFrontOfTheDepotGivesTheDepotsIds) {
  FakeMemory mem;
  StackDepot d(&mem, 1 << 16);
  auto cache = std::make_unique<StackIdCache>();
  std::mt19937 rng(7);
  std::vector<std::vector<uintptr_t>> stacks;
  for (int i = 0; i < 3000; ++i) stacks.push_back(MakeStack(static_cast<uint64_t>(i), 1 + i % 16));
  int hits = 0;
  for (int round = 0; round < 20000; ++round) {
    // Mostly a few hot stacks, sometimes any of them.
    const size_t k = round % 4 != 0 ? rng() % 50 : rng() % stacks.size();
    const auto& s = stacks[k];
    const int depth = static_cast<int>(s.size());
    const uint32_t h = StackDepot::Hash(s.data(), depth);
    uint32_t id = cache->Find(d, h, s.data(), depth);
    if (id != kNoStackId) {
      ++hits;
    } else {
      id = d.Insert(s.data(), depth, h);
      cache->Put(d, h, id);
    }
    ASSERT_EQ(id, d.Insert(s.data(), depth)) << "stack " << k;
  }
  EXPECT_GT(hits, 10000);
}

}  // namespace
}  // namespace track
}  // namespace poolscope
