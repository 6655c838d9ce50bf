// File: pool/pool_map.h
//
// PoolMap answers "is this pointer inside one of our pools, and which?" for every free(), so the
// negative answer (a real block) must be cheap: two dependent loads and a null test.
//
// Pools are 64-byte aligned and a whole number of 64-byte lines long. The map is a two-level radix
// tree over 47-bit user addresses: a root of 2^17 leaf pointers (one per GiB), each leaf 2^18 pages of
// 64 line entries (one per 64-byte line of a 4 KiB page). An entry of a pool's line says which line
// of its pool it is and on which side of the pool its metadata lies (pool_layout.h), from which Find
// computes the metadata's address; 0 for a line of no pool. Leaves are reserved with
// mmap(MAP_NORESERVE) on first use, so only the map pages that describe pool memory are ever backed
// (128 bytes of map per 4 KiB page that holds pools).
//
// Thread-safety: Find() may run on any thread at any time, concurrently with Insert()/Erase() of other
// pools. Insert() and Erase() of one pool must not race with each other (a pool is inserted once when it
// is created and erased once when it is released). Entries are relaxed atomics: a pointer can only be
// found in a pool's lines while that pool is live, and the real allocator orders its own reuse.
#ifndef POOLSCOPE_POOL_POOL_MAP_H_
#define POOLSCOPE_POOL_POOL_MAP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace poolscope {
namespace pool {

struct PoolHeader;

// Where the map's leaves come from: poolscope's own mmap'd memory, never the program's allocator.
class LeafSource {
 public:
  virtual ~LeafSource() = default;
  // Returns `bytes` of zeroed memory that is never returned, or nullptr.
  virtual void* ReserveLeaf(size_t bytes) = 0;
};

class PoolMap {
 public:
  static constexpr int kAddressBits = 47;
  static constexpr int kLineShift = 6;   // 64-byte lines
  static constexpr int kPageShift = 12;  // 4 KiB pages: 64 lines each
  static constexpr int kLeafShift = 30;  // one leaf per GiB
  static constexpr size_t kRootSize = size_t{1} << (kAddressBits - kLeafShift);
  static constexpr size_t kPagesPerLeaf = size_t{1} << (kLeafShift - kPageShift);
  static constexpr size_t kLinesPerPage = size_t{1} << (kPageShift - kLineShift);

  // Map pages are faulted in this far ahead of a heap of pools that grows upwards (Insert): one call
  // instead of a page fault for every 128 KiB of pools.
  static constexpr size_t kPopulateAhead = size_t{8} << 10;

  // (line index in its pool + 1) << 1 | metadata after the pool; 0: no pool.
  struct Page {
    std::atomic<uint16_t> line[kLinesPerPage];
  };
  struct Leaf {
    Page page[kPagesPerLeaf];
  };
  static_assert(sizeof(Page) == kLinesPerPage * sizeof(uint16_t), "a leaf's entries are one array");

  // `root` must point to kRootSize zero-initialised slots that outlive the map (static storage in the
  // preload library, so the map needs no allocation to answer "not ours").
  constexpr PoolMap(std::atomic<Leaf*>* root, LeafSource* source) : root_(root), source_(source) {}

  // Every pool's usable bytes (a multiple of 64, at most 2 MiB) and metadata bytes: what Find needs to
  // compute a pool's metadata from its entry. Set before any pool is inserted (Domain's constructor;
  // a copy of the map takes them with it).
  void SetLayout(size_t pool_bytes, size_t meta_bytes) {
    pool_bytes_ = pool_bytes;
    meta_bytes_ = meta_bytes;
  }

  // The header of the pool whose lines contain `p`, or nullptr. Fast path: inline, no lock.
  inline PoolHeader* Find(const void* p) const {
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (__builtin_expect(a >> kAddressBits, 0)) return nullptr;
    Leaf* leaf = root_[a >> kLeafShift].load(std::memory_order_acquire);
    if (leaf == nullptr) return nullptr;
    const Page& page = leaf->page[(a >> kPageShift) & (kPagesPerLeaf - 1)];
    const uintptr_t e = page.line[(a >> kLineShift) & (kLinesPerPage - 1)].load(std::memory_order_relaxed);
    if (e == 0) return nullptr;
    // The pool's base: this line, less the lines before it in the pool.
    const uintptr_t base = (a & ~uintptr_t{63}) - (((e >> 1) - 1) << kLineShift);
    return reinterpret_cast<PoolHeader*>((e & 1) != 0 ? base + pool_bytes_ : base - meta_bytes_);
  }

  // Marks the lines of the pool at `begin` (64-byte aligned, pool_bytes long) as the pool's, with its
  // metadata after the pool (`meta_after`) or before it. Returns false (and marks nothing) if a leaf
  // could not be reserved. Inline for a pool whose lines lie in one leaf that exists (nearly every
  // pool: a leaf spans a GiB), whose entries are then consecutive.
  bool Insert(const void* begin, bool meta_after) {
    std::atomic<uint16_t>* const e = Entries(reinterpret_cast<uintptr_t>(begin));
    if (__builtin_expect(e == nullptr, 0)) return InsertSlow(begin, meta_after);
    const size_t lines = pool_bytes_ >> kLineShift;
    const uintptr_t at = reinterpret_cast<uintptr_t>(e);
    if (__builtin_expect(at + lines * sizeof(uint16_t) + kMapPage > populated_.load(std::memory_order_relaxed), 0)) {
      PopulateAhead(reinterpret_cast<uintptr_t>(begin), at, lines * sizeof(uint16_t));
    }
    for (size_t i = 0; i < lines; ++i) {
      e[i].store(static_cast<uint16_t>((i + 1) << 1 | (meta_after ? 1 : 0)), std::memory_order_relaxed);
    }
    return true;
  }
  // Clears what Insert() marked.
  void Erase(const void* begin) {
    std::atomic<uint16_t>* const e = Entries(reinterpret_cast<uintptr_t>(begin));
    if (__builtin_expect(e == nullptr, 0)) return EraseSlow(begin);
    const size_t lines = pool_bytes_ >> kLineShift;
    for (size_t i = 0; i < lines; ++i) e[i].store(0, std::memory_order_relaxed);
  }

 private:
  // The entry of the line at `a`, when every line of a pool starting there lies in one leaf and that
  // leaf exists (the leaf's pages are consecutive arrays: its entries are one array), else nullptr.
  std::atomic<uint16_t>* Entries(uintptr_t a) const {
    const uintptr_t last = a + pool_bytes_ - 1;
    if (__builtin_expect((last >> kAddressBits) != 0 || (a >> kLeafShift) != (last >> kLeafShift), 0)) return nullptr;
    Leaf* const leaf = root_[a >> kLeafShift].load(std::memory_order_acquire);
    if (leaf == nullptr) return nullptr;
    return &leaf->page[0].line[0] + ((a >> kLineShift) & (kPagesPerLeaf * kLinesPerPage - 1));
  }
  // A heap that grows by pools one after another reaches a new page of map entries every 128 KiB.
  // Called when the entries [at, at + bytes) of the pool at `begin` reach the last page faulted in
  // (the one ending at populated_): the next kPopulateAhead bytes of the map (within the leaf) are
  // faulted in with one call (track::PopulateRange), so that whenever entries reach a page in order,
  // the page after it is in already. Entries past that page (the first pool, or another heap higher
  // up) fault in their own page as they are written, and the next pool there goes on from it.
  void PopulateAhead(uintptr_t begin, uintptr_t at, size_t bytes);
  static constexpr uintptr_t kMapPage = uintptr_t{1} << kPageShift;  // a page of the map itself
  bool InsertSlow(const void* begin, bool meta_after);
  void EraseSlow(const void* begin);
  Leaf* LeafFor(uintptr_t a, bool create);

  std::atomic<Leaf*>* root_;
  LeafSource* source_;
  size_t pool_bytes_ = 0;
  size_t meta_bytes_ = 0;
  // How far the map's entries are known to be faulted in (PopulateAhead). Shared by the threads that
  // make pools; a lost update costs a page fault or a call, nothing else.
  std::atomic<uintptr_t> populated_{0};
};

}  // namespace pool
}  // namespace poolscope

#endif  // POOLSCOPE_POOL_POOL_MAP_H_
