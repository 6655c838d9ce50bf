// File: track/fake_memory.h
//
// DepotMemory for tests: zeroed, 64-byte aligned blocks from aligned_alloc, counted, freed by Free or
// when the fake is destroyed, with an optional byte budget past which Alloc returns nullptr. Thread-safe.
#ifndef POOLSCOPE_TRACK_FAKE_MEMORY_H_
#define POOLSCOPE_TRACK_FAKE_MEMORY_H_

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "track/depot_memory.h"

namespace poolscope {
namespace track {

class FakeMemory : public DepotMemory {
 public:
  explicit FakeMemory(size_t budget = ~size_t{0}) : budget_(budget) {}
  ~FakeMemory() override {
    for (void* p : blocks_) free(p);
  }

  void* Alloc(size_t bytes) override {
    std::lock_guard<std::mutex> l(mu_);
    ++nallocs_;
    if (bytes > budget_ - bytes_) return nullptr;
    size_t rounded = (bytes + 63) & ~size_t{63};
    void* p = aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (p == nullptr) return nullptr;
    memset(p, 0, rounded);
    bytes_ += bytes;
    blocks_.push_back(p);
    sizes_.push_back(rounded);
    return p;
  }

  void Free(void* p, size_t bytes) override {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& b : blocks_) {
      if (b != p) continue;
      free(b);
      b = nullptr;
      bytes_ -= bytes;
      ++nfrees_;
      return;
    }
  }

  size_t bytes() const {
    std::lock_guard<std::mutex> l(mu_);
    return bytes_;
  }
  template <typename F>
  void ForEachBlock(F&& f) const {
    std::lock_guard<std::mutex> l(mu_);
    for (size_t i = 0; i < blocks_.size(); ++i) {
      if (blocks_[i] != nullptr) f(blocks_[i], sizes_[i]);
    }
  }

  size_t nallocs() const {
    std::lock_guard<std::mutex> l(mu_);
    return nallocs_;
  }

 private:
  mutable std::mutex mu_;
  const size_t budget_;
  size_t bytes_ = 0;
  size_t nallocs_ = 0;
  size_t nfrees_ = 0;
  std::vector<void*> blocks_;
  std::vector<size_t> sizes_;
};

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_FAKE_MEMORY_H_
