#include "track/recent_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "track/fake_memory.h"

namespace poolscope {
namespace track {
namespace {

struct Fixture {
  FakeMemory memory;
  LiveTable table{&memory};
  RecentBlocks recent{&memory, &table};

  // Every recorded block: the table's and the slots'.
  std::map<uintptr_t, LiveEntry> All() {
    std::map<uintptr_t, LiveEntry> all;
    size_t seen = 0;
    table.ForEach([&](const LiveEntry& e) {
      ++seen;
      all[e.ptr] = e;
    });
    recent.ForEach([&](const LiveEntry& e) {
      ++seen;
      all[e.ptr] = e;
    });
    EXPECT_EQ(seen, all.size()) << "a block is recorded twice";
    return all;
  }
};

// Two addresses that share a slot.
std::pair<uintptr_t, uintptr_t> Colliding() {
  const uintptr_t a = 0x10000;
  for (uintptr_t b = a + 8;; b += 8) {
    if (RecentBlocks::SlotOf(b) == RecentBlocks::SlotOf(a)) return {a, b};
  }
}

TEST(RecentBlocksTest, BlocksFreedByTheirThreadNeverReachTheTable) {
  Fixture f;
  RecentBlocks::Node* node = f.recent.Acquire();
  ASSERT_NE(node, nullptr);
  for (uintptr_t p = 0x1000; p < 0x1000 + 16 * 1000; p += 16) {
    f.recent.Insert(node, p, 24, 7, 1);
    auto all = f.All();
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all.begin()->second.size, 24u);
    EXPECT_EQ(all.begin()->second.stack_id, 7u);
    EXPECT_EQ(all.begin()->second.flags, 1);
    ASSERT_TRUE(f.recent.Erase(node, true, p));
    EXPECT_EQ(f.table.size(), 0u);
  }
  EXPECT_TRUE(f.All().empty());
  EXPECT_FALSE(f.recent.Erase(node, true, 0x1000)) << "freed twice";
}

TEST(RecentBlocksTest, ANewBlockMovesTheSlotsOldOneToTheTable) {
  Fixture f;
  RecentBlocks::Node* node = f.recent.Acquire();
  auto [a, b] = Colliding();
  f.recent.Insert(node, a, 100, 3, 0);
  f.recent.Insert(node, b, 200, 4, 1);
  LiveEntry e;
  ASSERT_TRUE(f.table.Find(a, &e));
  EXPECT_EQ(e.size, 100u);
  EXPECT_EQ(e.stack_id, 3u);
  EXPECT_FALSE(f.table.Find(b, nullptr));
  EXPECT_EQ(f.All().size(), 2u);
  EXPECT_TRUE(f.recent.Erase(node, true, a));
  EXPECT_TRUE(f.recent.Erase(node, true, b));
  EXPECT_TRUE(f.All().empty());
}

// Erase gives the freed block's size wherever the block was: the caller's own slot, the table, or
// another thread's slot.
TEST(RecentBlocksTest, EraseGivesTheBlocksSize) {
  Fixture f;
  RecentBlocks::Node* owner = f.recent.Acquire();
  RecentBlocks::Node* other = f.recent.Acquire();
  auto [a, b] = Colliding();
  f.recent.Insert(owner, a, 100, 3, 0);
  f.recent.Insert(owner, b, 200, 4, 0);  // a moves to the table
  uint64_t size = 0;
  ASSERT_TRUE(f.recent.Erase(owner, true, b, &size));
  EXPECT_EQ(size, 200u) << "own slot";
  ASSERT_TRUE(f.recent.Erase(owner, true, a, &size));
  EXPECT_EQ(size, 100u) << "table";
  f.recent.Insert(owner, 0x5000, 56, 1, 0);
  ASSERT_TRUE(f.recent.Erase(other, true, 0x5000, &size));
  EXPECT_EQ(size, 56u) << "another thread's slot";
  size = 7;
  EXPECT_FALSE(f.recent.Erase(owner, true, 0x5000, &size));
  EXPECT_EQ(size, 7u) << "not found: left alone";
}

TEST(RecentBlocksTest, AnotherThreadFreesABlockInTheOwnersSlot) {
  Fixture f;
  RecentBlocks::Node* owner = f.recent.Acquire();
  RecentBlocks::Node* other = f.recent.Acquire();
  f.recent.Insert(owner, 0x2000, 8, 1, 0);
  EXPECT_TRUE(f.recent.Erase(other, true, 0x2000));
  EXPECT_TRUE(f.All().empty());
  EXPECT_FALSE(f.recent.Erase(owner, true, 0x2000));
  // Also from a thread without a node of its own.
  f.recent.Insert(owner, 0x3000, 8, 1, 0);
  EXPECT_TRUE(f.recent.Erase(nullptr, false, 0x3000));
  EXPECT_TRUE(f.All().empty());
}

// A conservative leak checker scanning our memory must not find the blocks' addresses there.
TEST(RecentBlocksTest, NoWordOfANodeIsABlocksAddress) {
  Fixture f;
  RecentBlocks::Node* node = f.recent.Acquire();
  std::vector<uintptr_t> blocks;
  for (uintptr_t p = 0x7f0000001000; blocks.size() < 64; p += 48) {
    f.recent.Insert(node, p, 40, 9, 0);
    blocks.push_back(p);
  }
  EXPECT_EQ(f.All().size(), 64u);
  const auto* words = reinterpret_cast<const uintptr_t*>(node);
  for (size_t i = 0; i < sizeof(RecentBlocks::Node) / sizeof(uintptr_t); ++i) {
    for (uintptr_t p : blocks) ASSERT_NE(words[i], p) << "word " << i;
  }
}

TEST(RecentBlocksTest, UnknownBlocksAreNowhere) {
  Fixture f;
  RecentBlocks::Node* node = f.recent.Acquire();
  EXPECT_FALSE(f.recent.Erase(node, true, 0x4000));
  EXPECT_FALSE(f.recent.Erase(node, true, 0));
  EXPECT_FALSE(f.recent.Erase(node, true, 0x4001));
}

TEST(RecentBlocksTest, ReleaseMovesTheBlocksToTheTableAndTheNodeIsReused) {
  Fixture f;
  RecentBlocks::Node* node = f.recent.Acquire();
  for (uintptr_t p = 0x8000; p < 0x8000 + 16 * 50; p += 16) f.recent.Insert(node, p, 16, 2, 0);
  const size_t live = f.All().size();
  EXPECT_EQ(live, 50u);
  f.recent.Release(node);
  EXPECT_EQ(f.table.size(), 50u);
  EXPECT_EQ(f.All().size(), 50u);
  EXPECT_EQ(f.recent.Acquire(), node);
}

TEST(RecentBlocksTest, ForkChildMovesOtherThreadsBlocksOnly) {
  Fixture f;
  RecentBlocks::Node* mine = f.recent.Acquire();
  RecentBlocks::Node* gone = f.recent.Acquire();
  f.recent.Insert(mine, 0x5000, 8, 1, 0);
  f.recent.Insert(gone, 0x6000, 8, 1, 0);
  // The other thread stopped halfway through moving a block to the table.
  auto [a, b] = Colliding();
  f.recent.Insert(gone, a, 8, 1, 0);
  std::atomic<uintptr_t>& word = gone->slots[RecentBlocks::SlotOf(a)].addr;
  word.store(word.load() | 1);
  f.recent.ForkChild(mine);
  EXPECT_TRUE(f.table.Find(0x6000, nullptr));
  EXPECT_TRUE(f.table.Find(a, nullptr));
  EXPECT_FALSE(f.table.Find(0x5000, nullptr));
  EXPECT_EQ(f.All().size(), 3u);
  EXPECT_EQ(f.recent.Acquire(), gone);
  (void)b;
}

// Threads allocate, free their own blocks, hand blocks to each other to free, and end (their nodes
// go to the next thread), while a reader walks everything: every free of a live block finds it, and
// at the end exactly the blocks still live are recorded, each once.
TEST(RecentBlocksTest, ConcurrentFreesFromEveryThreadFindEveryBlock) {
  Fixture f;
  constexpr int kThreads = 4;
  constexpr int kRounds = 3;
  constexpr int kOps = 20000;
  std::mutex mu;
  std::vector<uintptr_t> handed[kThreads];  // blocks for thread i to free
  std::map<uintptr_t, uint64_t> live;       // what the test knows is live
  std::atomic<int> missed{0};
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      size_t n = 0;
      f.recent.ForEach([&](const LiveEntry&) { ++n; });
      std::this_thread::yield();
    }
  });
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t, round] {
        RecentBlocks::Node* node = f.recent.Acquire();
        std::mt19937 rng(static_cast<unsigned>(t * 100 + round));
        std::vector<uintptr_t> mine;
        for (int i = 0; i < kOps; ++i) {
          const int what = static_cast<int>(rng() % 8);
          if (what < 4) {
            const uintptr_t p = (uintptr_t{1} + static_cast<uintptr_t>(t)) << 40 |
                                (static_cast<uintptr_t>(round) * kOps + static_cast<uintptr_t>(i)) << 4;
            {
              std::lock_guard<std::mutex> l(mu);
              live[p] = static_cast<uint64_t>(i);
            }
            f.recent.Insert(node, p, static_cast<uint64_t>(i), 1, 0);
            mine.push_back(p);
          } else if (what < 6 && !mine.empty()) {
            const size_t k = rng() % mine.size();
            const uintptr_t p = mine[k];
            mine[k] = mine.back();
            mine.pop_back();
            {
              std::lock_guard<std::mutex> l(mu);
              live.erase(p);
            }
            if (!f.recent.Erase(node, true, p)) missed.fetch_add(1);
          } else if (what == 6 && !mine.empty()) {
            std::lock_guard<std::mutex> l(mu);
            handed[(t + 1) % kThreads].push_back(mine.back());
            mine.pop_back();
          } else {
            std::vector<uintptr_t> todo;
            {
              std::lock_guard<std::mutex> l(mu);
              todo.swap(handed[t]);
              for (uintptr_t p : todo) live.erase(p);
            }
            for (uintptr_t p : todo) {
              if (!f.recent.Erase(node, true, p)) missed.fetch_add(1);
            }
          }
        }
        f.recent.Release(node);
      });
    }
    for (auto& th : threads) th.join();
  }
  done = true;
  reader.join();
  EXPECT_EQ(missed.load(), 0) << "frees that did not find their live block";
  auto all = f.All();
  ASSERT_EQ(all.size(), live.size());
  for (const auto& kv : live) {
    auto it = all.find(kv.first);
    ASSERT_NE(it, all.end());
    EXPECT_EQ(it->second.size, kv.second);
  }
}

}  // namespace
}  // namespace track
}  // namespace poolscope
