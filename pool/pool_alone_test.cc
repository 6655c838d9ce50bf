// File: pool/pool_alone_test.cc
//
// The pools while the process has one thread (Config::single_threaded, Domain::Alone): the retire
// handshake and the pool list's lock are left out, and everything the pools promise still holds,
// including once a second thread appears.
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "pool/fake_backend.h"
#include "pool/pool.h"
#include "pool/thread_cache.h"

namespace poolscope {
namespace pool {
namespace {

// A 64-byte pool domain whose "one thread" byte is the test's own.
Config AloneCfg(const char* single_threaded, int max_cached = 4) {
  Config c;
  c.pool_size = 64;
  c.max_cached = max_cached;
  c.single_threaded = single_threaded;
  return c;
}

// Runs fn on a thread of its own; false when it has not returned within 10 s (it is then left
// running: what it waits for never comes).
template <typename F>
bool FinishesInTime(F fn) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread([fn, done] {
    fn();
    done->store(true);
  }).detach();
  for (int i = 0; i < 1000 && !done->load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done->load();
}

// Carves the four 16-byte blocks of tc's pool into a (written to) and returns that pool, which the
// next carve retires with them live.
PoolHeader* FillFour(ThreadCache* tc, void* a[4]) {
  for (int i = 0; i < 4; ++i) {
    a[i] = tc->Carve(16);
    memset(a[i], 0x5E, 16);
  }
  return tc->current();
}

TEST(PoolAloneTest, TheFlagIsReadAsItStandsNow) {
  char alone = 1;
  TestDomain t(AloneCfg(&alone));
  EXPECT_TRUE(t.domain.Alone());
  alone = 0;  // a thread was made
  EXPECT_FALSE(t.domain.Alone());
  TestDomain never(AloneCfg(nullptr));
  EXPECT_FALSE(never.domain.Alone());
}

// Alone, creating and releasing pools does not take the list's lock: with the lock held (as a walk
// holds it) they still finish. With the other byte value they wait for it.
TEST(PoolAloneTest, PoolsComeAndGoWithoutTheListLock) {
  char alone = 1;
  TestDomain t(AloneCfg(&alone, 0));
  ThreadCache tc(&t.domain);
  t.domain.ForkPrepare();  // the list's lock, held
  ASSERT_TRUE(FinishesInTime([&] {
    void* a = tc.Carve(64);  // pool 1
    void* b = tc.Carve(64);  // pool 2; pool 1 retires with `a` live
    tc.Free(t.domain.Find(a), a);  // pool 1 empties; pools=0: released
    tc.Free(t.domain.Find(b), b);  // pool 2 resets in place
  }));
  EXPECT_EQ(t.backend.pool_allocs, 2);
  EXPECT_EQ(t.backend.pool_frees, 1);
  EXPECT_EQ(tc.stats().pools_created, 2u);
  EXPECT_EQ(tc.stats().pools_released, 1u);
  size_t listed = 0;
  t.domain.ForEachPool([&](char*, bool, void*) { ++listed; });  // (the walk finds the lock held by this thread)
  EXPECT_EQ(listed, 1u) << "the released pool left the list, the current one is on it";
  t.domain.ForkParent();
  tc.Shutdown();
  EXPECT_EQ(t.backend.live_pools(), 0);
}

// Alone, retiring a pool has no remote free to wait for: a count of frees in flight left in its state
// word (which only another thread can leave) is not waited on.
TEST(PoolAloneTest, RetiringWaitsForNoRemoteFree) {
  char alone = 1;
  TestDomain t(AloneCfg(&alone));
  ThreadCache tc(&t.domain);
  void* a = tc.Carve(16);
  PoolHeader* h = t.domain.Find(a);
  h->state.fetch_add(1);
  ASSERT_TRUE(FinishesInTime([&] {
    for (int i = 0; i < 4; ++i) ASSERT_NE(tc.Carve(16), nullptr);  // the fourth retires h
  }));
  EXPECT_NE(tc.current(), h);
  EXPECT_NE(h->state.load() & PoolHeader::kRetiredBit, 0);
  EXPECT_EQ(h->owner.load(), nullptr);
  h->state.fetch_sub(1);
  tc.Shutdown();
}

// Alone, a retired pool's blocks are freed with plain stores: the counts balance, a second free is
// still a double free and changes nothing, the emptied pool comes back zeroed.
TEST(PoolAloneTest, RetiredPoolsFreeAndEmptyAsBefore) {
  char alone = 1;
  TestDomain t(AloneCfg(&alone));
  ThreadCache tc(&t.domain);
  void* a[4];
  PoolHeader* first = FillFour(&tc, a);
  void* b = tc.Carve(16);  // the first pool retires with 4 live blocks
  ASSERT_NE(t.domain.Find(b), first);
  EXPECT_EQ(tc.Free(first, a[1]), Domain::FreeResult::kFreed);
  EXPECT_EQ(tc.Free(first, a[1]), Domain::FreeResult::kDouble);
  EXPECT_EQ(tc.Free(first, static_cast<char*>(a[2]) + 8), Domain::FreeResult::kInvalid);
  EXPECT_EQ(tc.cached(), 0);
  for (void* p : {a[0], a[2], a[3]}) EXPECT_EQ(tc.Free(first, p), Domain::FreeResult::kFreed);
  EXPECT_EQ(tc.cached(), 1);
  EXPECT_TRUE(AllZero(a[0], 64));
  EXPECT_EQ(first->state.load(), 0) << "emptied: owned again, nothing in flight";
  EXPECT_EQ(tc.stats().pooled_frees, 4u);
  EXPECT_EQ(tc.stats().double_frees, 1u);
  EXPECT_EQ(tc.stats().invalid_frees, 1u);
  EXPECT_EQ(tc.Free(t.domain.Find(b), b), Domain::FreeResult::kFreed);
  tc.Shutdown();
  EXPECT_EQ(t.backend.live_pools(), 0);
}

// FreeRetiredAlone, the shim's shortcut for such frees: it takes a live block of a retired pool
// (counting nothing: its caller counts), empties the pool into the cache zeroed as FreeSlow does, and
// refuses, doing nothing, a second free, an interior pointer, a block of the current pool and any free
// once a second thread exists, which FreeSlow then counts and tells apart.
TEST(PoolAloneTest, FreeRetiredAloneTakesOnlyLiveBlocksOfRetiredPools) {
  char alone = 1;
  TestDomain t(AloneCfg(&alone));
  ThreadCache tc(&t.domain);
  void* a[4];
  PoolHeader* first = FillFour(&tc, a);
  void* b = tc.Carve(16);  // the first pool retires with 4 live blocks
  PoolHeader* second = t.domain.Find(b);
  ASSERT_NE(second, first);
  EXPECT_FALSE(tc.FreeRetiredAlone(second, b)) << "the current pool is not retired";
  EXPECT_TRUE(tc.FreeRetiredAlone(first, a[1]));
  EXPECT_FALSE(tc.FreeRetiredAlone(first, a[1])) << "freed already";
  EXPECT_FALSE(tc.FreeRetiredAlone(first, static_cast<char*>(a[2]) + 8)) << "inside a block";
  EXPECT_EQ(first->live.load(), 3);
  alone = 0;
  EXPECT_FALSE(tc.FreeRetiredAlone(first, a[2])) << "a second thread exists";
  alone = 1;
  EXPECT_EQ(tc.cached(), 0);
  for (void* p : {a[0], a[2], a[3]}) EXPECT_TRUE(tc.FreeRetiredAlone(first, p));
  EXPECT_EQ(tc.cached(), 1);
  EXPECT_TRUE(AllZero(a[0], 64));
  EXPECT_EQ(first->state.load(), 0) << "emptied: owned again";
  EXPECT_EQ(tc.stats().pooled_frees, 0u) << "the caller counts";
  EXPECT_EQ(tc.stats().double_frees + tc.stats().invalid_frees, 0u);
  EXPECT_EQ(tc.Free(first, a[1]), Domain::FreeResult::kInvalid) << "a cached pool's block is no block";
  EXPECT_EQ(tc.Free(second, b), Domain::FreeResult::kFreed);
  tc.Shutdown();
  EXPECT_EQ(t.backend.live_pools(), 0);
}

// Pools retired while alone, then a second thread: it frees their blocks with the shared protocol and
// takes the emptied pools into its own cache; nothing leaks, every pool handed out again is zero.
TEST(PoolAloneTest, PoolsRetiredAloneComeHomeThroughAnotherThread) {
  char alone = 1;
  TestDomain t(AloneCfg(&alone));
  ThreadCache owner(&t.domain);
  std::vector<void*> blocks;
  for (int i = 0; i < 40; ++i) {
    void* p = owner.Carve(48);  // a pool each: 39 retire
    memset(p, 0xEE, 48);
    blocks.push_back(p);
  }
  alone = 0;  // (pthread_create clears glibc's byte before the thread starts)
  ThreadCache other(&t.domain);
  long dirty = 0;
  std::thread([&] {
    for (void* p : blocks) ASSERT_EQ(other.Free(t.domain.Find(p), p), Domain::FreeResult::kFreed);
    for (int i = 0; i < 8; ++i) {
      char* q = static_cast<char*>(other.Carve(64));
      for (int k = 0; k < 64; ++k) dirty += q[k] != 0;
      other.Free(t.domain.Find(q), q);
    }
    other.Shutdown();
  }).join();
  EXPECT_EQ(dirty, 0);
  EXPECT_EQ(other.stats().pooled_frees, 48u);
  // 39 retired pools emptied by the other thread (4 cached, the rest released, then its own current
  // one), the owner's current pool holding one remote free.
  EXPECT_EQ(owner.current(), t.domain.Find(blocks.back()));
  owner.Shutdown();  // folds the remote free in: empty, released
  EXPECT_EQ(t.backend.live_pools(), 0);
  PoolStats total = owner.stats();
  AddStats(&total, other.stats());
  EXPECT_EQ(total.pools_created, total.pools_released);
}

}  // namespace
}  // namespace pool
}  // namespace poolscope
