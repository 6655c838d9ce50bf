// File: track/reachability.cc
//
// Lookup: the blocks' index (block_index.cc) has a page index for each region, runs of blocks close
// together. A word that passes the [lowest start, highest end) filter costs a test of the region the
// last word fell in (when it is not there, a test of the regions' granules, granule_filter.h, then a
// binary search over the regions), one load from the page index and a short binary search over the
// blocks starting in its page.
//
// A word that falls in a block next to the finger (the block being scanned, or the last block that
// starts at or before the word looked up last) is resolved there and then, with no search.
//
// The heap is scanned in random order, so every lookup is a cache miss or three. Scanning is therefore
// pipelined: words that pass the filter are queued with their page-index slot prefetched; the queue is
// resolved in two more passes (load the slot and prefetch the entry, then decide), so that many misses
// are in flight at once. The marking rules do not depend on the order in which pointers are seen.
//
// Mark stack: a block is pushed when it becomes Possible and when it becomes Reachable, at most twice in
// all, so 2n entries always suffice; while cliques are formed a block is pushed only when it leaves
// Unreached.
#include "track/reachability.h"

#include <string.h>
#include <sys/mman.h>

#include <algorithm>

#include "track/granule_filter.h"
#include "track/reachability_internal.h"
#include "track/sorted_search.h"

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

using namespace reachability_internal;

// A word queued for lookup: first its page-index slot, then the entries it may fall in.
struct Candidate {
  uint64_t v;
  const uint32_t* page;  // stage 1: the slot in the page index
  uint32_t a, b;         // stage 2: blocks starting in v's page, [a, b)
  uint32_t first;        // the region's first block
  uint32_t definite;     // the word's source is definite (marking only)
};

constexpr size_t kQueue = 1024;
constexpr uint32_t kFewBlocks = 2048;
constexpr size_t kAheadWords = 1024;  // 8 KiB
constexpr uint32_t kBatch = 16;
// Parts of a large block scanned in place (ScanRuns); a block in more is read through the reader.
constexpr int kMaxRuns = 32;

class Classifier {
 public:
  Classifier(ScanBlock* blocks, uint32_t n, const Region* regions, uint32_t nregions,
             const uint32_t* pages, unsigned shift, uint32_t* stack, uint64_t* buffer,
             Candidate* queue, uintptr_t lo, uintptr_t hi, ReachabilityResult* result,
             CliqueTotals* cliques, StateTotals* counts)
      : blocks_(blocks),
        n_(n),
        regions_(regions),
        nregions_(nregions),
        pages_(pages),
        shift_(shift),
        stack_(stack),
        buffer_(buffer),
        queue_(queue),
        lo_(lo),
        span_(hi - lo),
        result_(result),
        totals_(cliques),
        counts_(counts) {
    for (uint32_t r = 0; r < nregions_; ++r) granules_.Add(regions_[r].base, regions_[r].end);
  }

  void MarkFromRoots(const RootRange* roots, size_t nroots, MemoryReader& root_reader,
                     MemoryReader& heap_reader) {
    for (size_t r = 0; r < nroots; ++r) {
      if (roots[r].end <= roots[r].begin) continue;
      Scan(root_reader, roots[r].begin, roots[r].end, /*definite=*/true, &result_->root_bytes_scanned,
           &result_->root_bytes_unreadable);
      Flush();
      DrainMarks(heap_reader);
    }
  }

  // Scans the pooled() blocks of reached[0..n), which lie outside blocks_ and are reachable already,
  // as definite sources, in address order, and counts them still reachable; then what they mark.
  void MarkFromReached(const ScanBlock* reached, size_t n, MemoryReader& heap_reader) {
    size_t next = 0;
    ScanInBatches(heap_reader, /*reached=*/true, [&](const ScanBlock** out) {
      uint32_t got = 0;
      for (; next < n && got < kBatch; ++next) {
        if (!reached[next].pooled()) continue;
        Prefetch(reached[next]);
        out[got++] = &reached[next];
        result_->still_reachable.blocks += 1;
        result_->still_reachable.bytes += reached[next].size();
      }
      return got;
    });
    DrainMarks(heap_reader);
  }

  // Whether each block is marked now: reached[i] = 1 for block i, else 0.
  void NoteMarked(uint8_t* reached) const {
    for (uint32_t i = 0; i < n_; ++i) reached[i] = StateOf(blocks_[i]) != kUnreached;
  }

  // Whether marking from words[0, n) as roots now would change no block but pooled() ones: each word
  // points into no block, into a pooled() one, into one marked reachable, or inside (not at the start
  // of) one marked possibly lost.
  bool OnlyMarkedOrPooled(const uint64_t* words, size_t n) const {
    for (size_t k = 0; k < n; ++k) {
      const uint64_t v = words[k];
      const size_t j = BlockHolding(blocks_, n_, v);
      if (j == n_) continue;
      const ScanBlock& e = blocks_[j];
      if (e.pooled()) continue;
      const uint8_t state = StateOf(e);
      if (state == kReachable || (state == kPossible && v != e.start)) continue;
      return false;
    }
    return true;
  }

  // Marks every pooled() block reachable, as a pointer at its start among the roots would, and what
  // they mark.
  void MarkPooled(MemoryReader& heap_reader) {
    for (uint32_t i = 0; i < n_; ++i) {
      if (blocks_[i].pooled()) Mark(i, blocks_[i], blocks_[i].start, /*definite=*/true);
    }
    DrainMarks(heap_reader);
  }

  void FormCliques(MemoryReader& heap_reader) {
    if (counts_->by_state[kUnreached].blocks == 0) return;  // no leader
    cliques_ = true;
    for (uint32_t leader = 0; leader < n_; ++leader) {
      if (StateOf(blocks_[leader]) != kUnreached) continue;
      leader_ = leader;
      last_v_ = 0;  // a word that joined nothing to the last clique may join a leader to this one
      stack_[top_++] = leader;
      DrainMarks(heap_reader);
    }
  }

 private:
  // Scans the marked blocks, popped from the stack, until it is empty.
  void DrainMarks(MemoryReader& heap_reader) {
    ScanInBatches(heap_reader, /*reached=*/false, [this](const ScanBlock** out) { return Pop(out); });
  }

  // Takes up to kBatch blocks at a time (take(out) fills out[] and prefetches them, returning how many),
  // then scans the batch taken two before and resolves what it points to (so that a batch's memory
  // loads while the two before it are scanned); until take gives none and the batches are empty.
  template <typename Take>
  void ScanInBatches(MemoryReader& heap_reader, bool reached, Take&& take) {
    const ScanBlock* batch[3][kBatch];
    uint32_t k[3] = {take(batch[0]), take(batch[1]), 0};
    for (int oldest = 0;; oldest = oldest == 2 ? 0 : oldest + 1) {
      const int fill = oldest == 0 ? 2 : oldest - 1;  // scanned last time round: empty
      k[fill] = take(batch[fill]);
      if (k[0] + k[1] + k[2] == 0) return;
      if (k[oldest] == 0) continue;
      ScanBatch(heap_reader, batch[oldest], k[oldest], reached);
      Flush();
      k[oldest] = 0;
    }
  }

  // Pops up to kBatch blocks into batch, prefetching the first and last line of each; returns how many.
  uint32_t Pop(const ScanBlock** batch) {
    uint32_t k = 0;
    while (k < kBatch && top_ > 0) {
      const ScanBlock& b = blocks_[stack_[--top_]];
      Prefetch(b);
      batch[k++] = &b;
    }
    return k;
  }

  // Every line of a small block (a block of 120 bytes spans three lines at most offsets); the first
  // and last of a larger one, whose scan reads ahead.
  static void Prefetch(const ScanBlock& b) {
    const uintptr_t first = b.start & ~uintptr_t{63};
    const uintptr_t last = (b.start + (b.size() > 8 ? b.size() - 8 : 0)) & ~uintptr_t{63};
    __builtin_prefetch(reinterpret_cast<const void*>(first));
    if (last - first <= 3 * 64) {
      for (uintptr_t l = first + 64; l <= last; l += 64) __builtin_prefetch(reinterpret_cast<const void*>(l));
    } else {
      __builtin_prefetch(reinterpret_cast<const void*>(last));
    }
  }

  // Scans the blocks batch[0..k): blocks_' own, or (`reached`) blocks outside them, reachable already.
  // Small blocks that a reader would copy are read together (one system call for the lot with
  // ProcessVmReader); the rest, and any that could not be read whole, one by one.
  void ScanBatch(MemoryReader& reader, const ScanBlock* const* batch, uint32_t k, bool reached) {
    MemoryReader::Range ranges[kBatch];
    const ScanBlock* grouped[kBatch];
    uint32_t ngrouped = 0;
    size_t bytes = 0;
    for (uint32_t j = 0; j < k; ++j) {
      const ScanBlock& e = *batch[j];
      const uintptr_t a = (e.start + 7) & ~uintptr_t{7};
      const uintptr_t end = (e.start + e.size()) & ~uintptr_t{7};
      if (a < end) {
        // Read in place, whole or (a large block) in parts (asked once: ScanOne would ask again), else
        // grouped while the buffer has room.
        const uint64_t* in_place = reader.InPlace(a, end - a);
        if (in_place != nullptr || end - a >= MemoryReader::kRunsMin) {
          if (!reached) finger_ = static_cast<uint32_t>(&e - blocks_);
          const bool definite = reached || cliques_ || StateOf(e) != kPossible;
          if (in_place != nullptr) {
            ScanWords(in_place, (end - a) / 8, definite);
            result_->heap_bytes_scanned += end - a;
            continue;
          }
          if (ScanRuns(reader, a, end, definite, &result_->heap_bytes_scanned)) continue;
        }
        if (end - a <= kReadBuffer - bytes) {
          ranges[ngrouped] = MemoryReader::Range{a, end - a};
          grouped[ngrouped++] = &e;
          bytes += end - a;
          continue;
        }
      }
      ScanOne(reader, e, reached);
    }
    if (ngrouped == 0) return;
    size_t got = ngrouped == 1 ? 0 : reader.ReadMany(ranges, ngrouped, buffer_);
    if (got > bytes) got = bytes;
    // The words of every range read whole; then each range from the one the read stopped in.
    // Queue may flush and mark, but only blocks' states change: the buffer is read here alone.
    size_t at = 0;
    uint32_t j = 0;
    for (; j < ngrouped && at + ranges[j].n <= got; ++j) {
      const ScanBlock& e = *grouped[j];
      const bool definite = reached || cliques_ || StateOf(e) != kPossible;
      if (!reached) finger_ = static_cast<uint32_t>(&e - blocks_);
      ScanWords(buffer_ + at / 8, ranges[j].n / 8, definite);
      result_->heap_bytes_scanned += ranges[j].n;
      at += ranges[j].n;
    }
    for (; j < ngrouped; ++j) ScanOne(reader, *grouped[j], reached);
  }

  // Queues every word of words[0, n) that falls within [lowest start, highest end).
  void ScanWords(const uint64_t* words, size_t n, bool definite) {
    // (The filter's bounds in registers: Queue writes members, after which they would be loaded again.)
    const uint64_t lo = lo_, span = span_;
    size_t k = 0;
    // A long range (a root) a line at a time, loading a few pages ahead: the hardware's prefetch stops
    // at each page's end. A block's words are prefetched when it is popped.
    for (; k + kAheadWords + 8 <= n; k += 8) {
      __builtin_prefetch(words + k + kAheadWords);
      for (size_t w = k; w < k + 8; ++w) {
        const uint64_t v = words[w];
        if (v - lo < span) Queue(v, definite);
      }
    }
    for (; k < n; ++k) {
      const uint64_t v = words[k];
      if (v - lo < span) Queue(v, definite);
    }
  }

  void ScanOne(MemoryReader& reader, const ScanBlock& e, bool reached) {
    // While cliques form, every pointer counts alike; while marking, a Possible block is not a
    // definite source. A reached block, outside blocks_, leaves the finger where it is.
    if (!reached) finger_ = static_cast<uint32_t>(&e - blocks_);
    Scan(reader, e.start, e.start + e.size(), reached || cliques_ || StateOf(e) != kPossible,
         &result_->heap_bytes_scanned, &result_->heap_bytes_unreadable);
  }

  // Queues every aligned word of [begin, end) that the reader can read and that falls within
  // [lowest start, highest end).
  void Scan(MemoryReader& reader, uintptr_t begin, uintptr_t end, bool definite, uint64_t* scanned,
            uint64_t* unreadable) {
    uintptr_t a = (begin + 7) & ~uintptr_t{7};
    const uintptr_t e = end & ~uintptr_t{7};
    if (a >= e) return;
    if (const uint64_t* in_place = reader.InPlace(a, e - a)) {
      ScanWords(in_place, (e - a) / 8, definite);
      *scanned += (e - a) / 8 * 8;
      return;
    }
    if (ScanRuns(reader, a, e, definite, scanned)) return;
    while (a < e) {
      size_t want = e - a < kReadBuffer ? e - a : kReadBuffer;
      size_t got = reader.Read(a, buffer_, want);
      if (got > want) got = want;
      size_t words = got / 8;
      ScanWords(buffer_, words, definite);
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

  // Scans [a, e) (8-byte aligned) part by part where the reader gives the parts that can hold a
  // pointer in place (a large block the program touched a few pages of, which a copy would zero-fill
  // and scan whole); counts it scanned whole. False when the reader cannot.
  bool ScanRuns(MemoryReader& reader, uintptr_t a, uintptr_t e, bool definite, uint64_t* scanned) {
    if (e - a < MemoryReader::kRunsMin) return false;
    MemoryReader::Range runs[kMaxRuns];
    const int n = reader.InPlaceRuns(a, e - a, runs, kMaxRuns);
    if (n < 0) return false;
    for (int i = 0; i < n; ++i) ScanWords(reinterpret_cast<const uint64_t*>(runs[i].addr), runs[i].n / 8, definite);
    *scanned += e - a;
    return true;
  }

  inline void Queue(uint64_t v, bool definite) {
    // The same word from the same kind of source again (a structure's fields often repeat a pointer)
    // can change nothing: marking and joining are idempotent.
    if (v == last_v_ && definite == last_definite_) return;
    last_v_ = v;
    last_definite_ = definite;
    // The region first: in a heap split between far apart ranges, most words that pass the filter
    // (string bytes, counts and flags read as numbers) fall between them. The last region with base
    // <= v: the one the last word fell in when v lies in it (most words point into the same large
    // region one after another), else searched for.
    uint32_t r = region_;
    if (!(v - regions_[r].base < regions_[r].end - regions_[r].base &&
          (r + 1 == nregions_ || v < regions_[r + 1].base))) {
      if (!granules_.MayHold(v)) return;
      uint32_t lo = 0, count = nregions_;
      while (count > 1) {
        uint32_t half = count / 2;
        if (regions_[lo + half].base <= v) lo += half;
        count -= half;
      }
      r = lo;
    }
    const Region& reg = regions_[r];
    if (v < reg.base || v >= reg.end) return;
    region_ = r;
    // A word near the finger (the block being scanned, or the one the last lookup ended at) is resolved
    // at once, with no search: words read in address order and a structure's pointers to what was
    // allocated just before or after it mostly fall there.
    uint32_t i;
    if (Near(v, &i)) {
      finger_ = i;
      Resolve(i, blocks_[i], v, definite);
      return;
    }
    Candidate& c = queue_[nqueued_++];
    c.v = v;
    c.page = pages_ + reg.index + ((v - reg.base) >> shift_);
    c.first = reg.first;
    c.definite = definite;
    __builtin_prefetch(c.page);
    if (nqueued_ == kQueue) Flush();
  }

  // Resolves the queued words: marks (or joins to the clique) the blocks they point into.
  void Flush() {
    for (size_t q = 0; q < nqueued_; ++q) {
      Candidate& c = queue_[q];
      c.a = c.page[0];
      c.b = c.page[1];
      __builtin_prefetch(&blocks_[c.a > c.first ? c.a - 1 : c.a]);
    }
    for (size_t q = 0; q < nqueued_; ++q) {
      const Candidate& c = queue_[q];
      // Blocks starting in v's page are [a, b); the last one starting at or before v is among them
      // or is a - 1.
      uint32_t a = c.a, b = c.b;
      while (a < b) {
        uint32_t mid = a + (b - a) / 2;
        if (blocks_[mid].start <= c.v) {
          a = mid + 1;
        } else {
          b = mid;
        }
      }
      if (a == c.first) continue;
      finger_ = a - 1;
      Resolve(a - 1, blocks_[a - 1], c.v, c.definite);
    }
    nqueued_ = 0;
  }

  // Whether v lies from the start of the second block before the finger to the start of the second
  // after it; then *i is the last of those blocks that starts at or before v.
  inline bool Near(uint64_t v, uint32_t* i) const {
    const uint32_t f = finger_;
    if (v >= blocks_[f].start) {
      *i = f;
      if (f + 1 < n_ && v >= blocks_[f + 1].start) *i = f + 1;
      return *i + 1 >= n_ || v < blocks_[*i + 1].start;
    }
    if (f >= 1 && v >= blocks_[f - 1].start) {
      *i = f - 1;
      return true;
    }
    if (f >= 2 && v >= blocks_[f - 2].start) {
      *i = f - 2;
      return true;
    }
    return false;
  }

  // v lies at or after the start of block i and before the next block's: marks (or joins) block i if
  // v is inside it.
  inline void Resolve(uint32_t i, ScanBlock& e, uint64_t v, bool definite) {
    if (!e.Holds(v)) return;
    if (cliques_) {
      Join(i);
    } else {
      Mark(i, e, v, definite);
    }
  }

  inline void Mark(uint32_t i, ScanBlock& e, uint64_t v, bool definite) {
    const uint8_t state = StateOf(e);
    if (state == kReachable) return;
    if (definite && v == e.start) {
      Move(e, state, kReachable);
      stack_[top_++] = i;
    } else if (state == kUnreached) {
      Move(e, state, kPossible);
      stack_[top_++] = i;
    }
  }

  inline void Move(ScanBlock& e, uint8_t from, uint8_t to) {
    SetState(e, to);
    const uint64_t size = e.size();
    counts_->by_state[from].blocks -= 1;
    counts_->by_state[from].bytes -= size;
    counts_->by_state[to].blocks += 1;
    counts_->by_state[to].bytes += size;
    if (e.pooled() && from == kUnreached && to != kIndirect) {
      counts_->pooled_lost.blocks -= 1;
      counts_->pooled_lost.bytes -= size;
    }
  }

  inline void Join(uint32_t i) {
    ScanBlock& b = blocks_[i];
    if (i == leader_ || StateOf(b) != kUnreached) return;
    Move(b, kUnreached, kIndirect);
    if (totals_ != nullptr) {
      CliqueTotals& l = totals_[leader_];
      CliqueTotals& t = totals_[i];
      l.blocks += 1 + t.blocks;
      l.bytes += b.size() + t.bytes;
      t = CliqueTotals{};
    }
    stack_[top_++] = i;
  }

  ScanBlock* const blocks_;
  const uint32_t n_;
  const Region* const regions_;
  GranuleFilter granules_;  // the regions' granules: most words between them are turned away there
  const uint32_t nregions_;
  const uint32_t* const pages_;
  const unsigned shift_;
  uint32_t* const stack_;
  uint32_t top_ = 0;
  uint64_t* const buffer_;
  Candidate* const queue_;
  size_t nqueued_ = 0;
  const uintptr_t lo_;
  const uintptr_t span_;
  ReachabilityResult* const result_;
  CliqueTotals* const totals_;
  StateTotals* const counts_;
  bool cliques_ = false;
  uint64_t last_v_ = 0;  // the word queued last (0 is never queued: it is below every block)
  uint32_t region_ = 0;  // the region the last word queued fell in
  uint32_t finger_ = 0;  // the block being scanned or the last lookup ended at (Queue runs only when n_ > 0)
  bool last_definite_ = false;
  uint32_t leader_ = 0;
};

}  // namespace

// A first set of roots, marked from before the others (ClassifyIndexedAfter, ClassifyBesideMarked).
struct FirstRoots {
  const RootRange* roots;
  size_t n;
  MemoryReader* reader;
  uint8_t* reached;  // one byte a block: marked from these roots (and `extra`) alone
  // Words marked from after them when that changes no block but pooled() ones (else *nested = false
  // and the classification stops there); then every pooled() block marked reachable.
  const uint64_t* extra = nullptr;
  size_t nextra = 0;
  bool mark_pooled = false;
  bool* nested = nullptr;
};

// The classifier over a BlockIndex's blocks (its friend).
struct BlockIndexAccess {
  static bool Classify(BlockIndex& index, const ScanBlock* reached, size_t nreached, const RootRange* roots,
                       size_t nroots, MemoryReader& root_reader, MemoryReader& heap_reader, ScratchMemory& scratch,
                       ReachabilityResult* result, CliqueTotals* cliques, const FirstRoots* first = nullptr);
};

bool BlockIndexAccess::Classify(BlockIndex& index, const ScanBlock* reached, size_t nreached, const RootRange* roots,
                                size_t nroots, MemoryReader& root_reader, MemoryReader& heap_reader,
                                ScratchMemory& scratch, ReachabilityResult* result, CliqueTotals* cliques,
                                const FirstRoots* first) {
  *result = ReachabilityResult{};
  if (!index.built_) return false;
  ScanBlock* const blocks = index.blocks_;
  const uint32_t count = index.n_;
  if (cliques != nullptr) memset(static_cast<void*>(cliques), 0, size_t{count} * sizeof(CliqueTotals));
  StateTotals counts = {};
  counts.by_state[kUnreached] = index.unreached_;
  counts.pooled_lost = index.pooled_;
  // Room for the worst case; a scan seldom touches more than a fraction of it.
  ScratchArray stack_mem(scratch, (2 * size_t{count} + 1) * sizeof(uint32_t), /*sparse=*/true);
  // The read buffer and the queue are fixed rooms: a few hundred blocks use a page of each (faulted in
  // as used), a few thousand all of it (faulted in at once: cheaper than a fault a page).
  const bool few = count < kFewBlocks;
  ScratchArray buffer_mem(scratch, kReadBuffer, /*sparse=*/few);
  ScratchArray queue_mem(scratch, kQueue * sizeof(Candidate), /*sparse=*/few);
  if (!queue_mem.ok() || !stack_mem.ok() || !buffer_mem.ok()) return false;

  Classifier c(blocks, count, static_cast<const Region*>(index.regions_), index.nregions_, index.pages_, index.shift_,
               stack_mem.as<uint32_t>(), buffer_mem.as<uint64_t>(), queue_mem.as<Candidate>(), index.lo_, index.hi_,
               result, cliques, &counts);
  if (first != nullptr) {
    // Marking is monotone and its rules do not depend on order: what the first roots mark is marked
    // before the others add theirs. Their words are not counted as the roots' (they are read again
    // among `roots`, or are no root of the classes).
    const uint64_t scanned = result->root_bytes_scanned, unreadable = result->root_bytes_unreadable;
    c.MarkFromRoots(first->roots, first->n, *first->reader, heap_reader);
    if (first->nested != nullptr) {
      *first->nested = c.OnlyMarkedOrPooled(first->extra, first->nextra);
      if (!*first->nested) return true;
      DirectMemoryReader direct;
      const RootRange extra{reinterpret_cast<uintptr_t>(first->extra), reinterpret_cast<uintptr_t>(first->extra + first->nextra)};
      c.MarkFromRoots(&extra, 1, direct, heap_reader);
    }
    result->root_bytes_scanned = scanned;
    result->root_bytes_unreadable = unreadable;
    c.NoteMarked(first->reached);
    if (first->mark_pooled) c.MarkPooled(heap_reader);
  }
  c.MarkFromRoots(roots, nroots, root_reader, heap_reader);
  if (count > 0) {
    c.MarkFromReached(reached, nreached, heap_reader);
  } else {
    // No block to find: the reached blocks have nothing to mark, and are only counted.
    for (size_t i = 0; i < nreached; ++i) {
      if (!reached[i].pooled()) continue;
      result->still_reachable.blocks += 1;
      result->still_reachable.bytes += reached[i].size();
    }
  }
  c.FormCliques(heap_reader);

  result->still_reachable.blocks += counts.by_state[kReachable].blocks;
  result->still_reachable.bytes += counts.by_state[kReachable].bytes;
  result->possibly_lost = counts.by_state[kPossible];
  result->indirectly_lost = counts.by_state[kIndirect];
  result->definitely_lost = counts.by_state[kUnreached];
  result->pooled_lost = counts.pooled_lost;
  return true;
}

bool ClassifyReachability(ScanBlock* blocks, size_t n, const RootRange* roots, size_t nroots,
                          MemoryReader& root_reader, MemoryReader& heap_reader, ScratchMemory& scratch,
                          ReachabilityResult* result, CliqueTotals* cliques) {
  *result = ReachabilityResult{};
  BlockIndex index(scratch);
  return index.Build(blocks, n) &&
         BlockIndexAccess::Classify(index, nullptr, 0, roots, nroots, root_reader, heap_reader, scratch, result, cliques);
}

bool ClassifyIndexed(BlockIndex& index, const RootRange* roots, size_t nroots, MemoryReader& root_reader,
                     MemoryReader& heap_reader, ScratchMemory& scratch, ReachabilityResult* result) {
  return BlockIndexAccess::Classify(index, nullptr, 0, roots, nroots, root_reader, heap_reader, scratch, result,
                                    nullptr);
}

bool ClassifyIndexedAfter(BlockIndex& index, const RootRange* first, size_t nfirst, MemoryReader& first_reader,
                          uint8_t* first_reached, const RootRange* roots, size_t nroots, MemoryReader& root_reader,
                          MemoryReader& heap_reader, ScratchMemory& scratch, ReachabilityResult* result) {
  const FirstRoots f{first, nfirst, &first_reader, first_reached};
  return BlockIndexAccess::Classify(index, nullptr, 0, roots, nroots, root_reader, heap_reader, scratch, result,
                                    nullptr, &f);
}

bool ClassifyBesideMarked(ScanBlock* blocks, size_t n, const RootRange* first, size_t nfirst,
                          MemoryReader& first_reader, const uint64_t* extra, size_t nextra, uint8_t* first_reached,
                          bool* nested, const RootRange* roots, size_t nroots, MemoryReader& root_reader,
                          MemoryReader& heap_reader, ScratchMemory& scratch, ReachabilityResult* result) {
  *result = ReachabilityResult{};
  *nested = false;
  BlockIndex index(scratch);
  FirstRoots f{first, nfirst, &first_reader, first_reached};
  f.extra = extra;
  f.nextra = nextra;
  f.mark_pooled = true;
  f.nested = nested;
  return index.Build(blocks, n) && BlockIndexAccess::Classify(index, nullptr, 0, roots, nroots, root_reader,
                                                              heap_reader, scratch, result, nullptr, &f);
}

bool ClassifyBesideReached(ScanBlock* blocks, size_t n, const ScanBlock* reached, size_t nreached,
                           const RootRange* roots, size_t nroots, MemoryReader& root_reader,
                           MemoryReader& heap_reader, ScratchMemory& scratch, ReachabilityResult* result) {
  *result = ReachabilityResult{};
  BlockIndex index(scratch);
  return index.Build(blocks, n) &&
         BlockIndexAccess::Classify(index, reached, nreached, roots, nroots, root_reader, heap_reader, scratch, result, nullptr);
}

}  // namespace track
}  // namespace poolscope
