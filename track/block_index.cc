// File: track/block_index.cc
//
// BlockIndex (reachability.h): the blocks, sorted by start, are looked up in place (a 16-byte ScanBlock
// holds the start, size and state: one cache line answers a lookup). They fall into regions: runs of
// blocks whose gaps are all below kRegionGap. Each region has a page index: for each page (2^shift
// bytes: the smallest power of two from 16 bytes up that keeps the index within one entry per block)
// of [region base, region end), the index of the first block that starts at or after the page, plus
// one sentinel. The classifier (reachability.cc) looks words up through it.
#include <algorithm>

#include "track/reachability.h"
#include "track/reachability_internal.h"

namespace poolscope {
namespace track {

using namespace reachability_internal;

namespace {

// One pass over the blocks, which are large arrays: resets each block's state, counts them all
// unreached (*unreached, and the pooled ones *pooled_total), and finds the highest end (*hi) and the
// regions, runs of blocks whose gaps are all below kRegionGap: each one's `first` and `end` (its `base`
// and `index` depend on the page size, chosen later) in regions[0, *nregions). Returns whether the blocks were sorted by start (when
// they were not, what it found is to be found again after sorting them).
bool Prepare(ScanBlock* blocks, uint32_t n, LeakTotal* unreached, LeakTotal* pooled_total, Region* regions,
             uint32_t* nregions, uintptr_t* hi) {
  bool sorted = true;
  uint32_t count = 0;
  uintptr_t high = 0, end = 0, prev = 0;
  uint64_t bytes = 0, pooled = 0, pooled_bytes = 0;
  for (uint32_t i = 0; i < n; ++i) {
    ScanBlock& b = blocks[i];
    SetState(b, kUnreached);
    bytes += b.size();
    pooled += b.pooled();
    pooled_bytes += b.pooled() ? b.size() : 0;
    sorted &= prev <= b.start;
    prev = b.start;
    const uintptr_t e = BlockEnd(b);
    if (count == 0 || b.start >= end + kRegionGap) {
      if (count > 0) regions[count - 1].end = end;
      regions[count++] = Region{0, e, i, 0};
      end = e;
    } else {
      end = std::max(end, e);
    }
    high = std::max(high, e);
  }
  if (count > 0) regions[count - 1].end = end;
  *nregions = count;
  *hi = n > 0 ? high : 0;
  *unreached = LeakTotal{n, bytes};
  *pooled_total = LeakTotal{pooled, pooled_bytes};
  return sorted;
}

// The page index's entries, sentinels included, with pages of 2^shift bytes.
size_t PagesNeeded(const ScanBlock* blocks, const Region* regions, uint32_t nregions, unsigned shift) {
  size_t pages = 0;
  for (uint32_t r = 0; r < nregions; ++r) {
    const uintptr_t base = blocks[regions[r].first].start & ~((uintptr_t{1} << shift) - 1);
    pages += ((regions[r].end - base - 1) >> shift) + 2;
  }
  return pages;
}

}  // namespace

BlockIndex::~BlockIndex() {
  if (regions_ != nullptr) scratch_.Unmap(regions_, regions_bytes_);
  if (pages_ != nullptr) scratch_.Unmap(pages_, pages_bytes_);
}

bool BlockIndex::Build(ScanBlock* blocks, size_t n) {
  if (n >= kNone || regions_ != nullptr) return false;
  const uint32_t count = static_cast<uint32_t>(n);
  // Room for a region a block; only the regions there are get touched.
  regions_bytes_ = (n + 1) * sizeof(Region);
  regions_ = scratch_.MapSparse(regions_bytes_);
  if (regions_ == nullptr) return false;
  Region* regions = static_cast<Region*>(regions_);
  if (!Prepare(blocks, count, &unreached_, &pooled_, regions, &nregions_, &hi_)) {
    std::sort(blocks, blocks + n, [](const ScanBlock& a, const ScanBlock& b) { return a.start < b.start; });
    Prepare(blocks, count, &unreached_, &pooled_, regions, &nregions_, &hi_);
  }
  lo_ = n > 0 ? blocks[0].start : 0;

  // The page index: the finest pages that take at most one index entry per block.
  unsigned shift = 4;
  size_t npages = PagesNeeded(blocks, regions, nregions_, shift);
  while (npages > size_t{count} + 2 * size_t{nregions_} + 1024 && shift < 40) {
    ++shift;
    npages = PagesNeeded(blocks, regions, nregions_, shift);
  }
  pages_bytes_ = (npages + 1) * sizeof(uint32_t);
  pages_ = static_cast<uint32_t*>(scratch_.Map(pages_bytes_));
  if (pages_ == nullptr) return false;
  const uintptr_t page_mask = (uintptr_t{1} << shift) - 1;
  uint32_t next_page = 0;
  for (uint32_t r = 0; r < nregions_; ++r) {
    Region& reg = regions[r];
    const uint32_t j = r + 1 < nregions_ ? regions[r + 1].first : count;
    reg.base = blocks[reg.first].start & ~page_mask;
    reg.index = next_page;
    // pages[index + p] = first block of the region starting at or after base + p * page.
    const uint32_t npg = static_cast<uint32_t>(((reg.end - reg.base - 1) >> shift) + 1);
    uint32_t k = reg.first;
    for (uint32_t p = 0; p <= npg; ++p) {
      const uintptr_t page_start = reg.base + (uintptr_t{p} << shift);
      while (k < j && blocks[k].start < page_start) ++k;
      pages_[next_page++] = k;
    }
  }
  blocks_ = blocks;
  n_ = count;
  shift_ = shift;
  built_ = true;
  return true;
}

}  // namespace track
}  // namespace poolscope
