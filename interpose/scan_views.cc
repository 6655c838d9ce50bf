// File: interpose/scan_views.cc
//
// The exit scan's views, piece by piece (leak_scan_internal.h): the blocks collected from the pools
// and sorted, LeakSanitizer's view of a set of blocks, the detector's view and the second thread's
// other jobs (the walk's second half, the program's array sorted, its index built).
#include <algorithm>
#include <cstring>

#include "interpose/leak_scan_internal.h"
#include "interpose/tracking.h"
#include "track/radix_sort.h"

namespace poolscope {
namespace scan {

InternalScratch g_scratch;

namespace {

// The blocks of blocks[0, n) that sit in pools and lost(i) calls lost.
template <typename Lost>
track::LeakTotal PooledWhere(const ScanBlock* blocks, size_t n, uint64_t (*bytes)(const ScanBlock&), Lost lost) {
  track::LeakTotal t = {};
  for (size_t i = 0; i < n; ++i) {
    if (blocks[i].pooled() && lost(i)) {
      ++t.blocks;
      t.bytes += bytes(blocks[i]);
    }
  }
  return t;
}

}  // namespace

track::LeakTotal LostInPools(const ScanBlock* blocks, size_t n, uint64_t (*bytes)(const ScanBlock&)) {
  return PooledWhere(blocks, n, bytes, [blocks](size_t i) { return IsLost(blocks[i]); });
}

track::LeakTotal LostInPools(const ScanBlock* blocks, const uint8_t* kept, size_t n, uint64_t (*bytes)(const ScanBlock&)) {
  return PooledWhere(blocks, n, bytes, [kept](size_t i) { return kept[i] == 0; });
}

bool ClassifyCopy(const ScanBlock* from, size_t n, const RootRange* roots, size_t nroots,
                  track::MemoryReader& root_reader, track::MemoryReader& heap_reader, Array<ScanBlock>* blocks) {
  if (!blocks->Resize(n)) return false;
  memcpy(blocks->data(), from, n * sizeof(ScanBlock));
  track::ReachabilityResult r;
  return track::ClassifyReachability(blocks->data(), n, roots, nroots, root_reader, heap_reader, g_scratch, &r);
}

namespace {

// LeakSanitizer's leaks among blocks[0, n) (sorted by start), those lost(i) calls lost, split into
// direct and indirect ones: a lost block another lost block points into is indirect.
template <typename Lost>
bool SplitLsanLeaks(const ScanBlock* blocks, size_t n, Lost lost, track::MemoryReader& heap_reader, ScanOutcome* out) {
  Array<uint8_t> indirect(g_scratch);
  if (!indirect.Resize(n)) return false;
  memset(indirect.data(), 0, n);
  uint64_t words[512];
  for (size_t i = 0; i < n; ++i) {
    if (!lost(i)) continue;
    for (uint64_t off = 0; off + 8 <= blocks[i].size();) {
      const size_t len = static_cast<size_t>(std::min<uint64_t>(sizeof words, (blocks[i].size() - off) & ~uint64_t{7}));
      const size_t got = heap_reader.Read(blocks[i].start + off, words, len);
      for (size_t w = 0; w < got / 8; ++w) {
        const size_t j = track::BlockHolding(blocks, n, words[w]);
        if (j != n && j != i && lost(j)) indirect[j] = 1;
      }
      if (got < len) break;
      off += len;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!lost(i)) continue;
    track::LeakTotal& t = indirect[i] ? out->lsan_indirect : out->lsan_direct;
    ++t.blocks;
    t.bytes += LsanBytes(blocks[i]);
    ++out->lsan_leaked.blocks;
    out->lsan_leaked.bytes += LsanBytes(blocks[i]);
  }
  return true;
}

}  // namespace

bool ClassifyForLsan(const ScanBlock* dblocks, size_t n, const RootRange* roots, size_t nroots,
                     track::MemoryReader& root_reader, track::MemoryReader& heap_reader, ScanOutcome* out) {
  Array<ScanBlock> blocks(g_scratch);
  if (!ClassifyCopy(dblocks, n, roots, nroots, root_reader, heap_reader, &blocks)) return false;
  const ScanBlock* const b = blocks.data();
  return SplitLsanLeaks(b, n, [b](size_t i) { return IsLost(b[i]); }, heap_reader, out);
}

void CollectPool(uintptr_t r, size_t rb, uintptr_t base, size_t bytes, bool arena, void* arg) {
  auto* c = static_cast<Collect*>(arg);
  // (Marked pooled: in the detector's view, the mark tells a pool's real block from an unpooled one.)
  // (ok written only when it changes: a store at every block is a line the other walker may share.)
  if (!c->ok) return;
  if (!c->pools->Push(ScanBlock::Of(r, rb, true)) ||
      (arena && !c->arena_roots->Push(RootRange{base, base + bytes}))) {
    c->ok = false;
  }
}

void CollectPooledBlock(uintptr_t p, uint64_t size, void* arg) {
  auto* c = static_cast<Collect*>(arg);
  if (c->ok && !c->blocks->Push(ScanBlock::Of(p, size, true))) c->ok = false;
}

bool SortByStart(ScanBlock* a, size_t n, bool mostly_in_order) {
  auto start_of = [](const ScanBlock& b) { return uint64_t{b.start}; };
  Array<ScanBlock> scratch(g_scratch, /*sparse=*/mostly_in_order);
  if (mostly_in_order) {
    if (!scratch.Resize(n / 8 + 4096)) return false;
    if (track::SortNearlyInOrder(a, n, start_of, scratch.data(), scratch.size())) return true;
  }
  if (!scratch.Resize(n)) return false;
  track::RadixSortBy(a, scratch.data(), n, start_of);
  return true;
}

void MergeInto(ScanBlock* a, size_t na, const ScanBlock* b, size_t nb) {
  size_t i = na, j = nb, out = na + nb;
  while (j > 0) {
    if (i > 0 && a[i - 1].start > b[j - 1].start) {
      a[--out] = a[--i];
    } else {
      a[--out] = b[--j];
    }
  }
}

bool SortWithMore(Array<ScanBlock>* a, const ScanBlock* more, size_t n) {
  const size_t na = a->size();
  // SortByStart moves aside about a sixteenth of the records at most, two for each one found out of
  // order (it takes the one before it along): with more than a sixty-fourth to add, merge after
  // sorting.
  if (n <= na / 64) {
    if (!a->Resize(na + n)) return false;
    if (n > 0) memcpy(static_cast<void*>(a->data() + na), more, n * sizeof(ScanBlock));
    return SortByStart(a->data(), na + n, true);
  }
  if (!SortByStart(a->data(), na, true) || !a->Resize(na + n)) return false;
  MergeInto(a->data(), na, more, n);
  return true;
}

int ClassifyForDetector(void* arg) {
  auto* j = static_cast<DetectorJob*>(arg);
  // (Without pools, the blocks are the unpooled ones alone, none marked pooled.)
  if (j->lsan_roots != nullptr) {
    Array<uint8_t> kept(g_scratch);
    bool nested = false;
    if (kept.Resize(j->n) &&
        track::ClassifyBesideMarked(j->blocks, j->n, &j->lsan_roots[0], 1, *j->lsan_root_reader, j->lsan_extra,
                                    j->nlsan_extra, kept.data(), &nested, j->roots, j->nroots, *j->root_reader,
                                    *j->heap_reader, g_scratch, &j->result) &&
        nested) {
      j->ok = true;
      const uint8_t* const k = kept.data();
      j->lsan_ok = SplitLsanLeaks(j->blocks, j->n, [k](size_t i) { return k[i] == 0; }, *j->heap_reader, j->lsan_out);
      return 0;
    }
    j->result = track::ReachabilityResult{};
  }
  j->ok = j->pools_reached
              ? track::ClassifyBesideReached(j->unpooled, j->nunpooled, j->blocks, j->n, j->roots, j->nroots,
                                             *j->root_reader, *j->heap_reader, g_scratch, &j->result)
              : track::ClassifyReachability(j->blocks, j->n, j->roots, j->nroots, *j->root_reader, *j->heap_reader,
                                            g_scratch, &j->result);
  if (j->ok && j->lsan_roots != nullptr) {
    j->lsan_ok = ClassifyForLsan(j->blocks, j->n, j->lsan_roots, 2, *j->lsan_root_reader, *j->heap_reader,
                                 j->lsan_out);
  }
  return 0;
}

int WalkSecondHalf(void* arg) {
  auto* j = static_cast<WalkJob*>(arg);
  j->c->blocks->FaultIn();
  j->c->pools->FaultIn();
  j->in->for_each_pool(CollectPool, CollectPooledBlock, j->c, 1, 2);
  return 0;
}

int SortProgramBlocks(void* arg) {
  auto* s = static_cast<ProgramSort*>(arg);
  Array<ScanBlock>& blocks = *s->blocks;
  if (s->first != nullptr && !JoinTwoParts(&blocks, s->first, s->second)) {
    s->ok = false;
    return 0;
  }
  s->ok = SortWithMore(&blocks, s->tracked->data(), s->tracked->size());
  return 0;
}

int BuildIndex(void* arg) {
  auto* j = static_cast<IndexJob*>(arg);
  j->ok = j->index->Build(j->blocks, j->n);
  return 0;
}

}  // namespace scan
}  // namespace poolscope
