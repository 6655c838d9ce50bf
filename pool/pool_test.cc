// File: pool/pool_test.cc
//
// Single-threaded tests of the pools against a counting fake backend.
#include "pool/pool.h"
#include "pool/thread_cache.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "pool/fake_backend.h"
#include "track/populate.h"

namespace poolscope {
namespace pool {
namespace {

TEST(PoolTest, FirstCarveCreatesOneZeroedPool) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  EXPECT_EQ(t.backend.pool_allocs, 0);  // lazy: nothing before the first request
  void* p = tc.Carve(5);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
  EXPECT_EQ(t.backend.pool_allocs, 1);
  EXPECT_TRUE(AllZero(p, 16)) << "the backend filled the pool with 0xA5; the pool must zero it";
  EXPECT_EQ(t.domain.Find(p), tc.current());
  EXPECT_EQ(tc.stats().hits, 1u);
  EXPECT_EQ(tc.stats().pools_created, 1u);
}

TEST(PoolTest, MillionSmallAllocFreePairsUseOnePool) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  for (int i = 0; i < 1000000; ++i) {
    void* p = tc.Carve(5);
    ASSERT_NE(p, nullptr);
    static_cast<char*>(p)[0] = 1;
    ASSERT_EQ(tc.Free(t.domain.Find(p), p), Domain::FreeResult::kFreed);
  }
  EXPECT_EQ(t.backend.pool_allocs, 1);
  EXPECT_EQ(tc.stats().hits, 1000000u);
  EXPECT_EQ(tc.stats().pooled_frees, 1000000u);
  EXPECT_EQ(tc.stats().resets_in_place, 1000000u);
}

TEST(PoolTest, RealPointersAreNotFound) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  void* pooled = tc.Carve(8);
  std::vector<void*> real;
  for (int i = 0; i < 100; ++i) real.push_back(malloc(static_cast<size_t>(i % 70) + 1));
  for (void* r : real) EXPECT_EQ(t.domain.Find(r), nullptr);
  for (void* r : real) free(r);
  EXPECT_NE(t.domain.Find(pooled), nullptr);
  EXPECT_EQ(t.domain.Find(nullptr), nullptr);
}

TEST(PoolTest, FullPoolRetiresAndEmptiedPoolGoesToCacheZeroed) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  void* a[4];
  for (auto& p : a) {
    p = tc.Carve(16);
    memset(p, 0x5E, 16);  // secrets
  }
  PoolHeader* first = tc.current();
  void* b = tc.Carve(16);  // no room: the first pool retires with 4 live blocks
  EXPECT_NE(t.domain.Find(b), first);
  EXPECT_EQ(t.backend.pool_allocs, 2);
  EXPECT_EQ(tc.cached(), 0);
  for (auto& p : a) EXPECT_EQ(tc.Free(t.domain.Find(p), p), Domain::FreeResult::kFreed);
  EXPECT_EQ(tc.cached(), 1);           // the last free emptied it
  EXPECT_TRUE(AllZero(a[0], 64));      // and it was zeroed
  EXPECT_EQ(t.backend.pool_frees, 0);  // kept, not released
  // Fill the second pool so the next pool comes from the cache.
  for (int i = 0; i < 3; ++i) tc.Carve(16);
  void* c = tc.Carve(16);
  EXPECT_EQ(t.domain.Find(c), first);
  EXPECT_EQ(tc.stats().pools_reused, 1u);
  EXPECT_TRUE(AllZero(c, 64));
}

TEST(PoolTest, CacheFullReleases) {
  TestDomain t(Cfg(64, 1));
  ThreadCache tc(&t.domain);
  std::vector<void*> blocks;
  for (int i = 0; i < 4 * 4; ++i) blocks.push_back(tc.Carve(16));  // fills 4 pools
  blocks.push_back(tc.Carve(16));                                  // a fifth pool becomes current
  EXPECT_EQ(t.backend.pool_allocs, 5);
  for (int i = 0; i < 16; ++i) tc.Free(t.domain.Find(blocks[i]), blocks[i]);
  EXPECT_EQ(tc.cached(), 1);
  EXPECT_EQ(t.backend.pool_frees, 3);
  EXPECT_EQ(tc.stats().pools_released, 3u);
}

// A released pool goes back to the allocator as the very block AllocPool gave, wherever the
// allocator's alignment put the pool in it (the fake's blocks start 0, 16, 32 and 48 bytes past a
// line in turn), with tracking's words in it or without.
TEST(PoolTest, ReleasedPoolsGoBackAsTheBlocksTheAllocatorGave) {
  for (const Config& config : {Cfg(64, 0), TrackedCfg(64, 0)}) {
    TestDomain t(config);  // no cache: every emptied pool is released
    ThreadCache tc(&t.domain);
    std::vector<void*> blocks;
    for (int i = 0; i < 8; ++i) blocks.push_back(tc.Carve(64));  // each fills a pool of its own
    for (void* b : blocks) EXPECT_EQ(tc.Free(t.domain.Find(b), b), Domain::FreeResult::kFreed);
    tc.Shutdown();
    EXPECT_EQ(t.backend.pool_frees, 8);
    EXPECT_EQ(t.backend.unknown_pool_frees, 0);
    EXPECT_EQ(t.backend.live_pools(), 0);
  }
}

// A released pool's entry in the pool list keeps no pointer into it (a detector below that scans the
// list must not find one at memory the allocator hands out again); a live pool's entry points at the
// start of its real block, and nowhere else.
TEST(PoolTest, ThePoolListPointsAtLivePoolsAlone) {
  TestDomain t(Cfg(64, 1));
  ThreadCache tc(&t.domain);
  std::vector<void*> blocks;
  for (int i = 0; i < 4 * 4; ++i) blocks.push_back(tc.Carve(16));  // fills 4 pools
  void* live = tc.Carve(16);                                        // a fifth pool becomes current
  std::map<uintptr_t, uintptr_t> real_of;  // base -> real block, of every pool made
  t.domain.ForEachPool([&](char* base, bool, void* real) {
    real_of[reinterpret_cast<uintptr_t>(base)] = reinterpret_cast<uintptr_t>(real);
  });
  ASSERT_EQ(real_of.size(), 5u);
  for (int i = 0; i < 16; ++i) tc.Free(t.domain.Find(blocks[i]), blocks[i]);
  ASSERT_EQ(tc.stats().pools_released, 3u);
  std::vector<uintptr_t> existing, released;
  t.domain.ForEachPool([&](char* base, bool, void*) { existing.push_back(reinterpret_cast<uintptr_t>(base)); });
  for (int i = 0; i < 16; i += 4) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(blocks[i]);
    if (std::find(existing.begin(), existing.end(), base) == existing.end()) released.push_back(real_of[base]);
  }
  ASSERT_EQ(released.size(), 3u);
  const uintptr_t live_real = real_of[reinterpret_cast<uintptr_t>(live)];
  ASSERT_NE(live_real, 0u);
  int chunks = 0, at_live_start = 0;
  t.domain.ForEachMetaChunk([&](uintptr_t b, uintptr_t e) {
    ++chunks;
    // Only what has been taken of the chunk is touched; the rest of the reservation reads as zeros.
    for (const uint64_t* w = reinterpret_cast<const uint64_t*>(b); reinterpret_cast<uintptr_t>(w) < e; ++w) {
      if (*w == 0) continue;
      for (uintptr_t r : released) {
        EXPECT_FALSE(*w >= r && *w < r + t.domain.real_bytes()) << std::hex << *w << " points into a released pool";
      }
      if (*w == live_real) ++at_live_start;
    }
  });
  EXPECT_EQ(chunks, 1);
  EXPECT_EQ(at_live_start, 1);
  tc.Free(t.domain.Find(live), live);
}

// Each part of the pool list counts at least the pools a walk of that part finds (exactly as many while
// none was released), over more than one chunk of the list, and the parts add up to the whole.
TEST(PoolTest, EachPartOfThePoolListCountsThePoolsItsWalkFinds) {
  TestDomain t(Cfg(64, 1));
  ThreadCache tc(&t.domain);
  const size_t npools = 2 * Domain::kListChunkEntries + 100;
  std::vector<void*> blocks;
  for (size_t i = 0; i < 4 * npools; ++i) blocks.push_back(tc.Carve(16));
  auto walked = [&](size_t part, size_t parts) {
    size_t n = 0;
    t.domain.ForEachPoolWithBlocks([&](char*, bool, void*) { ++n; }, [](void*, BlockInfo) {}, part, parts);
    return n;
  };
  EXPECT_EQ(t.domain.ListedEntries(), npools);
  for (size_t parts = 1; parts <= 3; ++parts) {
    size_t sum = 0;
    for (size_t part = 0; part < parts; ++part) {
      EXPECT_EQ(t.domain.ListedEntries(part, parts), walked(part, parts)) << part << " of " << parts;
      sum += t.domain.ListedEntries(part, parts);
    }
    EXPECT_EQ(sum, t.domain.ListedEntries());
  }
  // Every other pool released (but the thread's current one, kept): its entry is free, still taken.
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i / 4 % 2 == 0) tc.Free(t.domain.Find(blocks[i]), blocks[i]);
  }
  ASSERT_GE(tc.stats().pools_released, npools / 2 - 1);
  EXPECT_EQ(t.domain.ListedEntries(), npools);
  for (size_t part = 0; part < 2; ++part) EXPECT_GT(t.domain.ListedEntries(part, 2), walked(part, 2));
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i / 4 % 2 != 0) tc.Free(t.domain.Find(blocks[i]), blocks[i]);
  }
}

TEST(PoolTest, DoubleAndInteriorFreesAreCaughtAndChangeNothing) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  char* p = static_cast<char*>(tc.Carve(16));
  char* q = static_cast<char*>(tc.Carve(16));
  q[0] = 7;
  EXPECT_EQ(tc.Free(t.domain.Find(p + 8), p + 8), Domain::FreeResult::kInvalid);
  EXPECT_EQ(tc.Free(t.domain.Find(p + 3), p + 3), Domain::FreeResult::kInvalid);
  EXPECT_EQ(tc.Free(t.domain.Find(p), p), Domain::FreeResult::kFreed);
  EXPECT_EQ(tc.Free(t.domain.Find(p), p), Domain::FreeResult::kDouble);
  EXPECT_EQ(tc.stats().invalid_frees, 2u);
  EXPECT_EQ(tc.stats().double_frees, 1u);
  EXPECT_EQ(q[0], 7);  // the live neighbour is untouched (no reset happened)
  EXPECT_EQ(tc.stats().resets_in_place, 0u);
  EXPECT_EQ(tc.Free(t.domain.Find(q), q), Domain::FreeResult::kFreed);
  EXPECT_EQ(tc.stats().resets_in_place, 1u);
}

// The block of a malloc+free pair (the LIFO case, which leaves the pool as fresh as before) freed
// again is a double free, not an interior one: the pool keeps the mark of where a block started.
TEST(PoolTest, SecondFreeOfALifoPairIsADoubleFree) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  char* p = static_cast<char*>(tc.Carve(5));
  EXPECT_EQ(tc.Free(t.domain.Find(p), p), Domain::FreeResult::kFreed);
  EXPECT_EQ(tc.stats().resets_in_place, 1u);
  EXPECT_EQ(tc.Free(t.domain.Find(p), p), Domain::FreeResult::kDouble);
  EXPECT_EQ(tc.stats().double_frees, 1u);
  EXPECT_EQ(tc.stats().invalid_frees, 0u);
  // The pool is fresh: the next block starts where p did, zeroed, and is a block like any other.
  char* q = static_cast<char*>(tc.Carve(32));
  EXPECT_EQ(q, p);
  EXPECT_TRUE(AllZero(q, 32));
  EXPECT_EQ(t.domain.UsableSize(t.domain.Find(q), q), 32u);
  EXPECT_EQ(tc.Free(t.domain.Find(q + 16), q + 16), Domain::FreeResult::kInvalid);
  EXPECT_EQ(tc.Free(t.domain.Find(q), q), Domain::FreeResult::kFreed);
  EXPECT_EQ(tc.stats().resets_in_place, 2u);
  EXPECT_EQ(tc.stats().pooled_frees, tc.stats().hits);
}

// A carve as the tracked malloc makes it: no block named last.
char* CarveTracked(ThreadCache* tc, size_t n) {
  char* p = static_cast<char*>(tc->Carve(n));
  tc->ForgetLast();
  return p;
}

// track=1: no block is named last (ForgetLast after each carve), and the recording free path frees
// with FreeOwnTracked, which treats a block that ends at the carve point as FreeLast treats the last
// block: the pool is fresh again after a pair, and a tail block's bytes are carved again.
TEST(PoolTest, TrackedFreeOfTheTailBlockMovesTheCarvePointBack) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  uint64_t freed = 0, reset = 0;
  char* p = CarveTracked(&tc, 20);
  memset(p, 0x5E, 20);
  ASSERT_TRUE(tc.FreeOwnTracked(t.domain.Find(p), p, &freed, &reset));
  EXPECT_EQ(reset, 1u);  // the pair left the pool fresh
  EXPECT_EQ(freed, 0u);
  char* q = CarveTracked(&tc, 32);
  EXPECT_EQ(q, p);
  EXPECT_TRUE(AllZero(q, 32));
  char* b = CarveTracked(&tc, 16);
  memset(b, 0x33, 16);
  // q is not the tail (b starts after it): an ordinary free, the carve point stays.
  ASSERT_TRUE(tc.FreeOwnTracked(t.domain.Find(q), q, &freed, &reset));
  EXPECT_EQ(freed, 1u);
  char* c = CarveTracked(&tc, 8);
  EXPECT_EQ(c, b + 16);
  memset(c, 0x44, 8);
  // c is: freed and zeroed, its bytes carved again; the live b keeps its own.
  ASSERT_TRUE(tc.FreeOwnTracked(t.domain.Find(c), c, &freed, &reset));
  EXPECT_EQ(freed, 2u);
  EXPECT_EQ(b[15], 0x33);
  char* d = CarveTracked(&tc, 16);
  EXPECT_EQ(d, c);
  EXPECT_TRUE(AllZero(d, 16));
  EXPECT_EQ(t.domain.UsableSize(t.domain.Find(b), b), 16u);
  EXPECT_EQ(reset, 1u);
}

// Tail frees in a row step the carve point back over several blocks. Each FreeLast leaves its block's
// start mark where carving resumes; a block carved there later may be longer and cover where an
// earlier tail block started: that mark must not survive inside it, or the block's usable size (what
// realloc copies) ends there.
TEST(PoolTest, TrackedTailFreesInARowLeaveNoStartMarkInsideALaterBlock) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  uint64_t freed = 0, reset = 0;
  char* a = CarveTracked(&tc, 16);
  char* b = CarveTracked(&tc, 16);
  char* c = CarveTracked(&tc, 16);
  ASSERT_TRUE(tc.FreeOwnTracked(t.domain.Find(c), c, &freed, &reset));
  ASSERT_TRUE(tc.FreeOwnTracked(t.domain.Find(b), b, &freed, &reset));
  char* g = CarveTracked(&tc, 32);  // b's and c's bytes
  ASSERT_EQ(g, b);
  EXPECT_EQ(t.domain.UsableSize(t.domain.Find(g), g), 32u);
  // c is inside g now: an interior pointer, not a block freed twice.
  EXPECT_EQ(tc.Free(t.domain.Find(c), c), Domain::FreeResult::kInvalid);
  // g is the tail again, and a before it.
  ASSERT_TRUE(tc.FreeOwnTracked(t.domain.Find(g), g, &freed, &reset));
  ASSERT_TRUE(tc.FreeOwnTracked(t.domain.Find(a), a, &freed, &reset));
  char* h = CarveTracked(&tc, 64);
  EXPECT_EQ(h, a);
  EXPECT_EQ(t.domain.UsableSize(t.domain.Find(h), h), 64u);
  EXPECT_TRUE(AllZero(h, 64));
}

TEST(PoolTest, TrackedTailFreesKeepDoubleFreesCaught) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  uint64_t freed = 0, reset = 0;
  char* p = CarveTracked(&tc, 5);
  ASSERT_TRUE(tc.FreeOwnTracked(t.domain.Find(p), p, &freed, &reset));
  EXPECT_FALSE(tc.FreeOwnTracked(t.domain.Find(p), p, &freed, &reset));
  EXPECT_EQ(tc.Free(t.domain.Find(p), p), Domain::FreeResult::kDouble);
  char* a = CarveTracked(&tc, 16);
  char* b = CarveTracked(&tc, 16);
  ASSERT_TRUE(tc.FreeOwnTracked(t.domain.Find(b), b, &freed, &reset));
  EXPECT_FALSE(tc.FreeOwnTracked(t.domain.Find(b), b, &freed, &reset));
  EXPECT_EQ(tc.Free(t.domain.Find(b), b), Domain::FreeResult::kDouble);
  EXPECT_EQ(tc.Free(t.domain.Find(a + 8), a + 8), Domain::FreeResult::kInvalid);
  ASSERT_TRUE(tc.FreeOwnTracked(t.domain.Find(a), a, &freed, &reset));
  EXPECT_EQ(tc.stats().double_frees, 2u);
  EXPECT_EQ(tc.stats().invalid_frees, 1u);
  EXPECT_EQ(freed + reset, 3u);
}

// The LIFO test compares the freed address with the block carved last; "none" must be an address no
// program frees. free(NULL) and free(MAP_FAILED) (all ones) are freed by real programs: neither may be
// taken for the block carved last, before any block, after a LIFO free, or after a reset.
TEST(PoolTest, NullAndAllOnesAreNeverTheBlockCarvedLast) {
  TestDomain t(Cfg());
  ThreadCache tc(&t.domain);
  void* const kAllOnes = reinterpret_cast<void*>(~uintptr_t{0});
  uint64_t freed = 0, reset = 0;
  EXPECT_FALSE(tc.FreeLast(nullptr, &freed, &reset));
  EXPECT_FALSE(tc.FreeLast(kAllOnes, &freed, &reset));
  void* p = tc.Carve(5);
  EXPECT_FALSE(tc.FreeLast(nullptr, &freed, &reset));
  EXPECT_FALSE(tc.FreeLast(kAllOnes, &freed, &reset));
  EXPECT_TRUE(tc.FreeLast(p, &freed, &reset));
  EXPECT_FALSE(tc.FreeLast(nullptr, &freed, &reset));
  EXPECT_FALSE(tc.FreeLast(kAllOnes, &freed, &reset));
  EXPECT_EQ(freed, 0u);
  EXPECT_EQ(reset, 1u);  // the free of the pool's only block: one count for the free and the reset
}

// Carving starts on a 16-byte boundary whatever offset is asked for.
TEST(PoolTest, CarveOffsetKeepsMallocAlignment) {
  Config c = Cfg(128);
  c.carve_offset = 8;
  TestDomain t(c);
  EXPECT_EQ(t.domain.config().carve_offset, 16u);
  ThreadCache tc(&t.domain);
  char* p = static_cast<char*>(tc.Carve(5));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
  EXPECT_EQ(p - t.domain.BaseOf(t.domain.Find(p)), 16);
  EXPECT_EQ(tc.Free(t.domain.Find(p), p), Domain::FreeResult::kFreed);
  EXPECT_EQ(tc.stats().resets_in_place, 1u);  // the LIFO free of the first block is a reset
  // ... which keeps the block's mark, as without an offset: freed again, it is a double free.
  EXPECT_EQ(tc.Free(t.domain.Find(p), p), Domain::FreeResult::kDouble);
  EXPECT_EQ(tc.Carve(16), p);
  EXPECT_EQ(tc.Free(t.domain.Find(p + 16), p + 16), Domain::FreeResult::kInvalid);
  EXPECT_EQ(t.domain.UsableSize(t.domain.Find(p), p), 16u);
}

TEST(PoolTest, UsableSizeCoversTheRequest) {
  TestDomain t(Cfg(256));
  ThreadCache tc(&t.domain);
  for (size_t n : {1, 5, 16, 17, 33, 64}) {
    void* p = tc.Carve(n);
    size_t u = t.domain.UsableSize(t.domain.Find(p), p);
    EXPECT_GE(u, n);
    EXPECT_EQ(u, (n + 15) & ~size_t{15}) << n;
  }
  void* p = tc.Carve(8);
  tc.Free(t.domain.Find(p), p);
  EXPECT_EQ(t.domain.UsableSize(t.domain.Find(p), p), 0u);  // not live
}

// Asked on another thread while the owner leaves the pool, the size may meet the pool's owner pointer
// before the owner clears it, and the owner's carve point already in its next pool: the block then ends
// where the pool's carving ended, never past the pool.
TEST(PoolTest, UsableSizeWithTheOwnerGoneToAnotherPool) {
  TestDomain t(Cfg(64));
  ThreadCache tc(&t.domain);
  void* p = tc.Carve(16);
  PoolHeader* h = t.domain.Find(p);
  void* q = tc.Carve(64);  // another pool: h retires
  ASSERT_NE(t.domain.Find(q), h);
  h->owner.store(&tc, std::memory_order_relaxed);  // the stale owner another thread may read
  EXPECT_EQ(t.domain.UsableSize(h, p), 64u);
  h->owner.store(nullptr, std::memory_order_relaxed);
  EXPECT_EQ(t.domain.UsableSize(h, p), 64u);
  tc.Free(h, p);
  tc.Free(t.domain.Find(q), q);
  tc.Shutdown();
  EXPECT_EQ(t.backend.live_pools(), 0);
}

TEST(PoolTest, Align8Rule) {
  TestDomain t(Cfg(64, 4, true));
  ThreadCache tc(&t.domain);
  char* a = static_cast<char*>(tc.Carve(5));   // 8 bytes, 8-aligned
  char* b = static_cast<char*>(tc.Carve(8));   // 8 bytes, 8-aligned, right after
  char* c = static_cast<char*>(tc.Carve(16));  // 16-aligned
  EXPECT_EQ(b - a, 8);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % 16, 0u);
  EXPECT_EQ(c - b, 8);
  EXPECT_EQ(t.domain.UsableSize(t.domain.Find(a), a), 8u);
}

// With malloc_align=8, blocks are whole granules of 8 bytes; the LIFO free zeroes in steps of 16 and
// may pass a block's end by 8 bytes, which must be free pool bytes: never past the pool's end (where
// the shim keeps the pool's malloc'd address), never a live neighbour.
TEST(PoolTest, Align8LifoFreesZeroWithinThePool) {
  TestDomain t(Cfg(64, 4, true));  // 64 bytes: nothing of the real allocation past the pool's end
  ThreadCache tc(&t.domain);
  std::vector<char*> blocks;
  for (int i = 0; i < 8; ++i) {
    blocks.push_back(static_cast<char*>(tc.Carve(8)));
    memset(blocks.back(), 0x5A, 8);
  }
  EXPECT_EQ(blocks[7] - blocks[0], 56);  // the last one ends where the pool does
  EXPECT_EQ(tc.Free(t.domain.Find(blocks[7]), blocks[7]), Domain::FreeResult::kFreed);
  EXPECT_EQ(t.backend.CheckTails(), 0);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(blocks[i][0], 0x5A) << i;
  for (int i = 6; i >= 0; --i) {
    EXPECT_EQ(tc.Free(t.domain.Find(blocks[i]), blocks[i]), Domain::FreeResult::kFreed) << i;
  }
  EXPECT_EQ(tc.stats().resets_in_place, 1u);
  EXPECT_TRUE(AllZero(t.domain.BaseOf(t.domain.Find(blocks[0])), 64));
  // LIFO pairs of 8 and 24 bytes (a 24-byte block starts 16-aligned) in the middle of the pool: the
  // carve point moves back over each, zeroed, and the block before stays.
  char* a = static_cast<char*>(tc.Carve(8));
  memset(a, 0x5A, 8);
  for (size_t n : {5, 8, 20, 24, 8}) {
    char* p = static_cast<char*>(tc.Carve(n));
    memset(p, 0x5A, n);
    EXPECT_EQ(tc.Free(t.domain.Find(p), p), Domain::FreeResult::kFreed) << n;
    char* q = static_cast<char*>(tc.Carve(n));
    EXPECT_EQ(q, p) << n;
    EXPECT_TRUE(AllZero(q, n)) << n;
    EXPECT_EQ(tc.Free(t.domain.Find(q), q), Domain::FreeResult::kFreed) << n;
  }
  EXPECT_EQ(a[7], 0x5A);
  EXPECT_EQ(tc.Free(t.domain.Find(a), a), Domain::FreeResult::kFreed);
  EXPECT_EQ(tc.stats().pooled_frees, tc.stats().hits);
  EXPECT_EQ(t.backend.CheckTails(), 0);
}

TEST(PoolTest, PoolSizeIsClampedToTheSpecRange) {
  TestDomain small(Cfg(1));
  EXPECT_EQ(small.domain.config().pool_size, kMinPoolSize);
  TestDomain big(Cfg(size_t{1} << 30));
  EXPECT_EQ(big.domain.config().pool_size, kMaxPoolSize);
  TestDomain many(Cfg(64, 99));
  EXPECT_EQ(many.domain.config().max_cached, kMaxCachedPools);
}

TEST(PoolTest, LargePoolBlocksFoundAcrossPages) {
  TestDomain t(Cfg(size_t{1} << 20));
  ThreadCache tc(&t.domain);
  std::vector<char*> blocks;
  for (int i = 0; i < 250; ++i) blocks.push_back(static_cast<char*>(tc.Carve(4000)));
  PoolHeader* h = tc.current();
  for (char* b : blocks) EXPECT_EQ(t.domain.Find(b + 3999), h);
  for (char* b : blocks) EXPECT_EQ(tc.Free(h, b), Domain::FreeResult::kFreed);
  EXPECT_EQ(tc.stats().resets_in_place, 1u);
  EXPECT_TRUE(AllZero(blocks[0], 250 * 4000));
}

// A backend whose pools lie next to each other, as a heap made of pools has them: blocks of the
// requested size, each after an 8-byte chunk header and rounded up to 16 bytes (glibc's malloc).
class DenseBackend : public FakeBackend {
 public:
  DenseBackend() {
    heap_ = static_cast<char*>(mmap(nullptr, kHeap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                                    -1, 0));
    next_ = heap_ + 16;
  }
  ~DenseBackend() override { munmap(heap_, kHeap); }
  size_t used() const { return static_cast<size_t>(next_ - heap_); }
  void* AllocPool(size_t bytes) override {
    const size_t chunk = (bytes + 8 + 15) & ~size_t{15};
    if (next_ + chunk > heap_ + kHeap) return nullptr;
    char* p = next_;
    next_ += chunk;
    ++pool_allocs;
    return p;
  }
  void FreePool(void*) override { ++pool_frees; }

 private:
  static constexpr size_t kHeap = size_t{256} << 20;
  char* heap_;
  char* next_;
};

// What a pool costs in poolscope's own memory, measured as resident pages of what the domain reserved
// (pool-list chunks and map leaves), with pools packed as a heap of pools packs them: its entry in
// the pool list (8 bytes) and its share of the map's page (128 bytes for the 32 pools of 128 bytes a
// page holds), with tracking or without; its metadata lies in its real block. At most 16 bytes.
TEST(PoolTest, OwnResidentMemoryIsAListEntryAndMapLines) {
  constexpr size_t kPools = 100000;
  auto own_per_pool = [&](const Config& config) {
    auto root = std::make_unique<std::atomic<PoolMap::Leaf*>[]>(PoolMap::kRootSize);
    DenseBackend backend;
    Domain domain(config, &backend, root.get());
    ThreadCache tc(&domain);
    // Each 64-byte block fills its pool: kPools pools, each retired holding its block.
    std::vector<void*> blocks;
    for (size_t i = 0; i < kPools; ++i) blocks.push_back(tc.Carve(64));
    EXPECT_EQ(backend.pool_allocs.load(), static_cast<long>(kPools));
    const size_t list = backend.ResidentReserved(Domain::kListChunkBytes);
    const size_t map = backend.ResidentReserved(sizeof(PoolMap::Leaf));
    // The list: 8 bytes a pool, and pages faulted in ahead by at most Domain::kListPopulate.
    EXPECT_GE(list, kPools * 8);
    EXPECT_LE(list, kPools * 8 + Domain::kListPopulate + 4096);
    // The map: 2 bytes a 64-byte line of the pools' memory (and at most a page more at each end, and
    // what is faulted in ahead).
    EXPECT_LE(map, backend.used() / 32 + 2 * 4096 + PoolMap::kPopulateAhead);
    for (void* b : blocks) EXPECT_EQ(tc.Free(domain.Find(b), b), Domain::FreeResult::kFreed);
    tc.Shutdown();
    return static_cast<double>(list + map) / kPools;
  };
  EXPECT_LE(own_per_pool(Cfg()), 16.0);
  EXPECT_LE(own_per_pool(TrackedCfg()), 16.0);
}

// A heap of pools that grows upwards finds the map's next page faulted in before its first entry is
// written (one call ahead instead of a fault there), and no further than PoolMap::kPopulateAhead.
TEST(PoolTest, TheMapsNextPageIsFaultedInAheadOfAGrowingHeap) {
  void* probe = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(probe, MAP_FAILED);
  const bool populate = madvise(probe, 4096, MADV_POPULATE_WRITE) == 0;
  munmap(probe, 4096);
  if (!populate) GTEST_SKIP() << "no MADV_POPULATE_WRITE (Linux before 5.14)";
  auto root = std::make_unique<std::atomic<PoolMap::Leaf*>[]>(PoolMap::kRootSize);
  DenseBackend backend;
  Domain domain(Cfg(), &backend, root.get());
  ThreadCache tc(&domain);
  auto resident = [](uintptr_t page) {
    unsigned char v = 0;
    return mincore(reinterpret_cast<void*>(page), 4096, &v) == 0 && (v & 1) != 0;
  };
  const uintptr_t entries = sizeof(PoolMap::Page) * PoolMap::kPagesPerLeaf / sizeof(uint16_t);
  auto entry_page = [&](void* block) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(block);
    const uintptr_t leaf = reinterpret_cast<uintptr_t>(root[a >> PoolMap::kLeafShift].load());
    return (leaf + ((a >> PoolMap::kLineShift) & (entries - 1)) * sizeof(uint16_t)) & ~uintptr_t{4095};
  };
  // 128-byte pools: a map page describes 1,024 of them; 6,000 reach five pages past the first.
  std::vector<void*> blocks{tc.Carve(64)};
  int pages = 0;
  for (int i = 1; i < 6000; ++i) {
    blocks.push_back(tc.Carve(64));  // each fills a pool of its own
    const uintptr_t page = entry_page(blocks.back());
    if (page == entry_page(blocks[blocks.size() - 2])) continue;
    ++pages;
    EXPECT_TRUE(resident(page + 4096)) << "pool " << i << ": the map's next page was not faulted in ahead";
    EXPECT_FALSE(resident(page + 4096 + PoolMap::kPopulateAhead)) << "pool " << i << ": faulted in too far";
  }
  EXPECT_EQ(pages, 5);
  for (void* b : blocks) EXPECT_EQ(tc.Free(domain.Find(b), b), Domain::FreeResult::kFreed);
  tc.Shutdown();
}

// The default pool's header, marks and remote bits lie on one line beside the pool, on whichever side
// the allocator's alignment left room (both sides occur, with tracking too): a free touches the
// block's line and at most one more. With tracking the BlockInfo words go where room is left (both
// sides occur) and the default pool's real block stays 112 bytes: one 128-byte glibc chunk.
// Pools of 128 and 256 bytes likewise; and no pool writes past its real block (the backend's tails).
TEST(PoolTest, AFreeTouchesTheBlocksLineAndOneMetadataLine) {
  for (size_t pool_size : {64, 128, 256}) {
    for (bool tracked : {false, true}) {
      TestDomain t(tracked ? TrackedCfg(pool_size) : Cfg(pool_size));
      if (pool_size == 64) {
        EXPECT_EQ(t.domain.real_bytes(), 112u);
      }
      ThreadCache tc(&t.domain);
      int before = 0, after = 0, info_before = 0, info_after = 0;
      std::vector<void*> blocks;
      for (int i = 0; i < 16; ++i) {
        void* p = tc.Carve(pool_size);  // a pool each
        ASSERT_NE(p, nullptr);
        blocks.push_back(p);
        PoolHeader* h = t.domain.Find(p);
        ASSERT_NE(h, nullptr);
        EXPECT_EQ(t.domain.BaseOf(h), p);
        const uintptr_t meta = reinterpret_cast<uintptr_t>(h);
        (meta < reinterpret_cast<uintptr_t>(p) ? before : after) += 1;
        // BlockInfo words, with tracking: apart from the pool and the rest of the metadata, the same
        // where the header says and where the walk computes them from the real block.
        if (tracked) {
          char* const info = t.domain.InfoBaseOf(h);
          char* const info_end = info + t.domain.info_bytes();
          (info < static_cast<char*>(p) ? info_before : info_after) += 1;
          EXPECT_TRUE(info_end <= static_cast<char*>(p) || info >= static_cast<char*>(p) + pool_size);
          EXPECT_TRUE(info_end <= reinterpret_cast<char*>(h) || info >= reinterpret_cast<char*>(h) + t.domain.meta_bytes());
          EXPECT_EQ(info, t.domain.InfoBaseOfReal(h, reinterpret_cast<uintptr_t>(t.backend.RealOf(p))));
        }
        EXPECT_EQ(meta / kLine, (meta + t.domain.meta_bytes() - 1) / kLine) << pool_size;
        for (size_t g = 0; g < pool_size / kGranule; ++g) {
          EXPECT_EQ(reinterpret_cast<uintptr_t>(&h->mark(g)) / kLine, meta / kLine);
          EXPECT_EQ(reinterpret_cast<uintptr_t>(&t.domain.RemoteByte(h, g)) / kLine, meta / kLine);
        }
      }
      if (pool_size == 64) {
        EXPECT_GT(before, 0);
        EXPECT_GT(after, 0);
        if (tracked) {
          EXPECT_GT(info_before, 0);
          EXPECT_GT(info_after, 0);
        }
      }
      for (void* b : blocks) EXPECT_EQ(tc.Free(t.domain.Find(b), b), Domain::FreeResult::kFreed);
      EXPECT_EQ(t.backend.CheckTails(), 0);
      tc.Shutdown();
    }
  }
}

TEST(PoolTest, BackendFailureReturnsNull) {
  TestDomain t(Cfg());
  t.backend.fail_pools = true;
  ThreadCache tc(&t.domain);
  EXPECT_EQ(tc.Carve(8), nullptr);
  EXPECT_EQ(tc.stats().hits, 0u);
}

// An address-space limit (RLIMIT_AS) refuses poolscope's own reservations: the first pool that needs
// one fails, and from then on the domain makes no pool at all, without a real allocation or another
// reservation per request (a python3 run makes about a million such requests).
void ExpectPoolingGivesUp(TestDomain* t) {
  ThreadCache tc(&t->domain);
  EXPECT_FALSE(t->domain.exhausted());
  EXPECT_EQ(tc.Carve(8), nullptr);
  EXPECT_TRUE(t->domain.exhausted());
  EXPECT_EQ(t->backend.live_pools(), 0);  // the real block taken for the attempt went back
  // and counts as a pool made and released, as every real allocation must be accounted for.
  EXPECT_EQ(t->backend.pool_allocs, 1);
  EXPECT_EQ(tc.stats().pools_created, 1u);
  EXPECT_EQ(tc.stats().pools_released, 1u);
  const long allocs = t->backend.pool_allocs, attempts = t->backend.leaf_attempts;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(tc.Carve(8 + i % 50), nullptr);
  Arena arena = {};
  int reason = -1;
  EXPECT_EQ(tc.ArenaCarve(&arena, 8, 8, &reason), nullptr);
  EXPECT_EQ(t->backend.pool_allocs, allocs);
  EXPECT_EQ(t->backend.leaf_attempts, attempts);
  EXPECT_EQ(tc.stats().pools_created, 1u);
  EXPECT_EQ(tc.stats().hits, 0u);
}

TEST(PoolTest, NoRoomForTheMetadataStopsPoolingForGood) {
  TestDomain t(Cfg());
  t.backend.fail_leaves_of = SIZE_MAX;
  ExpectPoolingGivesUp(&t);
}

TEST(PoolTest, NoRoomForTheMapStopsPoolingForGood) {
  TestDomain t(Cfg());
  t.backend.fail_leaves_of = sizeof(PoolMap::Leaf);  // the metadata chunk is had, the map's leaf not
  ExpectPoolingGivesUp(&t);
  EXPECT_GE(t.backend.leaves, 1);  // (the metadata chunk)
}

TEST(ThreadExitTest, ShutdownReleasesCachedAndOrphansLivePool) {
  TestDomain t(Cfg());
  auto* dying = new ThreadCache(&t.domain);
  ThreadCache survivor(&t.domain);
  void* keep[4];
  for (auto& p : keep) p = dying->Carve(16);  // one full pool, current
  void* extra = dying->Carve(8);              // second pool becomes current, first retired
  dying->Free(t.domain.Find(extra), extra);   // second pool resets in place
  dying->Shutdown();                          // empty current pool released, live one orphaned
  EXPECT_EQ(t.backend.pool_frees, 1);
  EXPECT_EQ(t.backend.live_pools(), 1);
  for (auto& p : keep) EXPECT_EQ(survivor.Free(t.domain.Find(p), p), Domain::FreeResult::kFreed);
  EXPECT_EQ(survivor.current(), nullptr);
  EXPECT_EQ(survivor.cached(), 1);  // the orphan came home to the thread that freed its last block
  delete dying;
}

}  // namespace

class ThreadCachePeer {
 public:
  // The state of a thread stopped between putting its current pool back in its cache and
  // forgetting it as current: one pool named twice.
  static void NameCurrentInCache(ThreadCache& tc) { tc.cache_[tc.ncached_++] = tc.pool_; }
};

namespace {

// fork() child: another thread, stopped by fork() halfway through moving its pool (named both
// current and cached), must not have its pools taken over: taking them over would hand the pool out
// twice, and block 3 below would overlap a live block.
TEST(PoolForkTest, AThreadStoppedMidMoveLeavesItsPoolsAlone) {
  TestDomain t(Cfg());
  ThreadCache self(&t.domain), dead(&t.domain);
  void* d = dead.Carve(16);
  ASSERT_NE(d, nullptr);
  PoolHeader* p = t.domain.Find(d);
  ASSERT_EQ(dead.Free(p, d), Domain::FreeResult::kFreed);
  ThreadCachePeer::NameCurrentInCache(dead);
  const long released = t.backend.pool_frees;
  self.ResetAtFork();
  dead.AbandonAtFork();
  // The surviving thread's blocks never overlap, and none lies in the stopped thread's pool.
  std::vector<std::pair<char*, size_t>> live;
  for (int i = 0; i < 300; ++i) {
    const size_t n = 8 + static_cast<size_t>(i * 7 % 50);
    char* q = static_cast<char*>(self.Carve(n));
    ASSERT_NE(q, nullptr);
    EXPECT_NE(t.domain.Find(q), p) << i;
    for (const auto& [r, m] : live) ASSERT_FALSE(q < r + m && r < q + n) << "block " << i << " overlaps a live one";
    live.emplace_back(q, n);
  }
  EXPECT_EQ(t.backend.pool_frees, released) << "a pool of the stopped thread went back to the allocator";
}

// fork() child: a remote free stopped between its two updates of `state` on the surviving thread's pool
// never finishes; without ResetAtFork, the first retire of that pool waits for it forever (the test
// then hangs until Bazel's timeout).
TEST(PoolForkTest, ARemoteFreeStoppedMidwayDoesNotHoldTheSurvivorsPool) {
  TestDomain t(Cfg());
  ThreadCache self(&t.domain);
  void* a = self.Carve(16);
  ASSERT_NE(a, nullptr);
  PoolHeader* p = t.domain.Find(a);
  p->state.fetch_add(1);  // the stopped thread's half of the handshake
  self.ResetAtFork();
  EXPECT_EQ(p->state.load() & PoolHeader::kInFlightMask, 0);
  // Fill the pool past its end: it retires (holding `a`) and a fresh one is made.
  for (int i = 0; i < 8; ++i) ASSERT_NE(self.Carve(16), nullptr);
  EXPECT_NE(self.current(), p);
  EXPECT_EQ(self.Free(p, a), Domain::FreeResult::kFreed);
}

}  // namespace
}  // namespace pool
}  // namespace poolscope
