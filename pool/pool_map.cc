// File: pool/pool_map.cc
//
// Leaf reservation and range marking for PoolMap; see pool_map.h.
#include "pool/pool_map.h"

#include <algorithm>

#include "track/populate.h"

namespace poolscope {
namespace pool {

PoolMap::Leaf* PoolMap::LeafFor(uintptr_t a, bool create) {
  std::atomic<Leaf*>& slot = root_[a >> kLeafShift];
  Leaf* leaf = slot.load(std::memory_order_acquire);
  if (leaf != nullptr || !create) return leaf;
  Leaf* fresh = static_cast<Leaf*>(source_->ReserveLeaf(sizeof(Leaf)));
  if (fresh == nullptr) return nullptr;
  if (slot.compare_exchange_strong(leaf, fresh, std::memory_order_acq_rel)) return fresh;
  // Another thread installed one first. The reservation is not returned: leaves are few (one per GiB
  // of address space that holds pools) and never freed.
  return leaf;
}

void PoolMap::PopulateAhead(uintptr_t begin, uintptr_t at, size_t bytes) {
  const uintptr_t done = populated_.load(std::memory_order_relaxed);
  const uintptr_t end = at + bytes;
  if (done == 0 || end > done + kMapPage) {
    populated_.store((end - 1 + kMapPage) & ~(kMapPage - 1), std::memory_order_relaxed);
    return;
  }
  // Nothing past the leaf's reservation is the map's (Insert's fast path: the pool's entries lie in
  // one leaf, which exists).
  const uintptr_t leaf = reinterpret_cast<uintptr_t>(root_[begin >> kLeafShift].load(std::memory_order_relaxed));
  const uintptr_t to = std::min(done + kPopulateAhead, leaf + sizeof(Leaf));
  if (to > done) track::PopulateRange(done, to, to);
  populated_.store(done + kPopulateAhead, std::memory_order_relaxed);
}

bool PoolMap::InsertSlow(const void* begin, bool meta_after) {
  uintptr_t a = reinterpret_cast<uintptr_t>(begin);
  uintptr_t end = a + pool_bytes_;
  if ((end - 1) >> kAddressBits) return false;
  // Reserve every leaf first so that a failure leaves nothing half-marked.
  for (uintptr_t l = a >> kLeafShift; l <= (end - 1) >> kLeafShift; ++l) {
    if (LeafFor(l << kLeafShift, true) == nullptr) return false;
  }
  uint32_t index = 1;
  for (uintptr_t line = a; line < end; line += uintptr_t{1} << kLineShift, ++index) {
    Leaf* leaf = LeafFor(line, false);
    leaf->page[(line >> kPageShift) & (kPagesPerLeaf - 1)]
        .line[(line >> kLineShift) & (kLinesPerPage - 1)]
        .store(static_cast<uint16_t>(index << 1 | (meta_after ? 1 : 0)), std::memory_order_relaxed);
  }
  return true;
}

void PoolMap::EraseSlow(const void* begin) {
  uintptr_t a = reinterpret_cast<uintptr_t>(begin);
  for (uintptr_t line = a; line < a + pool_bytes_; line += uintptr_t{1} << kLineShift) {
    Leaf* leaf = LeafFor(line, false);
    if (leaf == nullptr) continue;
    leaf->page[(line >> kPageShift) & (kPagesPerLeaf - 1)]
        .line[(line >> kLineShift) & (kLinesPerPage - 1)]
        .store(0, std::memory_order_relaxed);
  }
}

}  // namespace pool
}  // namespace poolscope
