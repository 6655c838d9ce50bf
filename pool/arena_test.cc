// File: pool/arena_test.cc
//
// Explicit arenas on the pools (ThreadCache::ArenaCarve, the inline open and close, the closed
// arenas' slot), against a counting fake backend.
#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "pool/fake_backend.h"
#include "pool/pool.h"
#include "pool/thread_cache.h"

namespace poolscope {
namespace pool {
namespace {

TEST(ArenaTest, LazyPoolZeroedAlignedAndReturnedOnClose) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  Arena arena = {};
  EXPECT_EQ(t.backend.pool_allocs, 0);
  int reason = -1;
  void* i = tc.ArenaCarve(&arena, 4, 4, &reason);
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(i) % 4, 0u);
  void* s = tc.ArenaCarve(&arena, 20, 32, &reason);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s) % 32, 0u);
  EXPECT_TRUE(AllZero(s, 20));
  memset(s, 0x77, 20);
  EXPECT_EQ(tc.ArenaCarve(&arena, 65, 8, &reason), nullptr);
  EXPECT_EQ(reason, kMissTooLarge);
  EXPECT_EQ(tc.ArenaCarve(&arena, 8, 128, &reason), nullptr);
  EXPECT_EQ(reason, kMissAlignment);
  EXPECT_EQ(tc.ArenaCarve(&arena, 40, 8, &reason), nullptr);  // 64 - 52 used: does not fit
  EXPECT_EQ(reason, kMissPoolFull);
  // free() of an arena block is invalid and changes nothing.
  EXPECT_EQ(t.domain.FreeSlow(&tc, t.domain.Find(s), s), Domain::FreeResult::kArenaBlock);
  tc.ArenaClosePool(&arena);
  EXPECT_EQ(tc.cached(), 1);
  EXPECT_TRUE(AllZero(s, 20));
  EXPECT_EQ(t.backend.pool_allocs, 1);
}

TEST(ArenaTest, NestedArenasNeverSharePools) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  Arena outer = {}, inner = {};
  int reason;
  void* a = tc.ArenaCarve(&outer, 8, 8, &reason);
  void* b = tc.ArenaCarve(&inner, 8, 8, &reason);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(t.domain.Find(a), t.domain.Find(b));
  tc.ArenaClosePool(&inner);
  void* c = tc.ArenaCarve(&outer, 8, 8, &reason);
  EXPECT_EQ(t.domain.Find(c), t.domain.Find(a));  // outer keeps its own pool
  tc.ArenaClosePool(&outer);
  EXPECT_EQ(tc.cached(), 2);
}

TEST(ArenaTest, OpenCloseLoopReusesArenaStructAndPoolWithoutTheBackend) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  void* first_block = nullptr;
  for (int round = 0; round < 1000; ++round) {
    Arena* a = tc.NewArena();
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->pool, nullptr);  // lazy: a reused struct comes back empty
    void* i = tc.ArenaTryCarve(a, 4, 4);
    if (i == nullptr) {  // the very first round: no cached pool yet, ArenaCarve creates one
      int reason = -1;
      i = tc.ArenaCarve(a, 4, 4, &reason);
    }
    ASSERT_NE(i, nullptr);
    void* b = tc.ArenaTryCarve(a, 20, 1);
    ASSERT_NE(b, nullptr);
    EXPECT_TRUE(AllZero(i, 4)) << "round " << round;
    EXPECT_TRUE(AllZero(b, 20)) << "round " << round;
    memset(i, 0x5A, 4);
    memset(b, 0x5A, 20);
    if (first_block == nullptr) first_block = i;
    EXPECT_EQ(i, first_block);  // the same pool each round, carved from its start
    tc.ArenaClosePool(a);
    tc.DeleteArena(a);
  }
  EXPECT_EQ(t.backend.pool_allocs, 1);
  EXPECT_EQ(t.backend.meta_allocs, 1);  // one arena struct (pool headers live in the pools' own blocks)
  EXPECT_EQ(tc.stats().hits, 2000u);
  EXPECT_EQ(tc.stats().pooled_frees, 2000u);
  EXPECT_EQ(tc.stats().pools_reused, 999u);
  tc.Shutdown();
  EXPECT_EQ(t.backend.meta_frees, t.backend.meta_allocs.load());
}

TEST(ArenaTest, InlineCarveRefusesWhatOnlyTheSlowPathCanAnswer) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  Arena* a = tc.NewArena();
  EXPECT_EQ(tc.ArenaTryCarve(a, 8, 8), nullptr);  // no cached pool: creating one is ArenaCarve's
  int reason = -1;
  ASSERT_NE(tc.ArenaCarve(a, 8, 8, &reason), nullptr);
  EXPECT_EQ(tc.ArenaTryCarve(a, 8, 128), nullptr);  // alignment above a cache line
  EXPECT_EQ(tc.ArenaTryCarve(a, 8, 24), nullptr);   // not a power of two
  EXPECT_EQ(tc.ArenaTryCarve(a, 65, 8), nullptr);   // larger than the pool
  EXPECT_EQ(tc.ArenaTryCarve(a, ~size_t{0} - 3, 8), nullptr);  // would wrap around
  void* p = tc.ArenaTryCarve(a, 0, 1);
  ASSERT_NE(p, nullptr);  // size 0 still gets a distinct granule
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 8, 0u);
  tc.ArenaClosePool(a);
  tc.DeleteArena(a);
  EXPECT_EQ(tc.free_arenas(), 1);
}

// The inline carve takes a cached pool on the arena's first request, off its no-room branch: only for a
// request that fits a pool (a size whose rounding wraps must not take one and carve nothing), and with
// alignment 0 meaning 16.
TEST(ArenaTest, InlineCarveTakesACachedPoolOnlyForARequestThatFits) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  Arena* first = tc.NewArena();
  int reason = -1;
  ASSERT_NE(tc.ArenaCarve(first, 8, 8, &reason), nullptr);
  tc.ArenaClosePool(first);
  tc.DeleteArena(first);
  ASSERT_EQ(tc.cached(), 1);
  Arena* a = tc.NewArena();
  EXPECT_EQ(tc.ArenaTryCarve(a, ~size_t{0} - 3, 8), nullptr);  // size + 7 wraps to 0
  EXPECT_EQ(tc.ArenaTryCarve(a, 65, 8), nullptr);
  EXPECT_EQ(tc.ArenaTryCarve(a, 8, 24), nullptr);
  EXPECT_EQ(tc.cached(), 1);
  EXPECT_EQ(a->pool, nullptr);
  EXPECT_EQ(tc.stats().pools_reused, 0u);
  void* p = tc.ArenaTryCarve(a, 4, 1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(tc.cached(), 0);
  EXPECT_EQ(tc.stats().pools_reused, 1u);
  EXPECT_EQ(p, a->pool_base);
  EXPECT_EQ(a->pool_base, t.domain.BaseOf(a->pool));
  void* q = tc.ArenaTryCarve(a, 4, 0);  // 0: 16-aligned
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(static_cast<char*>(q), a->pool_base + 16);
  EXPECT_EQ(tc.stats().hits, 3u);
  EXPECT_EQ(a->pooled_blocks, 2u);
  tc.ArenaClosePool(a);
  tc.DeleteArena(a);
}

bool ArenaIsEmpty(const Arena* a) {
  return a->pool == nullptr && a->cur == nullptr && a->end == nullptr && a->regular == nullptr &&
         a->pooled_blocks == 0 && a->regular_blocks == 0 && a->track == nullptr;
}

// The inline close zeroes the pool's first line with fixed stores (a carve that ended inside it), gives
// the pool back and keeps the struct, empty, for the next open, which hands it out as it is.
TEST(ArenaTest, InlineCloseZeroesTheLineAndKeepsAnEmptyStruct) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  Arena* a = tc.NewArena();
  int reason = -1;
  char* p[3] = {static_cast<char*>(tc.ArenaCarve(a, 4, 4, &reason)),
                static_cast<char*>(tc.ArenaTryCarve(a, 20, 1)), static_cast<char*>(tc.ArenaTryCarve(a, 30, 2))};
  for (char* q : p) ASSERT_NE(q, nullptr);
  EXPECT_EQ(a->cur, a->pool_base + 64);  // 8 + 24 + 32: the whole line
  memset(p[0], 0x5A, 8);
  memset(p[1], 0x5A, 24);
  memset(p[2], 0x5A, 32);
  char* base = a->pool_base;
  ASSERT_TRUE(tc.TryCloseArena(a));
  EXPECT_TRUE(AllZero(base, 64));
  // The struct keeps its pool, empty, for the next open; the pool counts as cached.
  EXPECT_EQ(a->pool, t.domain.Find(base));
  EXPECT_EQ(a->cur, base);
  EXPECT_EQ(a->pooled_blocks, 0u);
  EXPECT_EQ(a->regular, nullptr);
  EXPECT_EQ(tc.cached(), 1);
  EXPECT_EQ(tc.free_arenas(), 1);
  EXPECT_EQ(tc.stats().pooled_frees, 3u);
  EXPECT_EQ(t.domain.Find(base)->kind.load(), kExplicit);
  EXPECT_EQ(tc.NewArena(), a);
  EXPECT_EQ(tc.free_arenas(), 0);
  EXPECT_EQ(tc.cached(), 0);
  // Its first block comes from that pool, without taking one from the cache.
  const uint64_t reused = tc.stats().pools_reused;
  EXPECT_EQ(tc.ArenaTryCarve(a, 8, 8), base);
  EXPECT_EQ(tc.stats().pools_reused, reused);
  EXPECT_TRUE(AllZero(base, 64));
  ASSERT_TRUE(tc.TryCloseArena(a));
  EXPECT_EQ(tc.stats().pooled_frees, 4u);
  EXPECT_EQ(tc.NewArena(), a);
  // An arena that never allocated closes inline too, its kept pool untouched.
  ASSERT_TRUE(tc.TryCloseArena(a));
  EXPECT_EQ(tc.cached(), 1);
  EXPECT_EQ(tc.stats().pooled_frees, 4u);
  EXPECT_EQ(t.backend.meta_allocs, 1);  // one arena struct (pool headers live in the pools' own blocks)
  EXPECT_EQ(t.backend.pool_allocs, 1);
  // The thread's end releases the kept pool with the struct.
  tc.Shutdown();
  EXPECT_EQ(t.backend.live_pools(), 0);
  EXPECT_EQ(tc.cached(), 0);
}

// What the inline close cannot do in fixed stores (carved bytes past the first line, a full pool cache)
// it leaves alone; the long way (ArenaClosePool, DeleteArena) zeroes what was carved and empties the
// struct as well, regular blocks included.
TEST(ArenaTest, InlineCloseLeavesTheRestToTheLongWay) {
  TestDomain t(Cfg(256, 0));  // pools=0: the cache keeps nothing
  ThreadCache tc(&t.domain);
  Arena* a = tc.NewArena();
  int reason = -1;
  char* big = static_cast<char*>(tc.ArenaCarve(a, 100, 8, &reason));
  ASSERT_NE(big, nullptr);
  memset(big, 0x5A, 100);
  EXPECT_FALSE(tc.TryCloseArena(a));  // 104 bytes carved
  EXPECT_EQ(a->pool, t.domain.Find(big));
  EXPECT_EQ(a->pooled_blocks, 1u);
  EXPECT_EQ(tc.free_arenas(), 0);
  RegularBlock node = {nullptr, nullptr};
  a->regular = &node;  // as the shim links a block of the regular path
  a->regular_blocks = 1;
  tc.ArenaClosePool(a);
  EXPECT_EQ(t.backend.pool_frees, 1);  // pools=0: released
  tc.DeleteArena(a);
  EXPECT_EQ(tc.NewArena(), a);
  EXPECT_TRUE(ArenaIsEmpty(a));
  // A small carve with nowhere to cache the pool: also the long way.
  ASSERT_NE(tc.ArenaCarve(a, 8, 8, &reason), nullptr);
  EXPECT_FALSE(tc.TryCloseArena(a));
  EXPECT_NE(a->pool, nullptr);
  tc.ArenaClosePool(a);
  tc.DeleteArena(a);
  EXPECT_EQ(t.backend.live_pools(), 0);
}

// The open-close loop keeps its struct in the slot: off the list and its counts, given back by the next
// open before anything on the list. A second arena closed while the slot is taken goes onto the list;
// a closed slot (AllowArenaSlot(false)) moves its struct there and refuses more, and opens again.
TEST(ArenaTest, SlotKeepsTheLastClosedStructApartFromTheList) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  Arena* a = tc.NewArena();
  Arena* b = tc.NewArena();
  ASSERT_NE(a, b);
  int reason = -1;
  char* pa = static_cast<char*>(tc.ArenaCarve(a, 8, 8, &reason));
  char* pb = static_cast<char*>(tc.ArenaCarve(b, 8, 8, &reason));
  ASSERT_NE(pa, nullptr);
  ASSERT_NE(pb, nullptr);
  memset(pa, 0x5A, 8);
  memset(pb, 0x5A, 8);
  ASSERT_TRUE(tc.TryCloseArenaInSlot(b));
  EXPECT_TRUE(AllZero(pb, 8));
  EXPECT_EQ(tc.free_arenas(), 1);
  EXPECT_EQ(tc.cached(), 1);  // b's pool, kept with it
  EXPECT_FALSE(tc.TryCloseArenaInSlot(a));  // the slot is taken
  EXPECT_EQ(a->pooled_blocks, 1u);          // and a untouched
  ASSERT_TRUE(tc.TryCloseArena(a));         // onto the list
  EXPECT_EQ(tc.free_arenas(), 2);
  EXPECT_EQ(tc.cached(), 2);
  EXPECT_EQ(tc.stats().pooled_frees, 2u);
  EXPECT_EQ(tc.TryReuseSlotArena(), b);
  EXPECT_EQ(tc.TryReuseSlotArena(), nullptr);  // the list is not the slot's
  EXPECT_EQ(tc.free_arenas(), 1);
  EXPECT_EQ(tc.cached(), 1);
  EXPECT_EQ(tc.NewArena(), a);
  EXPECT_EQ(tc.free_arenas(), 0);
  EXPECT_EQ(tc.cached(), 0);
  // Closed slot: its struct goes onto the list, and a close there is refused until it opens again.
  ASSERT_TRUE(tc.TryCloseArenaInSlot(b));
  tc.AllowArenaSlot(false);
  EXPECT_EQ(tc.TryReuseSlotArena(), nullptr);
  EXPECT_EQ(tc.free_arenas(), 1);
  EXPECT_EQ(tc.cached(), 1);
  EXPECT_FALSE(tc.TryCloseArenaInSlot(a));
  ASSERT_TRUE(tc.TryCloseArena(a));  // the list still takes it
  EXPECT_EQ(tc.free_arenas(), 2);
  tc.AllowArenaSlot(true);
  EXPECT_EQ(tc.NewArena(), a);  // the list's head, LIFO
  ASSERT_TRUE(tc.TryCloseArenaInSlot(a));
  EXPECT_EQ(tc.TryReuseSlotArena(), a);
  ASSERT_TRUE(tc.TryCloseArenaInSlot(a));
  // The thread's end releases both structs and both pools.
  tc.Shutdown();
  EXPECT_EQ(tc.free_arenas(), 0);
  EXPECT_EQ(tc.cached(), 0);
  EXPECT_EQ(t.backend.live_pools(), 0);
  EXPECT_EQ(t.backend.meta_frees, t.backend.meta_allocs.load());
  EXPECT_EQ(tc.TryReuseSlotArena(), nullptr);
  tc.AllowArenaSlot(true);  // a dead thread's slot stays closed
  Arena* c = tc.NewArena();
  EXPECT_FALSE(tc.TryCloseArenaInSlot(c));
  tc.DeleteArena(c);
  EXPECT_EQ(t.backend.meta_frees, t.backend.meta_allocs.load());
}

// With pools=0 the slot is closed: no arena keeps a pool.
TEST(ArenaTest, NoPoolsNoSlot) {
  TestDomain t(Cfg(64, 0));
  ThreadCache tc(&t.domain);
  Arena* a = tc.NewArena();
  EXPECT_FALSE(tc.TryCloseArenaInSlot(a));
  tc.DeleteArena(a);
  EXPECT_EQ(tc.TryReuseSlotArena(), nullptr);
  EXPECT_EQ(tc.NewArena(), a);
}

// Once its thread is ending, a cache keeps neither pools nor arena structs: an arena closed after that
// (from a later thread-exit destructor) releases both, and the inline close leaves it to the long way.
TEST(ArenaTest, ArenaClosedAfterShutdownReleasesItsPoolAndStruct) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  Arena* a = tc.NewArena();
  int reason = -1;
  ASSERT_NE(tc.ArenaCarve(a, 8, 8, &reason), nullptr);
  tc.Shutdown();
  EXPECT_FALSE(tc.TryCloseArena(a));
  tc.ArenaClosePool(a);
  tc.DeleteArena(a);
  EXPECT_EQ(tc.cached(), 0);
  EXPECT_EQ(tc.free_arenas(), 0);
  EXPECT_EQ(t.backend.live_pools(), 0);
  EXPECT_EQ(t.backend.meta_frees, t.backend.meta_allocs.load());
}

}  // namespace
}  // namespace pool
}  // namespace poolscope
