// File: track/reachability.h
//
// Classifies the blocks live at exit the way memcheck does with --leak-check=full
// --leak-check-heuristics=none: still reachable, possibly lost, indirectly lost, definitely lost.
//
// The algorithm (memcheck's):
//  - A word is an 8-byte value at an 8-byte aligned address inside a root range or a block (a block
//    [start, start + size) is scanned from start rounded up to 8 to start + size rounded down to 8). It
//    points into block B when B.start <= v < B.start + B.size, or v == B.start for a size-0 block.
//  - Marking: roots are definite sources, and so is every block once it is Reachable. A word from a
//    definite source that equals a block's start makes that block Reachable (it is scanned again if it
//    was not Reachable before). Any other word that points into a block (an interior pointer, or any
//    pointer from a Possible block) makes an Unreached block Possible, and it is scanned as such.
//  - Cliques: then, in address order, each block still Unreached leads a clique: every Unreached block
//    reachable from it through start or interior pointers, transitively, becomes indirectly lost and
//    its size is added to the leader's indirect totals. A block that led an earlier clique and is
//    reached this way becomes indirectly lost too, and its indirect totals move to the new leader.
//    Leaders are definitely lost.
// The outcome does not depend on the order of the roots; the clique leaders follow address order.
//
// Runs inside the exiting host process, whose allocator is interposed: nothing here calls malloc, new
// or any library function that might. Memory comes from an injected ScratchMemory (the default maps
// anonymous pages); memory is read only through MemoryReader, whose short reads the scan treats as an
// unreadable page and steps over.
//
// Cost: the block array is sorted in place (an array sorted already costs one pass); then one lookup
// per word that falls in [lowest start, highest end) of all blocks, through a page index built in
// scratch memory, pipelined so that the cache misses of many lookups overlap (reachability.cc).
// Scratch memory: 8 bytes of mark stack and up to 4 of page index per block, plus 100 KiB.
// `bazel run -c opt //track:reachability_benchmark` measures it; reachability_benchmark.cc has the
// figures.
//
// Thread-safety: ClassifyReachability is reentrant (all its state is in its arguments and scratch
// memory); the memory it reads must not change while it runs (the caller stops other threads).
#ifndef POOLSCOPE_TRACK_REACHABILITY_H_
#define POOLSCOPE_TRACK_REACHABILITY_H_

#include <cstddef>
#include <cstdint>

#include "track/sorted_search.h"

namespace poolscope {
namespace track {

// Page-granular memory for the classifier and the maps parser. Map returns zero-filled memory aligned
// to 4096 bytes, or nullptr when there is none; Unmap gives back exactly what Map(bytes) or
// MapSparse(bytes) returned. Map is for memory the caller writes nearly all of (an implementation may
// fault it all in at once); MapSparse for room of which only a part may ever be touched.
class ScratchMemory {
 public:
  virtual ~ScratchMemory() = default;
  virtual void* Map(size_t bytes) = 0;
  virtual void* MapSparse(size_t bytes) { return Map(bytes); }
  virtual void Unmap(void* p, size_t bytes) = 0;
};

// ScratchMemory over mmap/munmap of anonymous private memory. Stateless: one instance may serve many
// threads. Its memory is never a block of either ledger.
class MmapScratchMemory : public ScratchMemory {
 public:
  void* Map(size_t bytes) override;
  void Unmap(void* p, size_t bytes) override;
};

// How the classifier reads memory: copies up to n bytes from addr into buf and returns how many it
// copied; fewer than n means the byte at addr + result could not be read (the classifier then skips
// to the next 4 KiB page). Implementations must never fault on an unmapped address.
class MemoryReader {
 public:
  virtual ~MemoryReader() = default;
  virtual size_t Read(uintptr_t addr, void* buf, size_t n) = 0;
  // Where the n bytes at addr (8-byte aligned) can be read in place, for a reader that would only copy
  // them; nullptr (the default) when they must go through Read.
  virtual const uint64_t* InPlace(uintptr_t addr, size_t n) {
    (void)addr;
    (void)n;
    return nullptr;
  }
  // Copies ranges[0], ranges[1], ... (address, length) one after another into buf and returns the
  // bytes copied in all; a total short of the ranges' sum means the range it ends in could not be read
  // whole (the caller reads it and the ones after it again through Read). The default reads range by
  // range; a reader whose reads are system calls answers several ranges with one.
  struct Range {
    uintptr_t addr;
    size_t n;
  };
  virtual size_t ReadMany(const Range* ranges, size_t k, void* buf) {
    size_t done = 0;
    for (size_t i = 0; i < k; ++i) {
      const size_t got = Read(ranges[i].addr, static_cast<char*>(buf) + done, ranges[i].n);
      done += got < ranges[i].n ? got : ranges[i].n;
      if (got < ranges[i].n) break;
    }
    return done;
  }
  // For a large range a reader would copy with parts of it zero-filled (pages never touched, which
  // hold nothing): the parts that can hold a nonzero word, each readable where it lies, into
  // runs[0..), in address order; returns how many, or -1 (the default) when the range must go through
  // Read (more than `cap` parts, or one the reader cannot give in place). Asked only of ranges of
  // kRunsMin bytes or more.
  static constexpr size_t kRunsMin = size_t{32} << 10;
  virtual int InPlaceRuns(uintptr_t addr, size_t n, Range* runs, int cap) {
    (void)addr;
    (void)n;
    (void)runs;
    (void)cap;
    return -1;
  }
};

// Reads with memcpy: for memory known to be mapped and readable (live heap blocks while every other
// thread is stopped, or a test's own memory). It faults on anything else.
class DirectMemoryReader : public MemoryReader {
 public:
  size_t Read(uintptr_t addr, void* buf, size_t n) override;
  const uint64_t* InPlace(uintptr_t addr, size_t) override { return reinterpret_cast<const uint64_t*>(addr); }
};

enum class LeakKind : uint8_t {
  kStillReachable = 0,
  kPossiblyLost = 1,
  kIndirectlyLost = 2,
  kDefinitelyLost = 3,
};

// One live block, 16 bytes: the scan's arrays hold millions of them, and each lookup while marking
// reads one. The caller makes it with Of(); ClassifyReachability sorts the array by start and sets
// each block's kind. Blocks must not overlap and no two may start at one address (a size-0 block may
// start where another one ends).
struct ScanBlock {
  uintptr_t start;
  // The size (bits 0..47: more than any user address range), then the kind (50..51; the classifier
  // keeps its state there while it runs) and the caller's pooled mark (52), which the classifier keeps.
  uint64_t bits;

  static constexpr uint64_t kSizeMask = (uint64_t{1} << 48) - 1;
  static constexpr int kKindShift = 50;
  static constexpr int kPooledShift = 52;

  // `pooled`: 1 for a block carved from a pool (the caller's own mark).
  static ScanBlock Of(uintptr_t start, uint64_t size, bool pooled = false) {
    return ScanBlock{start, (size < kSizeMask ? size : kSizeMask) | (uint64_t{pooled} << kPooledShift)};
  }
  uint64_t size() const { return bits & kSizeMask; }
  LeakKind kind() const { return static_cast<LeakKind>((bits >> kKindShift) & 3); }
  bool pooled() const { return ((bits >> kPooledShift) & 1) != 0; }
  // Whether v points into the block (at its start, for a block of size 0).
  bool Holds(uint64_t v) const {
    const uint64_t n = size();
    return v - start < n || (n == 0 && v == start);
  }
};
static_assert(sizeof(ScanBlock) == 16, "ScanBlock is meant to stay at 16 bytes");

// The index of the block of blocks[0, n), sorted by start, that v points into (ScanBlock::Holds), or n.
inline size_t BlockHolding(const ScanBlock* blocks, size_t n, uint64_t v) {
  // The last block starting at or before v: after - 1.
  const size_t after = PartitionPoint(0, n, [&](size_t i) { return blocks[i].start <= v; });
  return after > 0 && blocks[after - 1].Holds(v) ? after - 1 : n;
}

// For a definitely lost block (a clique leader): the blocks and bytes of its clique, itself excluded.
// Zero for every other block.
struct CliqueTotals {
  uint64_t bytes;
  uint64_t blocks;
};

// A range of memory scanned as a definite source: [begin, end).
struct RootRange {
  uintptr_t begin;
  uintptr_t end;
};

struct LeakTotal {
  uint64_t blocks;
  uint64_t bytes;
};

struct ReachabilityResult {
  LeakTotal definitely_lost;
  LeakTotal indirectly_lost;
  LeakTotal possibly_lost;
  LeakTotal still_reachable;
  LeakTotal pooled_lost;         // of the definitely and indirectly lost, the blocks with the pooled mark
  uint64_t root_bytes_scanned;   // bytes of root ranges read (words examined x 8)
  uint64_t heap_bytes_scanned;   // bytes of blocks read, a block read twice counted twice
  uint64_t root_bytes_unreadable;  // bytes of root ranges skipped because their reader failed
  uint64_t heap_bytes_unreadable;  // same, of blocks
};

// Classifies blocks[0..n): sorts them by start (unless they are sorted already), marks from the roots,
// forms cliques, and fills each block's kind and *result; and, when `cliques` is not null, cliques[i]
// for the i-th block in start order (n entries, which it zeroes first). Roots are read through
// root_reader, blocks through heap_reader. Returns false, with *result zeroed and the blocks' kinds
// meaningless, when scratch memory runs out, or n does not fit in 32 bits.
bool ClassifyReachability(ScanBlock* blocks, size_t n, const RootRange* roots, size_t nroots,
                          MemoryReader& root_reader, MemoryReader& heap_reader,
                          ScratchMemory& scratch, ReachabilityResult* result,
                          CliqueTotals* cliques = nullptr);

// The lookup structure over a block array, with the blocks' states reset: ClassifyReachability's first
// step, which a caller may take apart (on another thread while it gathers the roots) and then classify
// with ClassifyIndexed. Its scratch memory, which Build maps, goes back only when it goes: Build maps
// and never unmaps, and sorts in place.
class BlockIndex {
 public:
  explicit BlockIndex(ScratchMemory& scratch) : scratch_(scratch) {}
  ~BlockIndex();
  BlockIndex(const BlockIndex&) = delete;
  BlockIndex& operator=(const BlockIndex&) = delete;

  // Sorts blocks[0..n) by start (unless they are sorted already), resets their states and builds the
  // index over them. Once only; false when scratch memory runs out or n does not fit in 32 bits.
  bool Build(ScanBlock* blocks, size_t n);

 private:
  friend struct BlockIndexAccess;  // reachability.cc
  ScratchMemory& scratch_;
  ScanBlock* blocks_ = nullptr;
  uint32_t n_ = 0;
  bool built_ = false;
  void* regions_ = nullptr;  // runs of blocks close together (reachability.cc)
  size_t regions_bytes_ = 0;
  uint32_t nregions_ = 0;
  uint32_t* pages_ = nullptr;  // each region's page index
  size_t pages_bytes_ = 0;
  unsigned shift_ = 0;         // the index's pages are 2^shift bytes
  uintptr_t lo_ = 0, hi_ = 0;  // lowest start, highest end
  LeakTotal unreached_ = {};   // every block, and the pooled ones, all unreached
  LeakTotal pooled_ = {};
};

// ClassifyReachability (with no cliques) over the blocks of a built index, in the order it sorted them.
// False, as ClassifyReachability, when scratch memory runs out or the index was not built.
bool ClassifyIndexed(BlockIndex& index, const RootRange* roots, size_t nroots, MemoryReader& root_reader,
                     MemoryReader& heap_reader, ScratchMemory& scratch, ReachabilityResult* result);

// ClassifyIndexed, with a first set of roots marked from before `roots`: first_reached[i] (a byte for
// each of the index's blocks, in the order it sorted them) is set to 1 when the first roots alone mark
// block i, that is reach it by a chain of pointers to a block's start or inside it (the blocks
// LeakSanitizer, which keeps every block a pointer into it reaches, keeps from those roots), else 0.
// *result classifies over both sets of roots together, so over `roots` alone when the first roots'
// words are among them; its root_bytes_scanned counts `roots` alone. One marking serves two views
// whose roots nest, instead of two.
bool ClassifyIndexedAfter(BlockIndex& index, const RootRange* first, size_t nfirst, MemoryReader& first_reader,
                          uint8_t* first_reached, const RootRange* roots, size_t nroots, MemoryReader& root_reader,
                          MemoryReader& heap_reader, ScratchMemory& scratch, ReachabilityResult* result);

// Two views of blocks[0..n) (sorted by start, or sorted here) whose roots nest but for a few words, in
// one marking: LeakSanitizer's (first[0..nfirst) and the words extra[0..nextra)) and memcheck's
// (`roots`, with every pooled() block reachable as if a root held a pointer at its start). The first
// roots are marked from, then the extra words when marking from them changes no block but pooled()
// ones (each points into no block, a pooled() one, one marked reachable, or inside one marked possibly
// lost); first_reached[i] (a byte a block) is then 1 for each block marked so far, else 0; then the
// pooled() blocks and `roots`, and *result classifies over those alone, as ClassifyReachability over
// `roots` and a pointer at each pooled() block's start would. When the extra words would change
// another block, *nested is false and neither output means anything (the caller classifies each view
// apart). False when scratch memory runs out.
bool ClassifyBesideMarked(ScanBlock* blocks, size_t n, const RootRange* first, size_t nfirst,
                          MemoryReader& first_reader, const uint64_t* extra, size_t nextra, uint8_t* first_reached,
                          bool* nested, const RootRange* roots, size_t nroots, MemoryReader& root_reader,
                          MemoryReader& heap_reader, ScratchMemory& scratch, ReachabilityResult* result);

// ClassifyReachability over blocks[0..n) beside more blocks already known reachable: those of
// reached[0..nreached) that are pooled() (the caller's word: every one has a definite pointer at its
// start among the roots). They are read through heap_reader as definite sources, never looked up, and
// count as still reachable in *result (not their heap_bytes_scanned). The blocks get the kinds
// ClassifyReachability gives them over both sets together, for a lookup structure of blocks alone.
// reached must be sorted by start and overlap no block.
bool ClassifyBesideReached(ScanBlock* blocks, size_t n, const ScanBlock* reached, size_t nreached,
                           const RootRange* roots, size_t nroots, MemoryReader& root_reader,
                           MemoryReader& heap_reader, ScratchMemory& scratch, ReachabilityResult* result);

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_REACHABILITY_H_
