// File: pool/fake_backend.h
//
// A Backend for tests: real memory from the C library, and counters for every call so tests can check
// the pool's real-allocation ledger exactly. Thread-safe (atomic counters).
#ifndef POOLSCOPE_POOL_FAKE_BACKEND_H_
#define POOLSCOPE_POOL_FAKE_BACKEND_H_

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "pool/pool.h"

namespace poolscope {
namespace pool {

class FakeBackend : public Backend {
 public:
  std::atomic<long> pool_allocs{0};
  std::atomic<long> pool_frees{0};
  std::atomic<long> meta_allocs{0};
  std::atomic<long> meta_frees{0};
  std::atomic<long> leaves{0};
  bool fail_pools = false;
  // Fill fresh pool memory with this byte, to prove the pool zeroes what the allocator returns.
  int fill = 0xA5;

  // What a test leaves behind (pools of caches it never shut down, orphaned pools) is freed here.
  ~FakeBackend() override {
    for (void* p : outstanding_) free(p);
    for (auto& leaf : leaves_) munmap(leaf.first, leaf.second);
  }

  void* AllocPool(size_t bytes) override {
    if (fail_pools) return nullptr;
    void* p = aligned_alloc(64, bytes);
    if (p != nullptr) memset(p, fill, bytes);
    ++pool_allocs;
    Track(p);
    return p;
  }
  void FreePool(void* p) override {
    ++pool_frees;
    Untrack(p);
    free(p);
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
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return nullptr;
    ++leaves;
    std::lock_guard<std::mutex> lock(mu_);
    leaves_.emplace_back(p, bytes);
    return p;
  }
  long live_pools() const { return pool_allocs - pool_frees; }

 private:
  void Track(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    outstanding_.insert(p);
  }
  void Untrack(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    outstanding_.erase(p);
  }
  std::mutex mu_;
  std::set<void*> outstanding_;
  std::vector<std::pair<void*, size_t>> leaves_;
};

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
