// File: interpose/counters.h
//
// The two ledgers. Every call the program makes is counted once as it made it (logical) and once as it
// reached the next allocator (real). Counters are plain per-thread integers written only by their
// thread: no lock, no shared atomic on the allocation path (one shared counter is what collapsed
// OpenJDK's shared arenas from 30 ns at 1 thread to 4,400 ns at 48). They are summed when a thread ends
// and when a report is written.
#ifndef POOLSCOPE_INTERPOSE_COUNTERS_H_
#define POOLSCOPE_INTERPOSE_COUNTERS_H_

#include <cstddef>
#include <cstdint>

namespace poolscope {

// Entry points, keyed in the report by the C name or the C++ operator. Each form of an operator
// (nothrow, sized, aligned) counts under the operator.
#define POOLSCOPE_APIS(X)                  \
  X(kMalloc, "malloc")                     \
  X(kCalloc, "calloc")                     \
  X(kRealloc, "realloc")                   \
  X(kReallocarray, "reallocarray")         \
  X(kPosixMemalign, "posix_memalign")      \
  X(kAlignedAlloc, "aligned_alloc")        \
  X(kMemalign, "memalign")                 \
  X(kValloc, "valloc")                     \
  X(kPvalloc, "pvalloc")                   \
  X(kFree, "free")                         \
  X(kNew, "new")                           \
  X(kNewArray, "new[]")                    \
  X(kDelete, "delete")                     \
  X(kDeleteArray, "delete[]")              \
  X(kArenaAlloc, "poolscope_arena_alloc")  \
  X(kArenaClose, "poolscope_arena_close")

enum Api : int {
#define POOLSCOPE_API_ENUM(e, name) e,
  POOLSCOPE_APIS(POOLSCOPE_API_ENUM)
#undef POOLSCOPE_API_ENUM
      kNumApis
};
const char* ApiName(int api);

// The entry points that release a block (the others allocate one), and each one's index in the inline
// free paths' counts (ThreadCounters::nfast), which only they reach.
inline bool IsFreeApi(int api) { return api == kFree || api == kDelete || api == kDeleteArray; }
constexpr int kNumFreeApis = 3;
constexpr Api kFreeApis[kNumFreeApis] = {kFree, kDelete, kDeleteArray};
constexpr int FreeIndex(Api api) { return api == kFree ? 0 : api == kDelete ? 1 : 2; }

// One ledger, jemalloc-style: n<verb> counts, all since start.
struct Ledger {
  uint64_t nallocs;    // blocks created (successful allocating calls, realloc(NULL, n) included)
  uint64_t nfrees;     // blocks released (a realloc that frees included)
  uint64_t nreallocs;  // resizes of an existing block
  uint64_t nbytes;     // bytes requested by the blocks created
  uint64_t ncalls[kNumApis];  // calls per entry point, failed calls and free(NULL) included
};

constexpr int kSizeBuckets = 48;  // bucket k: requests of n bytes with 2^(k-1) < n <= 2^k (0, 1 in 0)

inline int SizeBucket(size_t n) {
  int b = n <= 1 ? 0 : 64 - __builtin_clzll(n - 1);
  return b < kSizeBuckets ? b : kSizeBuckets - 1;
}

inline void AddLedger(Ledger* into, const Ledger& from) {
  const uint64_t* s = reinterpret_cast<const uint64_t*>(&from);
  uint64_t* d = reinterpret_cast<uint64_t*>(into);
  for (size_t i = 0; i < sizeof(Ledger) / sizeof(uint64_t); ++i) d[i] += s[i];
}

// A call passed to the same entry point of the next allocator is one event in both ledgers, so it is
// counted once, in `regular`; `logical` and `real` hold only what belongs to one ledger (pooled blocks;
// pools, spills and arenas' regular-path blocks). The report's ledgers are regular + logical and
// regular + real (Logical() and Real() below), taken from settled counters (Settle() below).
struct ThreadCounters {
  Ledger regular;
  Ledger logical;
  Ledger real;
  uint64_t sizes[kSizeBuckets];  // logical request sizes
  // Pooled blocks released by the inline free paths (free, operator delete and delete[]) per entry
  // point, at its FreeIndex (arrays of three: the struct is static TLS, which an attach finds in
  // glibc's small reserve). One increment stands for three counts that Settle() makes when the
  // counters are read: the call and the free in `logical`, and the pool's pooled free. (Blocks carved
  // inline are counted in FastCarves.)
  uint64_t nfast[kNumFreeApis];
  // Pooled blocks released by the inline LIFO free that left the thread's pool fresh, per entry point:
  // like nfast, and the pool's reset in place as a fourth count.
  uint64_t nfast_reset[kNumFreeApis];
};

// track=1: bytes of the blocks tracking records with their size, counted when they are recorded and
// when they are released (a block freed by another thread counts there: only the sums over all
// threads mean anything). `unpooled`: real blocks of the program (the live table's, and tracked
// arenas' regular-path blocks); `arena_pooled`: tracked arenas' pooled blocks. Pooled blocks freed
// one by one are not here: their frees stay on the inline paths, which do not size them. Kept per
// thread in its FastCarves, not in ThreadCounters: that is in the thread's static TLS, whose size
// decides whether `poolscope attach` can load the library into a running program at all.
struct TrackedBytes {
  uint64_t unpooled_bytes;
  uint64_t unpooled_freed_bytes;
  uint64_t arena_pooled_bytes;
  uint64_t arena_pooled_freed_bytes;
};

inline void AddTrackedBytes(TrackedBytes* into, const TrackedBytes& from) {
  into->unpooled_bytes += from.unpooled_bytes;
  into->unpooled_freed_bytes += from.unpooled_freed_bytes;
  into->arena_pooled_bytes += from.arena_pooled_bytes;
  into->arena_pooled_freed_bytes += from.arena_pooled_freed_bytes;
}

// The inline pooled malloc, operator new and new[], and the inline carve of poolscope_arena_alloc,
// count each block in one number: by entry point and request size, so that one increment stands for
// the call, the logical block, its bytes, its size bucket and the pool's hit. The table is per thread,
// apart from ThreadCounters (whose copies the reports keep per thread), and as large as the sizes the
// inline paths serve (1..kFastSizes bytes): 4 KiB, so it is not in the thread's TLS (ThreadState holds
// a pointer to it).
constexpr size_t kFastSizes = 128;
enum FastApi : int { kFastMalloc, kFastNew, kFastNewArray, kFastArenaAlloc, kNumFastApis };
constexpr Api kFastApis[kNumFastApis] = {kMalloc, kNew, kNewArray, kArenaAlloc};
// The row of malloc, operator new and new[] (the malloc-family entry points with an inline carve).
constexpr int FastApiOf(Api api) {
  return api == kMalloc ? kFastMalloc : api == kNew ? kFastNew : kFastNewArray;
}
struct FastCarves {
  // [entry point][request size]: blocks carved inline. Indexed by the size itself (slot 0 stays 0), so
  // that the inline path adds to it with the size register as it is.
  uint64_t n[kNumFastApis][kFastSizes + 1];
  TrackedBytes bytes;  // (not settled: summed apart, TrackedBytesNow)
};

// Turns the fast-path counts of `c` and `carves` into the counts they stand for: logical calls,
// blocks, bytes and sizes in `c`, pool hits, pooled frees and resets in place in `*hits`,
// `*pooled_frees` and `*resets`. Clears the fast counts of `c`, and only reads `carves`: run on a copy of
// the counters of a thread that is still running (with its table), or by a thread on its own counters,
// which then clears its table.
inline void Settle(ThreadCounters* c, const FastCarves& carves, uint64_t* hits, uint64_t* pooled_frees,
                   uint64_t* resets) {
  for (int f = 0; f < kNumFastApis; ++f) {
    const Api api = kFastApis[f];
    for (size_t n = 1; n <= kFastSizes; ++n) {
      const uint64_t k = carves.n[f][n];
      if (k == 0) continue;
      c->logical.ncalls[api] += k;
      c->logical.nallocs += k;
      c->logical.nbytes += k * n;
      c->sizes[SizeBucket(n)] += k;
      *hits += k;
    }
  }
  for (int f = 0; f < kNumFreeApis; ++f) {
    const Api api = kFreeApis[f];
    const uint64_t r = c->nfast_reset[f];
    const uint64_t n = c->nfast[f] + r;
    c->nfast[f] = 0;
    c->nfast_reset[f] = 0;
    *resets += r;
    c->logical.ncalls[api] += n;
    c->logical.nfrees += n;
    *pooled_frees += n;
  }
}

inline Ledger Logical(const ThreadCounters& c) {
  Ledger l = c.regular;
  AddLedger(&l, c.logical);
  return l;
}

inline Ledger Real(const ThreadCounters& c) {
  Ledger l = c.regular;
  AddLedger(&l, c.real);
  return l;
}

inline void AddCounters(ThreadCounters* into, const ThreadCounters& from) {
  const uint64_t* s = reinterpret_cast<const uint64_t*>(&from);
  uint64_t* d = reinterpret_cast<uint64_t*>(into);
  for (size_t i = 0; i < sizeof(ThreadCounters) / sizeof(uint64_t); ++i) d[i] += s[i];
}

// What poolscope used for itself; process-wide, updated on slow paths only.
struct InternalCounters {
  uint64_t nmmaps;
  uint64_t nmunmaps;
  uint64_t mapped_bytes;
  uint64_t bootstrap_allocs;
  uint64_t bootstrap_bytes;
  uint64_t passthrough_allocs;  // calls made by poolscope's own libc calls, passed straight through
  uint64_t passthrough_frees;
  // Pages of the mappings above resident in memory now (not address space reserved), and the largest
  // such figure sampled: at each snapshot and report, and before a mapping of 1 MiB or more is given
  // back.
  uint64_t resident_bytes;
  uint64_t peak_resident_bytes;
};

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_COUNTERS_H_
