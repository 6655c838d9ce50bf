// File: interpose/root_words.h
//
// The exit scan's roots, read once for all its views. The views' root ranges are nearly the same
// memory (the program's view and the detector's share the process's writable mappings; LeakSanitizer's
// take the globals and stacks among them), and reading them, through a system call where another
// thread may unmap, is most of what a small process's scan costs. CollectRootWords reads the union of
// the views' ranges once and gives each view the words of its own ranges that may point at a block
// (those in one of the blocks' spans). Classifying a view over those words, as one root range, classifies it as its
// ranges would (track/reachability.h): roots are definite sources whose order changes no class, and a
// word outside every block's span marks nothing.
//
// A word is an 8-byte aligned word inside a range, as the classifier reads a root; a read the reader
// cuts short skips to the next 4 KiB page, as the classifier does, for every view whose ranges cover
// the rest of that page.
//
// Thread-safety: none of its own; the reader's and the memory's are the caller's.
#ifndef POOLSCOPE_INTERPOSE_ROOT_WORDS_H_
#define POOLSCOPE_INTERPOSE_ROOT_WORDS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "track/granule_filter.h"
#include "track/reachability.h"
#include "track/sorted_search.h"

namespace poolscope {
namespace scan {

constexpr int kMaxRootViews = 6;

// One view's root ranges: any order, may overlap.
struct RootView {
  const track::RootRange* ranges;
  size_t n;
};

struct RootWordsRead {
  uint64_t bytes_read;        // of the union, each byte once
  uint64_t bytes_unreadable;  // of the union, skipped because the reader cut a read short
};

namespace root_words_internal {

struct Edge {
  uintptr_t at;
  int8_t delta;  // +1 a range begins, -1 it ends
  uint8_t view;
};

}  // namespace root_words_internal

// Runs of blocks (sorted by start) whose gaps are all below `gap`, as spans [first start, highest
// end), into spans[] (room for n); returns how many. A size-0 block spans one byte.
inline size_t BlockSpans(const track::ScanBlock* blocks, size_t n, uintptr_t gap, track::RootRange* spans) {
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    const uintptr_t b = blocks[i].start, e = b + (blocks[i].size() == 0 ? 1 : blocks[i].size());
    if (k > 0 && b < spans[k - 1].end + gap) {
      spans[k - 1].end = std::max(spans[k - 1].end, e);
    } else {
      spans[k++] = track::RootRange{b, e};
    }
  }
  return k;
}

// Reads every word of the union of views[0, nviews) once through `reader` and appends to *out[v] (a
// type with bool Push(uint64_t)) each word that lies in one of spans[0, nspans) (sorted by begin,
// disjoint) and whose address lies in a range of view v, in address order (once, where a view's
// ranges overlap). Scratch memory for the ranges' edges and a read buffer comes from `scratch`.
// False when scratch memory or an out's Push fails.
template <typename Out>
bool CollectRootWords(const RootView* views, int nviews, track::MemoryReader& reader, const track::RootRange* spans,
                      size_t nspans, track::ScratchMemory& scratch, Out* const* out, RootWordsRead* read) {
  using root_words_internal::Edge;
  *read = RootWordsRead{};
  if (nviews > kMaxRootViews) return false;
  size_t nedges = 0;
  for (int v = 0; v < nviews; ++v) nedges += 2 * views[v].n;
  if (nedges == 0) return true;
  constexpr size_t kBuffer = size_t{1} << 16;
  constexpr uintptr_t kPage = 4096;
  const size_t edge_bytes = nedges * sizeof(Edge);
  auto* edges = static_cast<Edge*>(scratch.Map(edge_bytes));
  auto* buffer = static_cast<uint64_t*>(scratch.MapSparse(kBuffer));  // used only for reads through the kernel
  struct Release {
    track::ScratchMemory& m;
    void* a;
    size_t abytes;
    void* b;
    size_t bbytes;
    ~Release() {
      if (a != nullptr) m.Unmap(a, abytes);
      if (b != nullptr) m.Unmap(b, bbytes);
    }
  } release{scratch, edges, edge_bytes, buffer, kBuffer};
  if (edges == nullptr || buffer == nullptr) return false;
  size_t k = 0;
  for (int v = 0; v < nviews; ++v) {
    for (size_t i = 0; i < views[v].n; ++i) {
      // Whole words only, as the classifier reads a range.
      const uintptr_t b = (views[v].ranges[i].begin + 7) & ~uintptr_t{7};
      const uintptr_t e = views[v].ranges[i].end & ~uintptr_t{7};
      if (views[v].ranges[i].end <= views[v].ranges[i].begin || b >= e) continue;
      edges[k++] = Edge{b, +1, static_cast<uint8_t>(v)};
      edges[k++] = Edge{e, -1, static_cast<uint8_t>(v)};
    }
  }
  std::sort(edges, edges + k, [](const Edge& a, const Edge& b) { return a.at < b.at; });
  if (nspans == 0) return true;  // no block: no word can point at one
  const uintptr_t lo = spans[0].begin, span = spans[nspans - 1].end - lo;
  track::GranuleFilter granules;
  for (size_t i = 0; i < nspans; ++i) granules.Add(spans[i].begin, spans[i].end);
  size_t last = 0;  // the span the last word fell in: words near each other often share one
  // (For a word within [lo, lo + span), which the caller tests first.)
  auto in_spans = [&](uint64_t x) {
    if (x - spans[last].begin < spans[last].end - spans[last].begin) return true;
    if (!granules.MayHold(x)) return false;
    const size_t a = track::PartitionPoint(0, nspans, [&](size_t i) { return spans[i].end <= x; });
    if (a == nspans || x < spans[a].begin) return false;
    last = a;
    return true;
  };
  int open[kMaxRootViews] = {};
  bool ok = true;
  uintptr_t skip_to = 0;  // the page after a read cut short: the rest of its page is not read
  // The words of [a, e), every view in `mask` taking each one that may point at a block.
  auto piece = [&](uintptr_t a, uintptr_t e, unsigned mask) {
    if (a < skip_to) {
      const uintptr_t to = std::min(skip_to, e);
      read->bytes_unreadable += to - a;
      a = to;
      if (a >= e) return;
    }
    auto take = [&](const uint64_t* words, size_t nwords) {
      // (The bounds in registers: a Push may write anywhere, so the closure's would be loaded again
      // for every word, nearly all of which the first test refuses.)
      const uint64_t first = lo, width = span;
      for (size_t w = 0; w < nwords; ++w) {
        const uint64_t x = words[w];
        if (x - first >= width || !in_spans(x)) continue;
        for (int v = 0; v < nviews; ++v) {
          if (((mask >> v) & 1) != 0 && !out[v]->Push(x)) {
            ok = false;
            return;
          }
        }
      }
    };
    if (const uint64_t* in_place = reader.InPlace(a, e - a)) {
      take(in_place, (e - a) / 8);
      read->bytes_read += e - a;
      return;
    }
    while (a < e && ok) {
      const size_t want = e - a < kBuffer ? e - a : kBuffer;
      size_t got = reader.Read(a, buffer, want);
      if (got > want) got = want;
      take(buffer, got / 8);
      read->bytes_read += got / 8 * 8;
      if (got == want) {
        a += want;
        continue;
      }
      skip_to = (a + got + kPage) & ~(kPage - 1);
      const uintptr_t next = skip_to <= a || skip_to > e ? e : skip_to;
      read->bytes_unreadable += next - (a + got / 8 * 8);
      a = next;
    }
  };
  for (size_t i = 0; i < k && ok;) {
    const uintptr_t at = edges[i].at;
    for (; i < k && edges[i].at == at; ++i) open[edges[i].view] += edges[i].delta;
    if (i == k) break;
    unsigned mask = 0;
    for (int v = 0; v < nviews; ++v) mask |= open[v] > 0 ? 1u << v : 0u;
    if (mask != 0) piece(at, edges[i].at, mask);
  }
  return ok;
}

// Reads through `base`, but the words in [begin, end) (an array of the scan's own: a view's collected
// root words) in place.
class WordsInPlaceReader : public track::MemoryReader {
 public:
  WordsInPlaceReader(track::MemoryReader& base, const uint64_t* words, size_t n)
      : base_(base), begin_(reinterpret_cast<uintptr_t>(words)), end_(begin_ + 8 * n) {}
  track::RootRange range() const { return track::RootRange{begin_, end_}; }
  size_t Read(uintptr_t addr, void* buf, size_t n) override {
    if (addr >= begin_ && addr + n <= end_) {
      std::copy_n(reinterpret_cast<const char*>(addr), n, static_cast<char*>(buf));
      return n;
    }
    return base_.Read(addr, buf, n);
  }
  size_t ReadMany(const Range* ranges, size_t k, void* buf) override { return base_.ReadMany(ranges, k, buf); }
  const uint64_t* InPlace(uintptr_t addr, size_t n) override {
    if (addr >= begin_ && addr + n <= end_) return reinterpret_cast<const uint64_t*>(addr);
    return base_.InPlace(addr, n);
  }

 private:
  track::MemoryReader& base_;
  const uintptr_t begin_, end_;
};

}  // namespace scan
}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_ROOT_WORDS_H_
