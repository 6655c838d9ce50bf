// File: pool/pool_info_test.cc
//
// What leak tracking keeps of each pooled block beside its pool's marks (Config::block_info): the
// BlockInfo words, where they lie, and the walk that reads them back.
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "pool/fake_backend.h"
#include "pool/pool.h"
#include "pool/thread_cache.h"

namespace poolscope {
namespace pool {
namespace {

std::map<void*, BlockInfo> LiveBlocks(const Domain& d) {
  std::map<void*, BlockInfo> out;
  d.ForEachLiveBlock([&](void* p, BlockInfo info) {
    EXPECT_TRUE(out.emplace(p, info).second) << "block " << p << " listed twice";
  });
  return out;
}

// A wide BlockInfo word: sizes up to the largest pool and every id, and the words beside it stay.
TEST(BlockInfoTest, SizesUpToTheLargestPoolAndEveryStackIdRoundTrip) {
  std::atomic<uint64_t> words[3] = {};
  const InfoRef slot{reinterpret_cast<char*>(&words[1]), true};
  for (uint32_t size : {0u, 1u, 65535u, 65536u, 1u << 20}) {
    for (uint32_t id : {0u, 2u, 0x12345678u, ~0u}) {
      StoreBlockInfo(slot, size, id);
      EXPECT_EQ(LoadBlockInfo(slot).size, size);
      EXPECT_EQ(LoadBlockInfo(slot).stack_id, id);
      EXPECT_EQ(words[0].load(), 0u) << "the word before was overwritten";
      EXPECT_EQ(words[2].load(), 0u) << "the word after was overwritten";
    }
  }
}

// A compact word: every size a compact pool holds and every id below kCompactStackIds, in 4 bytes that
// leave their neighbours alone; and a written word never reads as an address below 2 GiB, alone or as
// either half of 8 bytes.
TEST(BlockInfoTest, CompactWordsHoldEverySizeOfTheirPoolsAndEveryId) {
  std::atomic<uint32_t> words[4] = {};
  const InfoRef slot{reinterpret_cast<char*>(&words[1]), false};
  for (uint32_t size : {0u, 1u, 16u, 64u, 1000u, static_cast<uint32_t>(kCompactInfoMaxSize)}) {
    for (uint32_t id : {0u, 1u, 2u, 0x12345u, kCompactStackIds - 1}) {
      StoreBlockInfo(slot, size, id);
      EXPECT_EQ(LoadBlockInfo(slot).size, size);
      EXPECT_EQ(LoadBlockInfo(slot).stack_id, id);
      EXPECT_EQ(words[0].load(), 0u) << "the word before was overwritten";
      EXPECT_EQ(words[2].load(), 0u) << "the word after was overwritten";
      EXPECT_GE(words[1].load(), 0x80000000u);
      uint64_t pair;
      memcpy(&pair, &words[0], 8);
      EXPECT_GE(pair, uint64_t{1} << 63) << "the word as the high half";
      memcpy(&pair, &words[1], 8);
      EXPECT_GE(pair, uint64_t{0x80000000}) << "the word as the low half";
    }
  }
  // A word never written reads as nothing.
  EXPECT_EQ(LoadBlockInfo(InfoRef{reinterpret_cast<char*>(&words[2]), false}).size, 0u);
  EXPECT_EQ(LoadBlockInfo(InfoRef{reinterpret_cast<char*>(&words[2]), false}).stack_id, 0u);
}

// A block that fills its pool keeps its whole size, whatever the pool's size (compact words up to
// kCompactInfoMaxSize, wide ones past it), and blocks on every slot keep their own words (a word per
// 16 bytes, or per 8 with malloc_align=8).
TEST(BlockInfoTest, EverySlotKeepsItsOwnWord) {
  for (size_t pool_size : {size_t{64}, kCompactInfoMaxSize, kCompactInfoMaxSize + 1, size_t{1} << 16, kMaxPoolSize}) {
    TestDomain t(TrackedCfg(pool_size));
    ThreadCache tc(&t.domain);
    const uint32_t n = static_cast<uint32_t>(pool_size & ~size_t{15});  // (what the shim pools of it)
    void* b = tc.Carve(n);
    ASSERT_NE(b, nullptr);
    NoteCarved(tc, b, n, 4);
    auto got = LiveBlocks(t.domain);
    ASSERT_EQ(got.size(), 1u) << pool_size;
    EXPECT_EQ(got[b].size, n) << pool_size;
    EXPECT_EQ(got[b].stack_id, 4u) << pool_size;
    EXPECT_EQ(tc.Free(t.domain.Find(b), b), Domain::FreeResult::kFreed);
    tc.Shutdown();
  }
  for (bool align8 : {false, true}) {
    Config c = TrackedCfg(64);
    c.align8 = align8;
    TestDomain t(c);
    ThreadCache tc(&t.domain);
    std::vector<void*> blocks;
    for (uint32_t i = 0; i < (align8 ? 8u : 4u); ++i) {
      void* b = tc.Carve(8);
      ASSERT_NE(b, nullptr);
      NoteCarved(tc, b, 5 + i, 100 + i);
      blocks.push_back(b);
    }
    auto got = LiveBlocks(t.domain);
    ASSERT_EQ(got.size(), blocks.size()) << align8;
    for (uint32_t i = 0; i < blocks.size(); ++i) {
      EXPECT_EQ(got[blocks[i]].size, 5 + i) << align8;
      EXPECT_EQ(got[blocks[i]].stack_id, 100 + i) << align8;
    }
    for (void* b : blocks) EXPECT_EQ(tc.Free(t.domain.Find(b), b), Domain::FreeResult::kFreed);
    tc.Shutdown();
  }
}

// The walk lists exactly the live blocks with what was noted of each: not the blocks freed by their
// thread (last or not), nor one freed by another thread and not folded in yet, nor a released pool's,
// and it keeps listing a retired pool's and an orphaned pool's live blocks.
TEST(BlockInfoTest, TheWalkListsExactlyTheLiveBlocks) {
  TestDomain t(TrackedCfg(64, 1));
  ThreadCache tc(&t.domain), other(&t.domain);
  std::map<void*, BlockInfo> want;
  auto carve = [&](ThreadCache& c, uint32_t n, uint32_t id) {
    void* p = c.Carve(n);
    EXPECT_NE(p, nullptr);
    NoteCarved(c, p, n, id);
    want[p] = BlockInfo{n, id};
    return p;
  };
  auto free_block = [&](ThreadCache& c, void* p) {
    EXPECT_EQ(c.Free(t.domain.Find(p), p), Domain::FreeResult::kFreed);
    want.erase(p);
  };
  void* a = carve(tc, 5, 100);
  void* b = carve(tc, 20, 101);
  void* c = carve(tc, 16, 102);
  free_block(tc, b);      // a free of the owner's, not the last block
  free_block(other, a);   // another thread's: the remote bit is set, the mark still says live
  void* d = carve(tc, 16, 103);
  free_block(tc, d);      // the LIFO free of the block carved last
  PoolHeader* first = t.domain.Find(c);
  void* e = carve(tc, 48, 104);  // does not fit: the first pool retires holding c
  EXPECT_NE(t.domain.Find(e), first);
  auto got = LiveBlocks(t.domain);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [p, info] : want) {
    ASSERT_TRUE(got.count(p)) << "live block " << p << " (stack " << info.stack_id << ") not listed";
    EXPECT_EQ(got[p].size, info.size);
    EXPECT_EQ(got[p].stack_id, info.stack_id);
  }
  // The retired pool's last block freed by the other thread: that pool goes to its cache, and its
  // slot lists nothing.
  free_block(other, c);
  // The thread ends with e live: its pool is orphaned, and e stays listed.
  tc.Shutdown();
  got = LiveBlocks(t.domain);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got.begin()->first, e);
  EXPECT_EQ(got.begin()->second.stack_id, 104u);
  free_block(other, e);
  EXPECT_TRUE(LiveBlocks(t.domain).empty());
  other.Shutdown();
}

// A realloc that shrinks a block in place notes its new size and stack on the block's pool, which
// need not be the calling thread's current one.
TEST(BlockInfoTest, NoteBlockUpdatesABlockOfAnyPool) {
  TestDomain t(TrackedCfg());
  ThreadCache tc(&t.domain);
  void* p = tc.Carve(40);
  NoteCarved(tc, p, 40, 7);
  for (int i = 0; i < 4; ++i) tc.Carve(16);  // p's pool retires
  PoolHeader* h = t.domain.Find(p);
  ASSERT_NE(h, tc.current());
  t.domain.NoteBlock(h, p, 12, 9);
  auto got = LiveBlocks(t.domain);
  ASSERT_TRUE(got.count(p));
  EXPECT_EQ(got[p].size, 12u);
  EXPECT_EQ(got[p].stack_id, 9u);
}

// The slot InfoSlot gives stays the block's after its pool retires and another is current: what the
// shim relies on when a signal handler allocates during the stack capture between the carve and the
// store. (NoteCarved at that point would write beside the new pool's marks.)
TEST(BlockInfoTest, InfoSlotStaysTheBlocksWhenThePoolChanges) {
  TestDomain t(TrackedCfg());
  ThreadCache tc(&t.domain);
  void* p = tc.Carve(24);
  InfoRef slot = tc.InfoSlot(p);
  PoolHeader* first = tc.current();
  for (int i = 0; i < 3; ++i) NoteCarved(tc, tc.Carve(48), 48, 50);  // p's pool retires
  ASSERT_NE(tc.current(), first);
  StoreBlockInfo(slot, 24, 77);
  auto got = LiveBlocks(t.domain);
  ASSERT_TRUE(got.count(p));
  EXPECT_EQ(got[p].size, 24u);
  EXPECT_EQ(got[p].stack_id, 77u);
  EXPECT_EQ(got.size(), 4u);
}

// Pools by the thousand: the pool list grows by chunks, the walk finds every pool's block, and
// released pools' entries are reused without their old blocks coming back.
TEST(BlockInfoTest, TheWalkCoversEveryChunkAndReusedSlots) {
  TestDomain t(TrackedCfg(64, 0));
  ThreadCache tc(&t.domain);
  // 48-byte blocks: one a pool, three chunks of the pool list.
  constexpr int kBlocks = static_cast<int>(2 * Domain::kListChunkEntries + 2000);
  std::vector<void*> blocks;
  for (int i = 0; i < kBlocks; ++i) {
    void* p = tc.Carve(48);
    ASSERT_NE(p, nullptr);
    NoteCarved(tc, p, 48, static_cast<uint32_t>(i));
    blocks.push_back(p);
  }
  EXPECT_GE(t.backend.leaves, 3);
  auto got = LiveBlocks(t.domain);
  ASSERT_EQ(got.size(), static_cast<size_t>(kBlocks));
  for (int i = 0; i < kBlocks; ++i) ASSERT_EQ(got[blocks[i]].stack_id, static_cast<uint32_t>(i));
  // Free the even blocks (their pools are released: the cache holds none), then carve again into the
  // reused slots.
  for (int i = 0; i < kBlocks; i += 2) ASSERT_EQ(tc.Free(t.domain.Find(blocks[i]), blocks[i]), Domain::FreeResult::kFreed);
  const long leaves = t.backend.leaves;
  for (int i = 0; i < kBlocks / 2; ++i) {
    void* p = tc.Carve(40);
    ASSERT_NE(p, nullptr);
    NoteCarved(tc, p, 40, 1000000u + static_cast<uint32_t>(i));
  }
  EXPECT_EQ(t.backend.leaves, leaves) << "released pools' slots were not reused";
  got = LiveBlocks(t.domain);
  ASSERT_EQ(got.size(), static_cast<size_t>(kBlocks));
  size_t old_blocks = 0;
  for (const auto& [p, info] : got) {
    if (info.stack_id < 1000000u) {
      ++old_blocks;
      EXPECT_EQ(info.size, 48u);
      EXPECT_EQ(info.stack_id % 2, 1u) << "a freed block came back";
    } else {
      EXPECT_EQ(info.size, 40u);
    }
  }
  EXPECT_EQ(old_blocks, static_cast<size_t>(kBlocks / 2));
}

// The walk lists pools in the order they were made, chunk after chunk (the exit scan sorts the pools,
// and their blocks, by address in one pass when they come mostly in order).
TEST(BlockInfoTest, TheWalkListsPoolsInTheOrderTheyWereMade) {
  TestDomain t(TrackedCfg(64, 0));
  ThreadCache tc(&t.domain);
  constexpr int kBlocks = static_cast<int>(2 * Domain::kListChunkEntries + 2000);  // one pool each, three chunks
  std::vector<void*> made;
  for (int i = 0; i < kBlocks; ++i) {
    void* p = tc.Carve(48);
    ASSERT_NE(p, nullptr);
    made.push_back(p);
  }
  ASSERT_GE(t.backend.leaves, 3);
  std::vector<void*> walked;
  t.domain.ForEachLiveBlock([&](void* p, BlockInfo) { walked.push_back(p); });
  ASSERT_EQ(walked.size(), made.size());
  for (size_t i = 0; i < made.size(); ++i) ASSERT_EQ(walked[i], made[i]) << "at " << i;
}

// A pool goes from implicit use to the cache, to an arena, and back: the walk relies on a cached
// pool having no live mark left, so a pool an arena takes lists nothing of its implicit past, and
// one that comes back lists only what is carved from it afterwards.
TEST(BlockInfoTest, APoolsPastBlocksNeverComeBack) {
  TestDomain t(TrackedCfg(64, 2));
  ThreadCache tc(&t.domain);
  void* a = tc.Carve(16);
  void* b = tc.Carve(16);
  NoteCarved(tc, a, 16, 5);
  NoteCarved(tc, b, 16, 6);
  PoolHeader* first = tc.current();
  for (int i = 0; i < 3; ++i) NoteCarved(tc, tc.Carve(40), 40, 7);  // `first` retires holding a, b
  ASSERT_EQ(tc.Free(first, a), Domain::FreeResult::kFreed);
  ASSERT_EQ(tc.Free(first, b), Domain::FreeResult::kFreed);  // emptied: into the cache
  for (const auto& [p, info] : LiveBlocks(t.domain)) EXPECT_EQ(info.stack_id, 7u) << p;
  Arena* arena = tc.NewArena();
  int reason = -1;
  void* x = tc.ArenaCarve(arena, 16, 16, &reason);
  ASSERT_NE(x, nullptr);
  for (const auto& [p, info] : LiveBlocks(t.domain)) EXPECT_NE(t.domain.Find(p), t.domain.Find(x)) << p;
  tc.ArenaClosePool(arena);
  tc.DeleteArena(arena);
  EXPECT_EQ(LiveBlocks(t.domain).size(), 3u);
}

// fork() child: the pools of a thread fork() did not copy keep their live blocks, which are the
// child's memory too (their leaks are reported; interrupted_by_fork accounts for the pools).
TEST(BlockInfoTest, AnAbandonedThreadsBlocksAreStillListed) {
  TestDomain t(TrackedCfg());
  ThreadCache self(&t.domain), gone(&t.domain);
  void* p = gone.Carve(24);
  NoteCarved(gone, p, 24, 31);
  self.ResetAtFork();
  gone.AbandonAtFork();
  auto got = LiveBlocks(t.domain);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[p].size, 24u);
  EXPECT_EQ(got[p].stack_id, 31u);
}

// An explicit arena's blocks are tracked by the arena, not listed by the walk.
TEST(BlockInfoTest, ArenaBlocksAreNotListed) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  Arena* a = tc.NewArena();
  int reason = -1;
  ASSERT_NE(tc.ArenaCarve(a, 24, 8, &reason), nullptr);  // takes a pool
  ASSERT_NE(tc.ArenaTryCarve(a, 16, 16), nullptr);
  EXPECT_TRUE(LiveBlocks(t.domain).empty());
  tc.ArenaClosePool(a);
  tc.DeleteArena(a);
}

}  // namespace
}  // namespace pool
}  // namespace poolscope
