// File: track/reachability.cc
//
// Lookup structure: the blocks, sorted by start, fall into regions: runs of blocks whose gaps are all
// below kRegionGap. Each region has a page index: for each page (2^shift bytes, 4 KiB unless the
// index would outgrow its budget) of [region base, region end), the index of the first block that
// starts at or after the page, plus one sentinel. A word that passes the [lowest start, highest end)
// filter costs a binary search over the (few) regions, then one over the blocks starting in its page.
//
// Mark stack: a block is pushed when it becomes Possible and when it becomes Reachable, at most twice in
// all, so 2n entries always suffice; while cliques are formed a block is pushed only when it leaves
// Unreached.
#include "track/reachability.h"

#include <string.h>
#include <sys/mman.h>

#include <algorithm>

namespace poolscope {
namespace track {

void* MmapScratchMemory::Map(size_t bytes) {
  if (bytes == 0) bytes = 1;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void MmapScratchMemory::Unmap(void* p, size_t bytes) {
  if (p != nullptr) munmap(p, bytes == 0 ? 1 : bytes);
}

size_t DirectMemoryReader::Read(uintptr_t addr, void* buf, size_t n) {
  memcpy(buf, reinterpret_cast<const void*>(addr), n);
  return n;
}

namespace {

enum State : uint8_t { kUnreached = 0, kPossible = 1, kReachable = 2, kIndirect = 3 };

constexpr uintptr_t kPage = 4096;
constexpr uintptr_t kRegionGap = uintptr_t{1} << 16;
constexpr size_t kReadBuffer = size_t{1} << 16;
constexpr uint32_t kNone = ~uint32_t{0};

struct Region {
  uintptr_t base;   // first block's start, rounded down to the index's page
  uintptr_t end;    // highest end of the region's blocks (a size-0 block ends at start + 1)
  uint32_t first;   // first block of the region
  uint32_t index;   // where its page index starts in Index::pages
};

// One mapping of scratch memory, given back when the classifier returns.
class ScratchArray {
 public:
  ScratchArray(ScratchMemory& m, size_t bytes) : m_(m), bytes_(bytes), p_(m.Map(bytes)) {}
  ~ScratchArray() { m_.Unmap(p_, bytes_); }
  ScratchArray(const ScratchArray&) = delete;
  ScratchArray& operator=(const ScratchArray&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  bool ok() const { return p_ != nullptr; }

 private:
  ScratchMemory& m_;
  size_t bytes_;
  void* p_;
};

inline uintptr_t BlockEnd(const ScanBlock& b) { return b.start + (b.size == 0 ? 1 : b.size); }

class Classifier {
 public:
  Classifier(ScanBlock* blocks, uint32_t n, const uintptr_t* starts, const Region* regions,
             uint32_t nregions, const uint32_t* pages, unsigned shift, uint32_t* stack,
             uint64_t* buffer, uintptr_t lo, uintptr_t hi, ReachabilityResult* result)
      : blocks_(blocks),
        n_(n),
        starts_(starts),
        regions_(regions),
        nregions_(nregions),
        pages_(pages),
        shift_(shift),
        stack_(stack),
        buffer_(buffer),
        lo_(lo),
        span_(hi - lo),
        result_(result) {}

  void MarkFromRoots(const RootRange* roots, size_t nroots, MemoryReader& root_reader,
                     MemoryReader& heap_reader) {
    for (size_t r = 0; r < nroots; ++r) {
      if (roots[r].end <= roots[r].begin) continue;
      Scan(root_reader, roots[r].begin, roots[r].end, &result_->root_bytes_scanned,
           &result_->root_bytes_unreadable, [this](uint64_t v) { Mark(v, /*definite=*/true); });
      DrainMarks(heap_reader);
    }
  }

  void FormCliques(MemoryReader& heap_reader) {
    for (uint32_t leader = 0; leader < n_; ++leader) {
      if (blocks_[leader].state != kUnreached) continue;
      ScanBlock& l = blocks_[leader];
      auto join = [this, leader, &l](uint64_t v) {
        uint32_t k = Find(v);
        if (k == kNone || k == leader) return;
        ScanBlock& b = blocks_[k];
        if (b.state != kUnreached) return;
        b.state = kIndirect;
        l.indirect_blocks += 1 + b.indirect_blocks;
        l.indirect_bytes += b.size + b.indirect_bytes;
        b.indirect_blocks = 0;
        b.indirect_bytes = 0;
        stack_[top_++] = k;
      };
      ScanBlockWith(heap_reader, l, join);
      while (top_ > 0) ScanBlockWith(heap_reader, blocks_[stack_[--top_]], join);
    }
  }

 private:
  // The block that v points into, or kNone.
  inline uint32_t Find(uint64_t v) const {
    if (v - lo_ >= span_) return kNone;
    uint32_t r = 0;
    if (nregions_ > 1) {
      uint32_t lo = 0, count = nregions_;  // last region with base <= v
      while (count > 1) {
        uint32_t half = count / 2;
        if (regions_[lo + half].base <= v) lo += half;
        count -= half;
      }
      r = lo;
    }
    const Region& reg = regions_[r];
    if (v < reg.base || v >= reg.end) return kNone;
    const uint32_t* page = pages_ + reg.index + ((v - reg.base) >> shift_);
    // Blocks starting in v's page are [page[0], page[1]); the last one starting at or before v is
    // among them or is page[0] - 1.
    uint32_t a = page[0], b = page[1];
    while (a < b) {
      uint32_t mid = a + (b - a) / 2;
      if (starts_[mid] <= v) {
        a = mid + 1;
      } else {
        b = mid;
      }
    }
    if (a == reg.first) return kNone;
    uint32_t i = a - 1;
    const ScanBlock& blk = blocks_[i];
    if (v < blk.start + blk.size || (blk.size == 0 && v == blk.start)) return i;
    return kNone;
  }

  inline void Mark(uint64_t v, bool definite) {
    uint32_t i = Find(v);
    if (i == kNone) return;
    ScanBlock& b = blocks_[i];
    if (b.state == kReachable) return;
    if (definite && v == b.start) {
      b.state = kReachable;
      stack_[top_++] = i;
    } else if (b.state == kUnreached) {
      b.state = kPossible;
      stack_[top_++] = i;
    }
  }

  void DrainMarks(MemoryReader& heap_reader) {
    while (top_ > 0) {
      ScanBlock& b = blocks_[stack_[--top_]];
      if (b.state == kPossible) {
        ScanBlockWith(heap_reader, b, [this](uint64_t v) { Mark(v, /*definite=*/false); });
      } else {
        ScanBlockWith(heap_reader, b, [this](uint64_t v) { Mark(v, /*definite=*/true); });
      }
    }
  }

  template <typename F>
  void ScanBlockWith(MemoryReader& reader, const ScanBlock& b, F&& f) {
    Scan(reader, b.start, b.start + b.size, &result_->heap_bytes_scanned,
         &result_->heap_bytes_unreadable, f);
  }

  // Calls f on every aligned word of [begin, end) that the reader can read.
  template <typename F>
  void Scan(MemoryReader& reader, uintptr_t begin, uintptr_t end, uint64_t* scanned,
            uint64_t* unreadable, F&& f) {
    uintptr_t a = (begin + 7) & ~uintptr_t{7};
    const uintptr_t e = end & ~uintptr_t{7};
    while (a < e) {
      size_t want = e - a < kReadBuffer ? e - a : kReadBuffer;
      size_t got = reader.Read(a, buffer_, want);
      if (got > want) got = want;
      size_t words = got / 8;
      for (size_t k = 0; k < words; ++k) f(buffer_[k]);
      *scanned += words * 8;
      if (got == want) {
        a += want;
        continue;
      }
      uintptr_t next = (a + got + kPage) & ~(kPage - 1);
      if (next <= a || next > e) next = e;
      *unreadable += next - (a + words * 8);
      a = next;
    }
  }

  ScanBlock* const blocks_;
  const uint32_t n_;
  const uintptr_t* const starts_;
  const Region* const regions_;
  const uint32_t nregions_;
  const uint32_t* const pages_;
  const unsigned shift_;
  uint32_t* const stack_;
  uint32_t top_ = 0;
  uint64_t* const buffer_;
  const uintptr_t lo_;
  const uintptr_t span_;
  ReachabilityResult* const result_;
};

// Pages that regions split at kRegionGap would need at 2^shift bytes a page, sentinels included.
size_t PagesNeeded(const ScanBlock* blocks, uint32_t n, unsigned shift, uint32_t* nregions) {
  size_t pages = 0;
  uint32_t regions = 0;
  uint32_t i = 0;
  while (i < n) {
    uintptr_t base = blocks[i].start & ~((uintptr_t{1} << shift) - 1);
    uintptr_t end = BlockEnd(blocks[i]);
    for (++i; i < n && blocks[i].start < end + kRegionGap; ++i) end = std::max(end, BlockEnd(blocks[i]));
    pages += ((end - base - 1) >> shift) + 2;
    ++regions;
  }
  *nregions = regions;
  return pages;
}

}  // namespace

bool ClassifyReachability(ScanBlock* blocks, size_t n, const RootRange* roots, size_t nroots,
                          MemoryReader& root_reader, MemoryReader& heap_reader,
                          ScratchMemory& scratch, ReachabilityResult* result) {
  *result = ReachabilityResult{};
  if (n >= kNone) return false;
  const uint32_t count = static_cast<uint32_t>(n);
  std::sort(blocks, blocks + n,
            [](const ScanBlock& a, const ScanBlock& b) { return a.start < b.start; });
  uintptr_t lo = n > 0 ? blocks[0].start : 0, hi = lo;
  for (uint32_t i = 0; i < count; ++i) {
    ScanBlock& b = blocks[i];
    b.state = kUnreached;
    b.indirect_blocks = 0;
    b.indirect_bytes = 0;
    hi = std::max(hi, BlockEnd(b));
  }

  // The page index: 4 KiB pages unless that would take more than 4 entries per block.
  unsigned shift = 12;
  uint32_t nregions = 0;
  size_t npages = PagesNeeded(blocks, count, shift, &nregions);
  while (npages > 4 * size_t{count} + 2 * size_t{nregions} + 1024 && shift < 40) {
    ++shift;
    npages = PagesNeeded(blocks, count, shift, &nregions);
  }
  ScratchArray starts_mem(scratch, (n + 1) * sizeof(uintptr_t));
  ScratchArray regions_mem(scratch, (nregions + 1) * sizeof(Region));
  ScratchArray pages_mem(scratch, (npages + 1) * sizeof(uint32_t));
  ScratchArray stack_mem(scratch, (2 * n + 1) * sizeof(uint32_t));
  ScratchArray buffer_mem(scratch, kReadBuffer);
  if (!starts_mem.ok() || !regions_mem.ok() || !pages_mem.ok() || !stack_mem.ok() ||
      !buffer_mem.ok()) {
    return false;
  }
  uintptr_t* starts = starts_mem.as<uintptr_t>();
  Region* regions = regions_mem.as<Region>();
  uint32_t* pages = pages_mem.as<uint32_t>();
  for (uint32_t i = 0; i < count; ++i) starts[i] = blocks[i].start;
  const uintptr_t page_mask = (uintptr_t{1} << shift) - 1;
  uint32_t r = 0;
  uint32_t next_page = 0;
  for (uint32_t i = 0; i < count;) {
    Region& reg = regions[r++];
    reg.first = i;
    reg.base = blocks[i].start & ~page_mask;
    reg.index = next_page;
    uintptr_t end = BlockEnd(blocks[i]);
    uint32_t j = i + 1;
    for (; j < count && blocks[j].start < end + kRegionGap; ++j) end = std::max(end, BlockEnd(blocks[j]));
    reg.end = end;
    // pages[index + p] = first block of [i, j) starting at or after base + p * page.
    uint32_t npg = static_cast<uint32_t>(((end - reg.base - 1) >> shift) + 1);
    uint32_t k = i;
    for (uint32_t p = 0; p <= npg; ++p) {
      uintptr_t page_start = reg.base + (uintptr_t{p} << shift);
      while (k < j && blocks[k].start < page_start) ++k;
      pages[next_page++] = k;
    }
    i = j;
  }

  Classifier c(blocks, count, starts, regions, nregions, pages, shift, stack_mem.as<uint32_t>(),
               buffer_mem.as<uint64_t>(), lo, hi, result);
  c.MarkFromRoots(roots, nroots, root_reader, heap_reader);
  c.FormCliques(heap_reader);

  for (uint32_t i = 0; i < count; ++i) {
    ScanBlock& b = blocks[i];
    LeakTotal* t;
    switch (b.state) {
      case kReachable:
        b.kind = LeakKind::kStillReachable;
        t = &result->still_reachable;
        break;
      case kPossible:
        b.kind = LeakKind::kPossiblyLost;
        t = &result->possibly_lost;
        break;
      case kIndirect:
        b.kind = LeakKind::kIndirectlyLost;
        t = &result->indirectly_lost;
        break;
      default:
        b.kind = LeakKind::kDefinitelyLost;
        t = &result->definitely_lost;
        break;
    }
    t->blocks += 1;
    t->bytes += b.size;
  }
  return true;
}

}  // namespace track
}  // namespace poolscope
