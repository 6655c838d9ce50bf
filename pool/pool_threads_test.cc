// File: pool/pool_threads_test.cc
//
// Cross-thread frees against the retire handshake; run under --config=tsan too.
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "pool/fake_backend.h"
#include "pool/pool.h"
#include "pool/thread_cache.h"

namespace poolscope {
namespace pool {
namespace {

// A single-producer single-consumer ring of pointers.
class Ring {
 public:
  bool Push(void* p) {
    size_t h = head_.load(std::memory_order_relaxed);
    if (h - tail_.load(std::memory_order_acquire) == kSize) return false;
    slots_[h % kSize] = p;
    head_.store(h + 1, std::memory_order_release);
    return true;
  }
  void* Pop() {
    size_t t = tail_.load(std::memory_order_relaxed);
    if (t == head_.load(std::memory_order_acquire)) return nullptr;
    void* p = slots_[t % kSize];
    tail_.store(t + 1, std::memory_order_release);
    return p;
  }

 private:
  static constexpr size_t kSize = 256;
  void* slots_[kSize];
  std::atomic<size_t> head_{0}, tail_{0};
};

struct Totals {
  long created = 0, released = 0, pooled_frees = 0, hits = 0, errors = 0;
  void Add(const PoolStats& s) {
    created += static_cast<long>(s.pools_created);
    released += static_cast<long>(s.pools_released);
    pooled_frees += static_cast<long>(s.pooled_frees);
    hits += static_cast<long>(s.hits);
    errors += static_cast<long>(s.invalid_frees + s.double_frees);
  }
};

TEST(PoolThreadsTest, CrossThreadFreesNeverLeakSecretsOrPools) {
  TestDomain t(Config{true, 64, 4, false});
  constexpr int kBlocks = 200000;
  Ring ring;
  std::atomic<bool> done{false};
  std::atomic<long> dirty{0};
  ThreadCache producer_tc(&t.domain);
  ThreadCache consumer_tc(&t.domain);
  std::thread producer([&] {
    for (int i = 0; i < kBlocks; ++i) {
      size_t n = 1 + static_cast<size_t>(i % 48);
      char* p = static_cast<char*>(producer_tc.Carve(n));
      for (size_t k = 0; k < n; ++k) {
        if (p[k] != 0) ++dirty;
      }
      memset(p, 0xEE, n);  // a secret the next owner of these bytes must never see
      while (!ring.Push(p)) std::this_thread::yield();
    }
    done.store(true);
  });
  std::thread consumer([&] {
    long freed = 0;
    while (freed < kBlocks) {
      void* p = ring.Pop();
      if (p == nullptr) {
        std::this_thread::yield();
        continue;
      }
      PoolHeader* h = t.domain.Find(p);
      ASSERT_NE(h, nullptr);
      ASSERT_EQ(consumer_tc.Free(h, p), Domain::FreeResult::kFreed);
      ++freed;
      // The consumer allocates too, from pools the producer's frees may have handed it.
      char* q = static_cast<char*>(consumer_tc.Carve(24));
      for (int k = 0; k < 24; ++k) {
        if (q[k] != 0) ++dirty;
      }
      memset(q, 0xDD, 24);
      consumer_tc.Free(t.domain.Find(q), q);
    }
  });
  producer.join();
  consumer.join();
  EXPECT_EQ(dirty.load(), 0);
  Totals totals;
  totals.Add(producer_tc.stats());
  totals.Add(consumer_tc.stats());
  EXPECT_EQ(totals.errors, 0);
  EXPECT_EQ(totals.pooled_frees, totals.hits);
  // Every pool the backend holds is somebody's current pool or cached.
  long held = producer_tc.cached() + consumer_tc.cached() + (producer_tc.has_current() ? 1 : 0) +
              (consumer_tc.has_current() ? 1 : 0);
  EXPECT_EQ(t.backend.live_pools(), held);
  EXPECT_EQ(totals.created - totals.released, held);
  producer_tc.Shutdown();
  consumer_tc.Shutdown();
  EXPECT_EQ(t.backend.live_pools(), 0);
}

TEST(PoolThreadsTest, RemoteDoubleFreeIsCaught) {
  TestDomain t(Config{true, 64, 4, false});
  ThreadCache owner(&t.domain);
  ThreadCache other(&t.domain);
  void* p = owner.Carve(8);
  std::thread([&] {
    EXPECT_EQ(other.Free(t.domain.Find(p), p), Domain::FreeResult::kFreed);
    EXPECT_EQ(other.Free(t.domain.Find(p), p), Domain::FreeResult::kDouble);
  }).join();
  EXPECT_EQ(other.stats().double_frees, 1u);
  // The owner folds the remote free in on its slow path: the pool resets instead of retiring.
  owner.Carve(64);
  EXPECT_EQ(t.backend.pool_allocs, 1);
  EXPECT_EQ(owner.stats().resets_in_place, 1u);
}

// A block freed by another thread and then freed again by its owner (before the owner folded the
// remote free in) is a double free: caught, counted, and it must not free a live neighbour.
TEST(PoolThreadsTest, OwnerFreeAfterRemoteFreeIsADoubleFree) {
  TestDomain t(Config{true, 64, 4, false});
  ThreadCache owner(&t.domain);
  ThreadCache other(&t.domain);
  char* a = static_cast<char*>(owner.Carve(16));
  char* b = static_cast<char*>(owner.Carve(16));
  b[0] = 42;
  std::thread([&] { EXPECT_EQ(other.Free(t.domain.Find(a), a), Domain::FreeResult::kFreed); }).join();
  EXPECT_EQ(owner.Free(t.domain.Find(a), a), Domain::FreeResult::kDouble);
  EXPECT_EQ(owner.stats().double_frees, 1u);
  // b is still live: the pool must neither reset nor hand b's bytes out again.
  char* c = static_cast<char*>(owner.Carve(32));
  EXPECT_NE(c, b);
  EXPECT_EQ(b[0], 42);
  EXPECT_EQ(owner.stats().resets_in_place, 0u);
  EXPECT_EQ(owner.Free(t.domain.Find(b), b), Domain::FreeResult::kFreed);
}

// The block carved last, freed by another thread and then by its owner with no fold in between: a
// double free. The owner's LIFO free does not look at remote bits; the remote free must have taken
// the block back from the owner's last block. Also when it is the pool's only block (the LIFO free
// that would reset the pool).
TEST(PoolThreadsTest, OwnerFreeOfLastBlockAfterRemoteFreeIsADoubleFree) {
  TestDomain t(Config{true, 64, 4, false});
  ThreadCache owner(&t.domain);
  ThreadCache other(&t.domain);
  char* a = static_cast<char*>(owner.Carve(16));
  char* b = static_cast<char*>(owner.Carve(16));  // carved last
  a[0] = 42;
  std::thread([&] { EXPECT_EQ(other.Free(t.domain.Find(b), b), Domain::FreeResult::kFreed); }).join();
  EXPECT_EQ(owner.Free(t.domain.Find(b), b), Domain::FreeResult::kDouble);
  EXPECT_EQ(owner.stats().double_frees, 1u);
  // b's bytes were not handed back to the carve point: the next block goes after b.
  char* c = static_cast<char*>(owner.Carve(16));
  EXPECT_EQ(c, b + 16);
  EXPECT_EQ(a[0], 42);
  EXPECT_EQ(owner.Free(t.domain.Find(c), c), Domain::FreeResult::kFreed);
  EXPECT_EQ(owner.Free(t.domain.Find(a), a), Domain::FreeResult::kFreed);
  EXPECT_EQ(owner.stats().resets_in_place, 0u);  // b's remote free is not folded in yet: b counts live
  // The pool's only block.
  TestDomain t2(Config{true, 64, 4, false});
  ThreadCache owner2(&t2.domain);
  ThreadCache other2(&t2.domain);
  char* p = static_cast<char*>(owner2.Carve(5));
  std::thread([&] { EXPECT_EQ(other2.Free(t2.domain.Find(p), p), Domain::FreeResult::kFreed); }).join();
  EXPECT_EQ(owner2.Free(t2.domain.Find(p), p), Domain::FreeResult::kDouble);
  EXPECT_EQ(owner2.stats().resets_in_place, 0u);
  EXPECT_EQ(owner2.stats().double_frees, 1u);
  // The next carve finds the remote free, folds it in and starts the pool again, zeroed.
  char* q = static_cast<char*>(owner2.Carve(64));
  EXPECT_EQ(q, p);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(q[i], 0) << i;
  for (ThreadCache* tc : {&owner, &other, &owner2, &other2}) tc->Shutdown();
}

// The block carved last, freed by another thread and folded in by its owner (drain_at_exit's Drain folds
// while other blocks stay live), then freed by the owner: still a double free. The owner's LIFO free
// trusts that it only sees a live block, so folding must forget the block carved last.
TEST(PoolThreadsTest, OwnerFreeOfLastBlockAfterRemoteFreeFoldedInIsADoubleFree) {
  TestDomain t(Config{true, 64, 4, false});
  ThreadCache owner(&t.domain);
  ThreadCache other(&t.domain);
  char* a = static_cast<char*>(owner.Carve(16));
  char* b = static_cast<char*>(owner.Carve(16));  // carved last
  std::thread([&] { EXPECT_EQ(other.Free(t.domain.Find(b), b), Domain::FreeResult::kFreed); }).join();
  owner.Drain();  // folds the remote free in; a is live, so the pool stays current
  ASSERT_NE(owner.current(), nullptr);
  EXPECT_EQ(owner.Free(t.domain.Find(b), b), Domain::FreeResult::kDouble);
  EXPECT_EQ(owner.stats().double_frees, 1u);
  EXPECT_EQ(owner.Free(t.domain.Find(a), a), Domain::FreeResult::kFreed);
  // Nothing is live now: the next carve reuses the pool from its start, zeroed.
  char* c = static_cast<char*>(owner.Carve(64));
  EXPECT_EQ(c, a);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(c[i], 0) << i;
  EXPECT_EQ(t.backend.pool_allocs, 1);
  owner.Shutdown();
  other.Shutdown();
}

// A remote free sets its block's remote bit, then still writes the pool's header (its one in `state`).
// If the owner drains (thread exit) between the two, folds the bit in and finds the pool empty, it
// must not release the pool (and its header) under that free. The test holds a free in that window by
// hand.
TEST(PoolThreadsTest, DrainWaitsForARemoteFreeStillInFlight) {
  TestDomain t(Config{true, 64, 4, false});
  ThreadCache owner(&t.domain);
  char* p = static_cast<char*>(owner.Carve(16));  // the pool's only block
  PoolHeader* h = t.domain.Find(p);
  ASSERT_NE(h, nullptr);
  // What FreeSlow has done for a remote free of p when it stops after setting the bit.
  h->state.fetch_add(1, std::memory_order_seq_cst);
  const size_t g = static_cast<size_t>(p - t.domain.BaseOf(h)) / kGranule;
  t.domain.RemoteByte(h, g).fetch_or(Domain::RemoteBit(g), std::memory_order_release);
  std::atomic<bool> drained{false};
  std::thread drainer([&] {
    owner.Drain();
    drained.store(true, std::memory_order_release);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(drained.load(std::memory_order_acquire));
  EXPECT_EQ(t.backend.pool_frees.load(), 0);
  h->state.fetch_sub(1, std::memory_order_release);  // the free leaves
  drainer.join();
  EXPECT_EQ(t.backend.pool_frees.load(), 1);
  EXPECT_EQ(owner.current(), nullptr);
  owner.Shutdown();
}

// Pools of 128 bytes (their metadata on one line) and of 512 (metadata over two): both layouts under
// the same churn.
void ManyThreadsChurn(size_t pool_size) {
  TestDomain t(Config{true, pool_size, 2, false});
  constexpr int kThreads = 8;
  std::vector<std::atomic<void*>> mailbox(kThreads * 64);
  for (auto& m : mailbox) m.store(nullptr);
  std::vector<ThreadCache*> caches;
  for (int i = 0; i < kThreads; ++i) caches.push_back(new ThreadCache(&t.domain));
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) {
    threads.emplace_back([&, id] {
      ThreadCache* tc = caches[static_cast<size_t>(id)];
      for (int round = 0; round < 20000; ++round) {
        void* p = tc->Carve(static_cast<size_t>(1 + (round * 7 + id) % 100));
        // Swap it into a random mailbox and free what was there (often another thread's block).
        size_t slot = static_cast<size_t>((round * 31 + id * 17) % (kThreads * 64));
        void* old = mailbox[slot].exchange(p);
        if (old != nullptr) {
          ASSERT_EQ(tc->Free(t.domain.Find(old), old), Domain::FreeResult::kFreed);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (auto& m : mailbox) {
    void* p = m.exchange(nullptr);
    if (p != nullptr) caches[0]->Free(t.domain.Find(p), p);
  }
  Totals totals;
  for (auto* tc : caches) totals.Add(tc->stats());
  EXPECT_EQ(totals.errors, 0);
  EXPECT_EQ(totals.hits, totals.pooled_frees);
  for (auto* tc : caches) tc->Shutdown();
  EXPECT_EQ(t.backend.live_pools(), 0) << "every pool comes back once all its blocks are freed";
  for (auto* tc : caches) delete tc;
}

TEST(PoolThreadsTest, ManyThreadsChurn) { ManyThreadsChurn(128); }
TEST(PoolThreadsTest, ManyThreadsChurnLargePools) { ManyThreadsChurn(512); }

// Leak tracking's walk of every pool's marks, while threads carve, free each other's blocks, retire,
// release and re-create pools: everything it lists has the shape of a block (a granule of a pool, a
// size that fits, a stack id a thread gave), and once the threads stop it lists exactly the blocks
// still live, each with the size and id noted for it. Under --config=tsan, the walk's reads of slots
// being recycled are checked too.
TEST(PoolThreadsTest, WalkWhileThreadsChurnSeesBlocksAndEndsExact) {
  Config config{true, 64, 1, false};
  config.block_info = true;
  TestDomain t(config);
  constexpr int kThreads = 4;
  constexpr size_t kSlots = kThreads * 64;
  std::vector<std::atomic<void*>> mailbox(kSlots);
  for (auto& m : mailbox) m.store(nullptr);
  std::vector<ThreadCache*> caches;
  for (int i = 0; i < kThreads; ++i) caches.push_back(new ThreadCache(&t.domain));
  std::atomic<bool> stop{false};
  std::atomic<long> walks{0}, bad{0};
  std::thread walker([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      t.domain.ForEachLiveBlock([&](void* p, BlockInfo info) {
        const uintptr_t a = reinterpret_cast<uintptr_t>(p);
        // Ids are 1000 * thread + size. A block carved but not noted yet shows its slot's old size
        // and id (zeros in a slot never used), and one being noted may show its new id with its old
        // size or the reverse; but each is one some thread wrote, never torn bytes.
        const uint32_t id = info.stack_id, size = id % 1000;
        const bool id_written = id == 0 || (size >= 1 && size <= 64 && id / 1000 < kThreads);
        const bool shaped = a % kGranule == 0 && id_written && info.size <= 64;
        if (!shaped) bad.fetch_add(1, std::memory_order_relaxed);
      });
      walks.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) {
    threads.emplace_back([&, id] {
      ThreadCache* tc = caches[static_cast<size_t>(id)];
      for (int round = 0; round < 20000; ++round) {
        const uint32_t n = static_cast<uint32_t>(1 + (round * 7 + id) % 64);
        void* p = tc->Carve(n);
        ASSERT_NE(p, nullptr);
        NoteCarved(*tc, p, n, static_cast<uint32_t>(1000 * id) + n);
        size_t slot = static_cast<size_t>((round * 31 + id * 17) % static_cast<int>(kSlots));
        void* old = mailbox[slot].exchange(p);
        if (old != nullptr) {
          ASSERT_EQ(tc->Free(t.domain.Find(old), old), Domain::FreeResult::kFreed);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  while (walks.load() < 2) std::this_thread::yield();
  stop.store(true);
  walker.join();
  EXPECT_EQ(bad.load(), 0);
  std::map<void*, BlockInfo> listed;
  t.domain.ForEachLiveBlock([&](void* p, BlockInfo info) { listed[p] = info; });
  size_t live = 0;
  for (auto& m : mailbox) {
    void* p = m.load();
    if (p == nullptr) continue;
    ++live;
    ASSERT_TRUE(listed.count(p)) << "live block " << p << " not listed";
  }
  EXPECT_EQ(listed.size(), live);
  for (auto& m : mailbox) {
    void* p = m.exchange(nullptr);
    if (p != nullptr) caches[0]->Free(t.domain.Find(p), p);
  }
  size_t after = 0;
  t.domain.ForEachLiveBlock([&](void*, BlockInfo) { ++after; });
  EXPECT_EQ(after, 0u);
  for (auto* tc : caches) tc->Shutdown();
  for (auto* tc : caches) delete tc;
}

}  // namespace
}  // namespace pool
}  // namespace poolscope
