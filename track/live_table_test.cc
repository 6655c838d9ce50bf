#include "track/live_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "track/fake_memory.h"

namespace poolscope {
namespace track {
namespace {

struct Model {
  uint64_t size;
  uint32_t stack_id;
  uint8_t flags;
};

void ExpectSame(const LiveTable& t, const std::unordered_map<uintptr_t, Model>& model) {
  ASSERT_EQ(t.size(), model.size());
  size_t visited = 0;
  t.ForEach([&](const LiveEntry& e) {
    ++visited;
    auto it = model.find(e.ptr);
    ASSERT_NE(it, model.end()) << e.ptr;
    EXPECT_EQ(e.size, it->second.size);
    EXPECT_EQ(e.stack_id, it->second.stack_id);
    EXPECT_EQ(e.flags, it->second.flags);
  });
  EXPECT_EQ(visited, model.size());
}

TEST(LiveTableTest, InsertFindErase) {
  FakeMemory mem;
  LiveTable t(&mem, 4);
  LiveEntry e;
  EXPECT_FALSE(t.Find(0x1000, &e));
  EXPECT_FALSE(t.Erase(0x1000, &e));
  EXPECT_EQ(t.Insert(0x1000, 24, 7, 0x81), InsertResult::kInserted);
  ASSERT_TRUE(t.Find(0x1000, &e));
  EXPECT_EQ(e.ptr, 0x1000u);
  EXPECT_EQ(e.size, 24u);
  EXPECT_EQ(e.stack_id, 7u);
  EXPECT_EQ(e.flags, 0x81);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.Insert(0x1000, 32, 9, 2), InsertResult::kReplaced);
  EXPECT_EQ(t.size(), 1u);
  ASSERT_TRUE(t.Erase(0x1000, &e));
  EXPECT_EQ(e.size, 32u);
  EXPECT_EQ(e.stack_id, 9u);
  EXPECT_EQ(e.flags, 2);
  EXPECT_FALSE(t.Erase(0x1000, nullptr));
  EXPECT_EQ(t.size(), 0u);
}

TEST(LiveTableTest, EntriesAre16Bytes) { EXPECT_EQ(LiveTable::EntryBytes(), 16u); }

// A short process keeps a few thousand live blocks, spread over every stripe by their addresses: the
// table's arrays (and the pages a process faults in for them) stay within a small multiple of what
// the entries need, not a fixed first array per stripe (256 stripes of 64 entries: 256 KiB).
TEST(LiveTableTest, AThousandBlocksTakeAFewTensOfKilobytes) {
  FakeMemory mem;
  LiveTable t(&mem);
  for (uintptr_t i = 0; i < 1000; ++i) ASSERT_EQ(t.Insert(0x10000000 + i * 48, 24, 3, 0), InsertResult::kInserted);
  // The stripe headers, then at least 16 bytes an entry at 3/4 load; at most four times that.
  const size_t stripes = LiveTable::kDefaultStripes * 64;
  const size_t entries = 1000 * LiveTable::EntryBytes() * 4 / 3;
  EXPECT_LE(t.memory_bytes(), stripes + 4 * entries);
}

TEST(LiveTableTest, KeysThatAreNotAddressesAreRefused) {
  FakeMemory mem;
  LiveTable t(&mem, 4);
  EXPECT_EQ(t.Insert(0, 1, 1, 0), InsertResult::kNoMemory);
  EXPECT_EQ(t.Insert(0x1001, 1, 1, 0), InsertResult::kNoMemory);
  EXPECT_EQ(t.Insert(uintptr_t{1} << 47, 1, 1, 0), InsertResult::kNoMemory);
  EXPECT_EQ(t.Insert((uintptr_t{1} << 47) - 8, 1, 1, 0), InsertResult::kInserted);
  EXPECT_FALSE(t.Find(0x1001, nullptr));
  EXPECT_FALSE(t.Erase(uintptr_t{1} << 47, nullptr));
  EXPECT_EQ(t.size(), 1u);
}

// Entries that collide on their home slot and wrap around the end of the array, erased in every
// order: backward-shift deletion must keep each remaining entry findable.
TEST(LiveTableTest, ErasingFromProbeRunsKeepsTheRestFindable) {
  for (int order = 0; order < 3; ++order) {
    FakeMemory mem;
    LiveTable t(&mem, 1);
    std::vector<uintptr_t> keys;
    for (uintptr_t i = 1; i <= 40; ++i) keys.push_back(i * 8);
    for (uintptr_t k : keys) ASSERT_EQ(t.Insert(k, k, static_cast<uint32_t>(k), 0), InsertResult::kInserted);
    std::mt19937_64 rng(order);
    if (order == 1) std::reverse(keys.begin(), keys.end());
    if (order == 2) std::shuffle(keys.begin(), keys.end(), rng);
    for (size_t n = 0; n < keys.size(); ++n) {
      ASSERT_TRUE(t.Erase(keys[n], nullptr)) << keys[n];
      for (size_t m = n + 1; m < keys.size(); ++m) {
        LiveEntry e;
        ASSERT_TRUE(t.Find(keys[m], &e)) << "order " << order << ": lost " << keys[m] << " after erasing " << keys[n];
        ASSERT_EQ(e.size, keys[m]);
      }
    }
    EXPECT_EQ(t.size(), 0u);
  }
}

TEST(LiveTableTest, StoredWordsNeverLookLikePointers) {
  // A conservative scanner reading the table's memory must not find a live block's address in it.
  FakeMemory mem;
  LiveTable t(&mem, 1);
  std::vector<uintptr_t> keys;
  for (int i = 0; i < 50; ++i) {
    uintptr_t k = 0x7f0000001000 + static_cast<uintptr_t>(i) * 48;
    keys.push_back(k);
    t.Insert(k, static_cast<uint64_t>(i) * 1000, static_cast<uint32_t>(i), static_cast<uint8_t>(i));
  }
  // Scan all memory the fake handed out, as memcheck would: no word may point into a block (its
  // start or anywhere inside it).
  size_t pointing = 0, scanned = 0;
  mem.ForEachBlock([&](const void* p, size_t bytes) {
    const uint64_t* w = static_cast<const uint64_t*>(p);
    for (size_t i = 0; i < bytes / 8; ++i, ++scanned) {
      for (size_t j = 0; j < keys.size(); ++j) {
        const uint64_t size = j * 1000 == 0 ? 1 : j * 1000;
        pointing += w[i] >= keys[j] && w[i] < keys[j] + size;
      }
    }
  });
  EXPECT_GT(scanned, 100u);
  EXPECT_EQ(pointing, 0u) << "words that point into live blocks";
}

TEST(LiveTableTest, SizesAndFlagsAtTheirLimits) {
  FakeMemory mem;
  LiveTable t(&mem);
  t.Insert(8, LiveTable::kMaxSize, 0xffffffffu, 0xff);
  t.Insert(16, uint64_t{1} << 60, 1, 0);  // clamped
  t.Insert(24, 0, 0, 0);
  LiveEntry e;
  ASSERT_TRUE(t.Find(8, &e));
  EXPECT_EQ(e.size, LiveTable::kMaxSize);
  EXPECT_EQ(e.stack_id, 0xffffffffu);
  EXPECT_EQ(e.flags, 0xff);
  ASSERT_TRUE(t.Find(16, &e));
  EXPECT_EQ(e.size, LiveTable::kMaxSize);
  EXPECT_EQ(e.flags, 0);
  ASSERT_TRUE(t.Find(24, &e));
  EXPECT_EQ(e.size, 0u);
}

// Random inserts, erases and finds of keys drawn by `key`, checked against a map after each.
template <typename KeyFn>
void MatchAModel(LiveTable& t, std::mt19937_64& rng, int ops, KeyFn key) {
  std::unordered_map<uintptr_t, Model> model;
  for (int op = 0; op < ops; ++op) {
    uintptr_t k = key();
    switch (rng() % 4) {
      case 0:
      case 1: {
        Model m{rng() % 100000, static_cast<uint32_t>(rng()), static_cast<uint8_t>(rng())};
        InsertResult r = t.Insert(k, m.size, m.stack_id, m.flags);
        ASSERT_EQ(r, model.count(k) ? InsertResult::kReplaced : InsertResult::kInserted);
        model[k] = m;
        break;
      }
      case 2: {
        LiveEntry e;
        bool found = t.Erase(k, &e);
        auto it = model.find(k);
        ASSERT_EQ(found, it != model.end());
        if (found) {
          ASSERT_EQ(e.size, it->second.size);
          ASSERT_EQ(e.stack_id, it->second.stack_id);
          ASSERT_EQ(e.flags, it->second.flags);
          model.erase(it);
        }
        break;
      }
      case 3: {
        LiveEntry e;
        bool found = t.Find(k, &e);
        auto it = model.find(k);
        ASSERT_EQ(found, it != model.end());
        if (found) {
          ASSERT_EQ(e.stack_id, it->second.stack_id);
        }
        break;
      }
    }
    if (op % 100000 == 0) ExpectSame(t, model);
  }
  ExpectSame(t, model);
}

TEST(LiveTableTest, RandomOperationsMatchAModel) {
  for (uint32_t stripes : {1u, 8u, 256u}) {
    FakeMemory mem;
    LiveTable t(&mem, stripes);
    std::mt19937_64 rng(stripes);
    // Keys from a small range so that inserts replace, erases hit and miss, and slots are reused.
    MatchAModel(t, rng, 400000, [&] { return (rng() % 20000) * 16 + 0x10000; });
    // Freed slots are reused: the table holds about as many entries as the model ever did live.
    EXPECT_LE(mem.bytes(), 20000u * 48 + stripes * 256 + stripes * 64 * 28);
  }
}

// Keys are placed by the 256-byte span they fall in (live_table.cc): shapes where many keys share home
// slots must still behave. Every 16-byte granule of a region taken (full spans), keys 8 bytes off a
// granule (malloc_align=8 pool blocks share a granule's home with their neighbour), and four heaps
// 64 MiB apart, as glibc aligns its thread arenas.
TEST(LiveTableTest, KeysSharingHomeSlotsMatchAModel) {
  for (uint32_t stripes : {1u, 256u}) {
    FakeMemory mem;
    LiveTable t(&mem, stripes);
    std::mt19937_64 rng(stripes + 7);
    MatchAModel(t, rng, 300000, [&] {
      const uintptr_t heap = 0x7f0000000000 + (rng() % 4) * (uintptr_t{64} << 20);
      return heap + (rng() % 30000) * 8;
    });
  }
}

TEST(LiveTableTest, GrowsToMillionsAndShrinksBackToReuse) {
  FakeMemory mem;
  LiveTable t(&mem);
  constexpr uintptr_t kBlocks = 3000000;
  for (uintptr_t i = 0; i < kBlocks; ++i) {
    ASSERT_EQ(t.Insert(0x10000000 + i * 32, i % 1000, static_cast<uint32_t>(i), 1), InsertResult::kInserted);
  }
  EXPECT_EQ(t.size(), kBlocks);
  const size_t grown = mem.bytes();
  // 16 bytes per entry at a load between 3/8 and 3/4; arrays outgrown are given back.
  EXPECT_LE(grown / kBlocks, 48u) << grown;
  LiveEntry e;
  for (uintptr_t i = 0; i < kBlocks; i += 997) {
    ASSERT_TRUE(t.Find(0x10000000 + i * 32, &e));
    EXPECT_EQ(e.stack_id, static_cast<uint32_t>(i));
  }
  for (uintptr_t i = 0; i < kBlocks; ++i) ASSERT_TRUE(t.Erase(0x10000000 + i * 32, nullptr));
  EXPECT_EQ(t.size(), 0u);
  // The same blocks again (other sizes and stacks) fit in the freed slots without a byte more.
  for (uintptr_t i = 0; i < kBlocks; ++i) t.Insert(0x10000000 + i * 32, 7, 2, 0);
  EXPECT_EQ(mem.bytes(), grown);
  std::cout << "bytes per live block at 3M: " << static_cast<double>(grown) / kBlocks << "\n";
}

TEST(LiveTableTest, OutOfMemoryIsReportedAndHarmless) {
  FakeMemory none(0);
  LiveTable empty(&none);
  EXPECT_EQ(empty.refused(), 0u);
  EXPECT_EQ(empty.Insert(16, 1, 1, 0), InsertResult::kNoMemory);
  EXPECT_FALSE(empty.Erase(16, nullptr));
  EXPECT_FALSE(empty.Find(16, nullptr));
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.refused(), 1u);  // the report says tracking is incomplete by this count

  FakeMemory some(64 * 1024);
  LiveTable t(&some, 4);
  int inserted = 0;
  for (uintptr_t i = 0; i < 100000; ++i) {
    InsertResult r = t.Insert(0x1000 + i * 16, 8, 0, 0);
    if (r == InsertResult::kNoMemory) break;
    ++inserted;
  }
  EXPECT_GT(inserted, 100);
  EXPECT_LT(inserted, 100000);
  EXPECT_EQ(t.size(), static_cast<uint64_t>(inserted));
  EXPECT_EQ(t.refused(), 1u);  // the insert that failed, and only it
  for (int i = 0; i < inserted; ++i) ASSERT_TRUE(t.Find(0x1000 + i * 16, nullptr)) << i;
}

TEST(LiveTableTest, ThreadsInsertAndEraseTheirOwnAndEachOthers) {
  FakeMemory mem;
  LiveTable t(&mem, 64);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  // Phase 1: each thread inserts its own blocks and erases half of them, while a reader walks.
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      uint64_t n = 0;
      t.ForEach([&](const LiveEntry& e) { n += e.size == (e.ptr >> 20) % 97 ? 0 : 1; });
      EXPECT_EQ(n, 0u);  // every entry seen is whole
    }
  });
  auto ptr_of = [](int thread, int i) { return (uintptr_t{1} << 40) + (uintptr_t(thread) << 32) + uintptr_t(i) * 16; };
  auto size_of = [](uintptr_t p) { return (p >> 20) % 97; };
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      for (int i = 0; i < kPerThread; ++i) {
        uintptr_t p = ptr_of(th, i);
        ASSERT_EQ(t.Insert(p, size_of(p), th, 0), InsertResult::kInserted);
        if (i % 2 == 1) {
          LiveEntry e;
          ASSERT_TRUE(t.Erase(ptr_of(th, i - 1), &e));
          ASSERT_EQ(e.stack_id, static_cast<uint32_t>(th));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.size(), uint64_t{kThreads} * kPerThread / 2);
  // Phase 2: every thread erases the odd blocks of the next thread (cross-thread frees); a second
  // erase of the same block by anyone fails.
  threads.clear();
  std::atomic<int> erased{0};
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      int victim = (th + 1) % kThreads;
      for (int i = 1; i < kPerThread; i += 2) {
        LiveEntry e;
        if (t.Erase(ptr_of(victim, i), &e)) {
          erased.fetch_add(1);
          EXPECT_EQ(e.stack_id, static_cast<uint32_t>(victim));
        }
        EXPECT_FALSE(t.Erase(ptr_of(victim, i), &e));
        uintptr_t q = ptr_of(th, kPerThread + i);
        t.Insert(q, size_of(q), th, 0);  // keep growing meanwhile
      }
    });
  }
  for (auto& th : threads) th.join();
  done.store(true);
  reader.join();
  EXPECT_EQ(erased.load(), kThreads * kPerThread / 2);
  EXPECT_EQ(t.size(), uint64_t{kThreads} * kPerThread / 2);
}

}  // namespace
}  // namespace track
}  // namespace poolscope
