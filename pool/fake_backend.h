// File: pool/fake_backend.h
//
// A Backend for tests: real memory from the C library, and counters for every call so tests can check
// the pool's real-allocation ledger exactly. Thread-safe (atomic counters).
#ifndef POOLSCOPE_POOL_FAKE_BACKEND_H_
#define POOLSCOPE_POOL_FAKE_BACKEND_H_

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "pool/thread_cache.h"

namespace poolscope {
namespace pool {

// The pools' tests' configurations: the defaults but for the pool size, the cache and malloc_align=8.
inline Config Cfg(size_t pool_size = 64, int max_cached = 4, bool align8 = false) {
  Config c;
  c.pool_size = pool_size;
  c.max_cached = max_cached;
  c.align8 = align8;
  return c;
}

// Cfg with a BlockInfo word per granule, as leak tracking runs it.
inline Config TrackedCfg(size_t pool_size = 64, int max_cached = 4) {
  Config c = Cfg(pool_size, max_cached);
  c.block_info = true;
  return c;
}

class FakeBackend : public Backend {
 public:
  std::atomic<long> pool_allocs{0};
  std::atomic<long> pool_frees{0};
  std::atomic<long> meta_allocs{0};
  std::atomic<long> meta_frees{0};
  std::atomic<long> leaves{0};
  std::atomic<long> leaf_attempts{0};  // ReserveLeaf calls, refused ones included
  bool fail_pools = false;
  // ReserveLeaf refuses every reservation of this many bytes (SIZE_MAX: of any size), as an
  // address-space limit would.
  size_t fail_leaves_of = 0;
  // Fill fresh pool memory with this byte, to prove the pool zeroes what the allocator returns.
  int fill = 0xA5;
  // Each pool's real block is followed by kTail bytes of kTailByte, checked when it is freed: neither
  // the pool nor its metadata may write past the real block's end.
  static constexpr size_t kTail = 64;
  static constexpr unsigned char kTailByte = 0xE7;
  std::atomic<long> tail_overwrites{0};
  std::atomic<long> unknown_pool_frees{0};  // FreePool of anything but a live AllocPool block

  // What a test leaves behind (pools of caches it never shut down, orphaned pools) is freed here.
  ~FakeBackend() override {
    for (void* p : outstanding_) free(p);
    for (auto& leaf : leaves_) munmap(leaf.first, leaf.second);
  }

  // Real blocks start 0, 16, 32 and 48 bytes past a 64-byte boundary in turn, as malloc's do, so that
  // pools' metadata lies before some pools and after others.
  void* AllocPool(size_t bytes) override {
    if (fail_pools) return nullptr;
    const size_t skew = 16 * (static_cast<size_t>(skew_turn_.fetch_add(1)) % 4);
    char* raw = static_cast<char*>(aligned_alloc(64, (bytes + 64 + kTail + 63) & ~size_t{63}));
    char* p = raw == nullptr ? nullptr : raw + skew;
    if (p != nullptr) {
      memset(p, fill, bytes);
      memset(p + bytes, kTailByte, kTail);
      std::lock_guard<std::mutex> lock(mu_);
      pool_bytes_[p] = bytes;
      raw_[p] = raw;
    }
    ++pool_allocs;
    Track(raw);
    return p;
  }
  void FreePool(void* p) override {
    ++pool_frees;
    CheckTail(p);
    void* raw;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = raw_.find(p);
      if (it == raw_.end()) {  // not a real block AllocPool returned (or one freed already)
        ++unknown_pool_frees;
        return;
      }
      raw = it->second;
      raw_.erase(it);
    }
    Untrack(p);
    Untrack(raw);
    free(raw);
  }
  // Checks the tails of the pools not freed yet (freed ones were checked then); returns
  // tail_overwrites.
  long CheckTails() {
    std::vector<void*> pools;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& e : pool_bytes_) pools.push_back(e.first);
    }
    for (void* p : pools) CheckTail(p);
    return tail_overwrites;
  }
  void* AllocMeta(size_t bytes) override {
    ++meta_allocs;
    void* p = aligned_alloc(64, (bytes + 63) & ~size_t{63});
    Track(p);
    return p;
  }
  void FreeMeta(void* p, size_t) override {
    ++meta_frees;
    Untrack(p);
    free(p);
  }
  void* ReserveLeaf(size_t bytes) override {
    ++leaf_attempts;
    if (fail_leaves_of == bytes || fail_leaves_of == SIZE_MAX) return nullptr;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return nullptr;
    ++leaves;
    std::lock_guard<std::mutex> lock(mu_);
    leaves_.emplace_back(p, bytes);
    return p;
  }
  long live_pools() const { return pool_allocs - pool_frees; }
  // The real block (AllocPool's) that holds `p`, or nullptr.
  void* RealOf(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pool_bytes_.upper_bound(const_cast<void*>(p));
    if (it == pool_bytes_.begin()) return nullptr;
    --it;
    return static_cast<const char*>(p) < static_cast<char*>(it->first) + it->second ? it->first : nullptr;
  }
  // Resident bytes (mincore) of the reservations of exactly `bytes` each: the pool list's chunks or
  // the map's leaves, told apart by their size.
  size_t ResidentReserved(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t resident = 0;
    for (auto& leaf : leaves_) {
      if (leaf.second != bytes) continue;
      std::vector<unsigned char> vec((bytes + 4095) / 4096);
      if (mincore(leaf.first, bytes, vec.data()) != 0) continue;
      for (unsigned char v : vec) resident += (v & 1) * size_t{4096};
    }
    return resident;
  }

 private:
  void Track(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    outstanding_.insert(p);
  }
  void Untrack(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    outstanding_.erase(p);
    pool_bytes_.erase(p);
  }
  void CheckTail(void* p) {
    size_t bytes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pool_bytes_.find(p);
      if (it == pool_bytes_.end()) return;
      bytes = it->second;
    }
    const unsigned char* t = static_cast<const unsigned char*>(p) + bytes;
    for (size_t i = 0; i < kTail; ++i) {
      if (t[i] != kTailByte) {
        ++tail_overwrites;
        return;
      }
    }
  }
  std::mutex mu_;
  std::set<void*> outstanding_;
  std::map<void*, size_t> pool_bytes_;
  std::map<void*, void*> raw_;  // a pool's real block -> what aligned_alloc returned
  std::atomic<unsigned> skew_turn_{0};
  std::vector<std::pair<void*, size_t>> leaves_;
};

// Leak tracking's note of a block just carved from tc's current pool, as the shim makes it.
inline void NoteCarved(ThreadCache& tc, const void* p, uint32_t size, uint32_t stack_id) {
  StoreBlockInfo(tc.InfoSlot(p), size, stack_id);
}

// Whether the n bytes at p are all zero (a pool handed out, a block carved).
inline bool AllZero(const void* p, size_t n) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    if (c[i] != 0) return false;
  }
  return true;
}

// A Domain with its own map root, for one test.
struct TestDomain {
  explicit TestDomain(Config config)
      : root(new std::atomic<PoolMap::Leaf*>[PoolMap::kRootSize]()),
        domain(config, &backend, root.get()) {}
  FakeBackend backend;
  std::unique_ptr<std::atomic<PoolMap::Leaf*>[]> root;
  Domain domain;
};

}  // namespace pool
}  // namespace poolscope

#endif  // POOLSCOPE_POOL_FAKE_BACKEND_H_
