// File: interpose/slow_paths_test.cc
//
// The shim's slow paths (shim.cc) driven directly, in a test binary that is not preloaded: the program's
// own malloc stays glibc's, and only the calls below go through poolscope. Every pool's memory comes
// from a FakeBackend (UsePoolMemory), which counts the real allocations and frees made for pools.
//
// The options come from POOLSCOPE_OPTIONS: the BUILD file runs this file as four tests, PoolingOn.*
// with pooling on (track=0, and track=1, whose paths differ) and PoolingOff.* with pool=0 and with
// pool_size=-1. Each fixture asserts the setting it is for, so a run under the wrong options fails
// rather than passes vacuously.
//
// Each scenario runs on a thread of its own, so it starts with an empty thread cache and the pools it
// makes are known; its figures are the difference of two snapshots (TakeSnapshot) around it. The
// expected figures follow from the scenario and the carve rules (pool_size=64 usable bytes, blocks
// rounded up to 16 bytes, 16-byte alignment at most); the comments derive them.
#include <errno.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>

#include "gtest/gtest.h"
#include "interpose/shim.h"
#include "interpose/shim_internal.h"
#include "interpose/snapshot.h"
#include "pool/fake_backend.h"

namespace poolscope {
namespace {

// Lives as long as the process: pools outlive the threads and tests that made them.
pool::FakeBackend* Fake() {
  static pool::FakeBackend* fake = [] {
    auto* f = new pool::FakeBackend;
    UsePoolMemory(f);
    return f;
  }();
  return fake;
}
// Before the first call into the shim, which makes the Domain and may make pools.
[[maybe_unused]] pool::FakeBackend* const g_fake_at_start = Fake();

// Everything a scenario changes.
struct Counts {
  Ledger logical;  // the report's logical ledger (regular + pooled)
  Ledger real;     // the report's real ledger (regular + pools + spills)
  pool::PoolStats pool;
  long fake_allocs;
  long fake_frees;
  int64_t gap;  // ReconciliationGap: 0 when the report's reconciliation balances
  bool pooling;
};

Counts Now() {
  SnapshotNow snap;
  const Snapshot* s = snap.get();
  EXPECT_NE(s, nullptr);
  Counts c{};
  if (s == nullptr) return c;
  c.logical = Logical(s->totals);
  c.real = Real(s->totals);
  c.pool = s->pool;
  c.fake_allocs = Fake()->pool_allocs;
  c.fake_frees = Fake()->pool_frees;
  c.gap = ReconciliationGap(*s);
  c.pooling = s->pooling;
  return c;
}

struct Delta {
  int64_t logical_allocs, logical_frees, logical_reallocs;
  int64_t real_allocs, real_frees;
  int64_t hits, pooled_frees, pools_created, pools_released, spills;
  int64_t invalid_frees, double_frees;
  int64_t misses[pool::kNumMissReasons];
  int64_t fake_allocs, fake_frees;
};

int64_t D(uint64_t after, uint64_t before) { return static_cast<int64_t>(after - before); }

Delta Diff(const Counts& a, const Counts& b) {
  Delta d{};
  d.logical_allocs = D(b.logical.nallocs, a.logical.nallocs);
  d.logical_frees = D(b.logical.nfrees, a.logical.nfrees);
  d.logical_reallocs = D(b.logical.nreallocs, a.logical.nreallocs);
  d.real_allocs = D(b.real.nallocs, a.real.nallocs);
  d.real_frees = D(b.real.nfrees, a.real.nfrees);
  d.hits = D(b.pool.hits, a.pool.hits);
  d.pooled_frees = D(b.pool.pooled_frees, a.pool.pooled_frees);
  d.pools_created = D(b.pool.pools_created, a.pool.pools_created);
  d.pools_released = D(b.pool.pools_released, a.pool.pools_released);
  d.spills = D(b.pool.spills, a.pool.spills);
  d.invalid_frees = D(b.pool.invalid_frees, a.pool.invalid_frees);
  d.double_frees = D(b.pool.double_frees, a.pool.double_frees);
  for (int r = 0; r < pool::kNumMissReasons; ++r) d.misses[r] = D(b.pool.misses[r], a.pool.misses[r]);
  d.fake_allocs = b.fake_allocs - a.fake_allocs;
  d.fake_frees = b.fake_frees - a.fake_frees;
  return d;
}

// The identities every scenario keeps, whatever it did: the real ledger is the logical one with the
// pooled blocks taken out and the pools and spills put in, every pool the shim counts is one the
// backend made or freed, and the reconciliation balances.
void ExpectIdentities(const Counts& before, const Counts& after) {
  const Delta d = Diff(before, after);
  EXPECT_EQ(d.real_allocs, d.logical_allocs - d.hits + d.pools_created + d.spills);
  EXPECT_EQ(d.fake_allocs, d.pools_created);
  EXPECT_EQ(d.fake_frees, d.pools_released);
  EXPECT_EQ(after.gap, 0);
  EXPECT_EQ(Fake()->CheckTails(), 0);  // nothing written past a pool's end
}

// Runs `fn` on a new thread (a fresh thread cache) and waits for it: its cached pools are released
// when it ends.
void OnFreshThread(const std::function<void()>& fn) { std::thread(fn).join(); }

bool Pooled(const void* p) { return g_pool_map.Find(const_cast<void*>(p)) != nullptr; }

void* Malloc(size_t n) { return AllocSlow(kMalloc, n, nullptr); }
void FreeBlock(void* p) { Free(kFree, p); }
void* ReallocBlock(void* p, size_t n) { return Realloc(kRealloc, p, n, 0, nullptr); }

void Fill(void* p, size_t n, char c) { memset(p, c, n); }
bool Filled(const void* p, size_t n, char c) {
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<const char*>(p)[i] != c) return false;
  }
  return true;
}

// ---- pooling on: pool=1, pool_size=64, pools=4 ---------------------------------------------------------

class PoolingOn : public ::testing::Test {
 protected:
  void SetUp() override {
    Fake();
    // The first call initialises the library (the options); pooling must be on for these tests.
    FreeBlock(Malloc(1000));
    ASSERT_TRUE(g_pooling) << "run with POOLSCOPE_OPTIONS=pool=1:pool_size=64";
    ASSERT_EQ(g_pool_capacity, 64u);
  }
};

TEST_F(PoolingOn, ReallocWithinTheBlockKeepsItInPlace) {
  Counts before, after;
  OnFreshThread([&] {
    before = Now();
    void* p = Malloc(40);  // a new pool (the thread has none): block of 48 bytes at its start
    ASSERT_TRUE(Pooled(p));
    Fill(p, 40, 'a');
    EXPECT_EQ(ReallocBlock(p, 24), p);  // shrink: in place
    EXPECT_EQ(ReallocBlock(p, 48), p);  // grow within the block's 48 bytes: in place
    EXPECT_TRUE(Filled(p, 24, 'a'));
    FreeBlock(p);
    after = Now();
  });
  const Delta d = Diff(before, after);
  EXPECT_EQ(d.logical_allocs, 1);
  EXPECT_EQ(d.logical_reallocs, 2);
  EXPECT_EQ(d.logical_frees, 1);
  EXPECT_EQ(d.hits, 1);
  EXPECT_EQ(d.pooled_frees, 1);
  EXPECT_EQ(d.pools_created, 1);
  EXPECT_EQ(d.spills, 0);
  EXPECT_EQ(d.real_allocs, 1);  // the pool
  EXPECT_EQ(d.fake_allocs, 1);
  ExpectIdentities(before, after);
}

TEST_F(PoolingOn, ReallocGrowsIntoANewPoolThenSpillsToARealBlock) {
  Counts before, after;
  Counts end_of_thread;
  OnFreshThread([&] {
    before = Now();
    void* p = Malloc(40);  // pool A, 48 of its 64 bytes
    Fill(p, 40, 'b');
    // 64 bytes do not fit in A's last 16: the block moves to a new pool B; A, retired and emptied by
    // the move, goes to the thread's cache. A move, not an allocation: no hit, no pooled free.
    void* q = ReallocBlock(p, 64);
    ASSERT_NE(q, nullptr);
    EXPECT_NE(q, p);
    EXPECT_TRUE(Pooled(q));
    EXPECT_TRUE(Filled(q, 40, 'b'));
    Fill(q, 64, 'c');
    // 65 bytes are more than a pool holds: a real block (a spill), and B's block is freed.
    void* r = ReallocBlock(q, 65);
    ASSERT_NE(r, nullptr);
    EXPECT_FALSE(Pooled(r));
    EXPECT_TRUE(Filled(r, 64, 'c'));
    // A real block is resized by the next allocator, and freed through it.
    void* s = ReallocBlock(r, 4000);
    ASSERT_NE(s, nullptr);
    EXPECT_FALSE(Pooled(s));
    EXPECT_TRUE(Filled(s, 64, 'c'));
    FreeBlock(s);
    after = Now();
  });
  end_of_thread = Now();
  const Delta d = Diff(before, after);
  EXPECT_EQ(d.logical_allocs, 1);    // malloc(40)
  EXPECT_EQ(d.logical_reallocs, 3);  // 64, 65, 4000
  EXPECT_EQ(d.logical_frees, 1);     // free(s)
  EXPECT_EQ(d.hits, 1);
  EXPECT_EQ(d.pools_created, 2);  // A and B
  EXPECT_EQ(d.spills, 1);
  EXPECT_EQ(d.pooled_frees, 1);  // the spill's free of B's block (the move to B is none)
  // The pools A and B and the spill's real block; the real realloc resizes, the free frees it.
  EXPECT_EQ(d.real_allocs, 3);
  EXPECT_EQ(d.real_frees, 1);
  EXPECT_EQ(d.pools_released, 0);
  ExpectIdentities(before, after);
  // Both pools were empty in the thread's cache (A) and current slot (B): released at its end.
  const Delta whole = Diff(before, end_of_thread);
  EXPECT_EQ(whole.pools_released, 2);
  EXPECT_EQ(whole.fake_frees, 2);
  ExpectIdentities(before, end_of_thread);
}

TEST_F(PoolingOn, ReallocOfNullAllocatesAndToZeroFrees) {
  Counts before, after;
  OnFreshThread([&] {
    before = Now();
    void* p = ReallocBlock(nullptr, 10);  // an allocation: pooled
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(Pooled(p));
    EXPECT_EQ(ReallocBlock(p, 0), nullptr);  // frees the pooled block
    after = Now();
  });
  const Delta d = Diff(before, after);
  EXPECT_EQ(d.logical_allocs, 1);
  EXPECT_EQ(d.logical_frees, 1);
  EXPECT_EQ(d.logical_reallocs, 0);
  EXPECT_EQ(d.hits, 1);
  EXPECT_EQ(d.pooled_frees, 1);
  EXPECT_EQ(d.real_allocs, 1);  // the pool
  ExpectIdentities(before, after);
  EXPECT_EQ(after.logical.ncalls[kRealloc] - before.logical.ncalls[kRealloc], 2u);  // each call once
}

TEST_F(PoolingOn, AlignedEntryPointsPoolWhatThePoolCanAlign) {
  Counts before, after;
  OnFreshThread([&] {
    before = Now();
    void* a = nullptr;
    // Alignments of 16 and below: pooled (blocks are 16-aligned).
    ASSERT_EQ(PosixMemalign(&a, 16, 24, nullptr), 0);  // 32 bytes of pool A
    void* b = AlignedEntry(kAlignedAlloc, 16, 32, nullptr);  // A's other 32
    void* c = AlignedEntry(kMemalign, 8, 10, nullptr);  // 16 bytes of a new pool B
    for (void* p : {a, b, c}) {
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(Pooled(p));
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
    }
    // Above 16, or not a power of two, or a page: the next allocator's, each a miss for alignment.
    void* d = nullptr;
    ASSERT_EQ(PosixMemalign(&d, 32, 24, nullptr), 0);
    void* e = AlignedEntry(kAlignedAlloc, 64, 64, nullptr);
    void* f = AlignedEntry(kMemalign, 24, 10, nullptr);  // glibc rounds the alignment up to 32
    void* g = AlignedEntry(kValloc, 0, 10, nullptr);
    for (void* p : {d, e, f, g}) {
      ASSERT_NE(p, nullptr);
      EXPECT_FALSE(Pooled(p));
    }
    EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 32, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(e) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(g) % 4096, 0u);
    // posix_memalign's invalid alignment: EINVAL, *out untouched, no block.
    void* untouched = &untouched;
    EXPECT_EQ(PosixMemalign(&untouched, 3, 24, nullptr), EINVAL);
    EXPECT_EQ(untouched, &untouched);
    for (void* p : {a, b, c, d, e, f, g}) FreeBlock(p);
    after = Now();
  });
  const Delta d = Diff(before, after);
  EXPECT_EQ(d.hits, 3);
  EXPECT_EQ(d.misses[pool::kMissAlignment], 4);
  EXPECT_EQ(d.logical_allocs, 7);
  EXPECT_EQ(d.logical_frees, 7);
  EXPECT_EQ(d.pools_created, 2);
  EXPECT_EQ(d.real_allocs, 4 + 2);  // the four real blocks and the two pools
  EXPECT_EQ(d.pooled_frees, 3);
  ExpectIdentities(before, after);
}

TEST_F(PoolingOn, InvalidAndDoubleFreesAreCountedAndChangeNothing) {
  Counts before, after;
  OnFreshThread([&] {
    void* a = Malloc(16);
    void* b = Malloc(16);
    void* c = Malloc(16);
    Fill(b, 16, 'x');
    FreeBlock(a);  // a real free of a live block, not the last carved
    before = Now();
    FreeBlock(a);                            // double
    FreeBlock(static_cast<char*>(b) + 8);   // inside b: no block starts there
    errno = 0;
    EXPECT_EQ(ReallocBlock(static_cast<char*>(b) + 8, 100), nullptr);  // the same, through realloc
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(ReallocBlock(a, 8), nullptr);  // a freed block, through realloc
    after = Now();
    // b is as it was: live, its bytes kept, and no later carve hands it out.
    EXPECT_TRUE(Filled(b, 16, 'x'));
    void* d = Malloc(16);
    EXPECT_NE(d, b);
    EXPECT_EQ(ReallocBlock(b, 16), b);  // still a live block of 16 bytes
    FreeBlock(b);
    FreeBlock(c);
    FreeBlock(d);
  });
  const Delta d = Diff(before, after);
  EXPECT_EQ(d.double_frees, 1);
  EXPECT_EQ(d.invalid_frees, 3);  // b + 8 twice, and realloc of a (a freed block is no live block)
  EXPECT_EQ(d.logical_frees, 0);
  EXPECT_EQ(d.pooled_frees, 0);
  EXPECT_EQ(d.logical_allocs, 0);
  EXPECT_EQ(d.logical_reallocs, 0);
  EXPECT_EQ(d.real_allocs, 0);
  EXPECT_EQ(d.real_frees, 0);
  EXPECT_EQ(d.pools_created, 0);
  EXPECT_EQ(d.pools_released, 0);
  ExpectIdentities(before, after);
}

TEST_F(PoolingOn, AThreadThatEndsHoldingBlocksLeavesItsPoolToTheLastFree) {
  void* held[2] = {nullptr, nullptr};
  const Counts before = Now();
  OnFreshThread([&] {
    held[0] = Malloc(16);  // one new pool holds both
    held[1] = Malloc(16);
    Fill(held[0], 16, 'p');
    Fill(held[1], 16, 'q');
  });
  // The thread has ended: its pool, still holding two live blocks, was neither released nor kept.
  const Counts orphaned = Now();
  Delta d = Diff(before, orphaned);
  EXPECT_EQ(d.pools_created, 1);
  EXPECT_EQ(d.pools_released, 0);
  EXPECT_EQ(d.hits, 2);
  EXPECT_EQ(d.pooled_frees, 0);
  EXPECT_EQ(d.fake_frees, 0);
  ExpectIdentities(before, orphaned);
  // Another thread frees them: the last free empties the pool, which that thread takes into its cache
  // and releases when it ends.
  Counts freed_one, freed_both;
  OnFreshThread([&] {
    EXPECT_TRUE(Filled(held[0], 16, 'p'));
    EXPECT_TRUE(Filled(held[1], 16, 'q'));
    FreeBlock(held[1]);
    freed_one = Now();
    FreeBlock(held[0]);
    freed_both = Now();
  });
  const Counts end = Now();
  d = Diff(orphaned, freed_one);
  EXPECT_EQ(d.pooled_frees, 1);
  EXPECT_EQ(d.logical_frees, 1);
  EXPECT_EQ(d.fake_frees, 0);
  d = Diff(orphaned, end);
  EXPECT_EQ(d.pooled_frees, 2);
  EXPECT_EQ(d.logical_frees, 2);
  EXPECT_EQ(d.pools_created, 0);
  EXPECT_EQ(d.pools_released, 1);
  EXPECT_EQ(d.fake_frees, 1);
  EXPECT_EQ(d.invalid_frees + d.double_frees, 0);
  ExpectIdentities(orphaned, end);
  ExpectIdentities(before, end);
}

// ---- pooling off: pool=0, or a negative pool_size --------------------------------------------------------

class PoolingOff : public ::testing::Test {
 protected:
  void SetUp() override {
    Fake();
    FreeBlock(Malloc(1000));
    ASSERT_FALSE(g_pooling) << "run with POOLSCOPE_OPTIONS=pool=0 or pool_size=-1";
  }
};

TEST_F(PoolingOff, EveryRequestPassesToTheNextAllocator) {
  Counts before, after;
  OnFreshThread([&] {
    before = Now();
    void* a = Malloc(16);
    void* b = MallocRegular(24, nullptr);  // the inline regular path (regular_miss)
    void* c = ReallocBlock(nullptr, 8);
    void* d = ReallocBlock(c, 40);
    void* e = nullptr;
    ASSERT_EQ(PosixMemalign(&e, 16, 24, nullptr), 0);
    void* f = AlignedEntry(kAlignedAlloc, 16, 32, nullptr);
    void* g = Calloc(2, 8, nullptr);
    for (void* p : {a, b, d, e, f, g}) {
      ASSERT_NE(p, nullptr);
      EXPECT_FALSE(Pooled(p));
    }
    EXPECT_TRUE(Filled(g, 16, 0));
    for (void* p : {a, b, d, e, f, g}) FreeBlock(p);
    after = Now();
  });
  EXPECT_FALSE(after.pooling);
  const Delta d = Diff(before, after);
  EXPECT_EQ(d.logical_allocs, 6);  // a, b, c (realloc of NULL), e, f, g
  EXPECT_EQ(d.logical_reallocs, 1);  // c to d
  EXPECT_EQ(d.logical_frees, 6);
  EXPECT_EQ(d.real_allocs, 6);  // the same calls, one for one
  EXPECT_EQ(d.real_frees, 6);
  EXPECT_EQ(d.hits, 0);
  EXPECT_EQ(d.pools_created, 0);
  EXPECT_EQ(d.fake_allocs, 0);
  // Every request the pool would have taken is a `disabled` miss.
  EXPECT_EQ(d.misses[pool::kMissDisabled], 6);
  ExpectIdentities(before, after);
  EXPECT_EQ(Fake()->pool_allocs, 0);  // never, in this process
}

}  // namespace
}  // namespace poolscope
