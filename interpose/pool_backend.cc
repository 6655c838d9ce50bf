// File: interpose/pool_backend.cc
//
// The pools' memory: ShimBackend (every pool's real allocation and free, counted in the real ledger),
// where that memory comes from (poolscope_pool_alloc, pools carved out of a plain malloc with
// PoolFromMalloc, or a backend a test hands to UsePoolMemory), the pool map, and the descriptions of
// pools and pooled blocks to memcheck.
#include "interpose/shim.h"

#include <unistd.h>

#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>

#include <atomic>
#include <cstring>

#include "interpose/internal.h"
#include "interpose/real.h"
#include "interpose/shim_internal.h"
#include "track/populate.h"

namespace poolscope {

POOLSCOPE_LARGE_BSS std::atomic<pool::PoolMap::Leaf*> g_map_root[pool::PoolMap::kRootSize];

// Under valgrind (valgrind=1), pools and pooled blocks are described to memcheck: one meta mempool
// whose first-level chunks are the pools and whose second-level (malloc-like) blocks are the blocks
// carved from them, so memcheck sees the program's logical allocations again and reports its own
// leaks block for block. The inline fast paths are off then: every pooled call takes the slow path,
// which makes the client requests.
bool g_valgrind = false;
char g_valgrind_anchor;


// The client request that describes a block keeps the block's address in its argument array on the
// stack; once popped, such a stale copy can sit in a frame of the exit path at the final leak check
// and make a leaked block look reachable. So the request runs in its own frame, which is then wiped.
__attribute__((noinline)) void ValgrindDescribeAlloc(void* p, size_t n, bool zeroed) {
  VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, zeroed ? 1 : 0);
  // The rest of its granule (all of it for malloc(0), which takes one) is no-access.
  const size_t end = ((n > 0 ? n : 1) + 15) & ~size_t{15};
  if (end > n) VALGRIND_MAKE_MEM_NOACCESS(static_cast<char*>(p) + n, end - n);
}

// A pooled block's free, told to memcheck before the pool sees it: the free may release the pool, and
// memcheck must already count the block as freed then. A block that is not live is still described:
// memcheck then reports the program's invalid or double free as it would without poolscope. The
// block's memory is no-access from then on, as a freed block is bare; the pool's own zeroing of it
// runs with memcheck's reports off (ValgrindQuiet), and the next carve describes it again.
void ValgrindDescribeFree(const pool::PoolHeader* h, void* p);

__attribute__((noinline)) void WipeStackBelow() {
  volatile char pad[4096];
  for (size_t i = 0; i < sizeof pad; ++i) pad[i] = 0;
}

alignas(pool::Domain) POOLSCOPE_LARGE_BSS char g_domain_storage[sizeof(pool::Domain)];
pool::Domain* g_domain = nullptr;

void ValgrindDescribeFree(const pool::PoolHeader*, void* p) { VALGRIND_FREELIKE_BLOCK(p, 0); }

void ValgrindOpenUsable(void* p, size_t usable) {
  char* const b = static_cast<char*>(p);
  for (size_t i = 0; i < usable; ++i) {
    unsigned char vbits;
    if (VALGRIND_GET_VBITS(b + i, &vbits, 1) != 1) VALGRIND_MAKE_MEM_UNDEFINED(b + i, 1);
  }
}

// The live pooled blocks, for tracking (TrackingInit).
void ForEachPooledBlock(void (*fn)(uintptr_t ptr, uint32_t size, uint32_t stack_id, void* arg), void* arg,
                        void (*on_pool)(void* arg)) {
  if (g_domain == nullptr) return;
  auto on_block = [&](void* p, pool::BlockInfo info) {
    fn(reinterpret_cast<uintptr_t>(p), info.size, info.stack_id, arg);
  };
  if (on_pool == nullptr) {
    g_domain->ForEachLiveBlock(on_block);
  } else {
    g_domain->ForEachPoolWithBlocks([&](char*, bool, void*) { on_pool(arg); }, on_block);
  }
}

namespace {

// nullptr: the next allocator (poolscope_pool_alloc, and the real free). Set before any pool exists.
pool::Backend* g_pool_memory = nullptr;

class ShimBackend : public pool::Backend {
 public:
  // Every pool's real allocation is made here and nowhere else: `poolscope suppressions`
  // (report/suppressions.h) matches this function by name, mangled
  // (_ZN9poolscope*ShimBackend9AllocPool*) for memcheck and demangled for LSan and heaptrack.
  void* AllocPool(size_t bytes) override {
    ThreadState& ts = t_state;
    void* p;
    {
      Guard guard(ts);  // what the next allocator allocates for itself meanwhile is not ours
      p = g_pool_memory == nullptr ? poolscope_pool_alloc(bytes) : g_pool_memory->AllocPool(bytes);
    }
    ++ts.c.real.ncalls[g_pool_by_malloc ? kMalloc : kPosixMemalign];
    if (p == nullptr) return nullptr;
    // Described to memcheck as a chunk of the pool's first kValgrindPoolHead bytes only (the pool's
    // base is the real block's start then: posix_memalign, 64), where no block is ever carved: memcheck
    // then drops the real block from its leak search (it holds a pool chunk), and no chunk it keeps
    // overlaps a pooled block, so each pointer it finds names one block.
    if (g_valgrind) VALGRIND_MEMPOOL_ALLOC(&g_valgrind_anchor, p, kValgrindPoolHead);
    ++ts.c.real.nallocs;
    ts.c.real.nbytes += bytes;
    TimelineCount(ts.c.real.nallocs);
    return p;
  }
  void FreePool(void* p) override {
    ThreadState& ts = t_state;
    ++ts.c.real.ncalls[kFree];
    ++ts.c.real.nfrees;
    TimelineCount(ts.c.real.nfrees);
    if (g_valgrind) VALGRIND_MEMPOOL_FREE(&g_valgrind_anchor, p);
    if (g_pool_memory != nullptr) {
      Guard guard(ts);
      return g_pool_memory->FreePool(p);
    }
    Guard guard(ts);
    g_real.free(p);
  }
  size_t pool_alignment() const override {
    if (g_pool_memory != nullptr) return g_pool_memory->pool_alignment();
    return g_pool_by_malloc ? 16 : 64;
  }
  void* AllocMeta(size_t bytes) override { return InternalAlloc(bytes); }
  void FreeMeta(void* p, size_t bytes) override { InternalFree(p, bytes); }
  void* ReserveLeaf(size_t bytes) override { return InternalReserve(bytes); }
};

ShimBackend g_backend;

}  // namespace

pool::Backend* ShimPoolBackend() { return &g_backend; }

void UsePoolMemory(pool::Backend* memory) { g_pool_memory = memory; }

bool g_pool_by_malloc = false;

namespace {

// How far the main heap's pages are faulted in (PopulateHeapAhead).
std::atomic<uintptr_t> g_heap_populated{0};
constexpr uintptr_t kHeapPopulate = uintptr_t{64} << 10;

}  // namespace

// Pools made one after another grow the main heap a block at a time, each new page faulting on its
// first store: a block [begin, end) that ends past the pages faulted in so far has its own pages past
// them and the next 64 KiB, up to the heap's end (the program break), faulted in with one call
// (track::PopulateAhead). Nothing for a block outside the main heap (a thread's arena, a mapping).
void PopulateHeapAhead(uintptr_t begin, uintptr_t end) {
  const uintptr_t done = g_heap_populated.load(std::memory_order_relaxed);
  if (end <= done || g_valgrind) return;
  const uintptr_t brk = reinterpret_cast<uintptr_t>(sbrk(0));
  if (end > brk) return;  // not in the main heap (a thread's arena or a mapping lies above it)
  g_heap_populated.store(track::PopulateAhead(done, begin, end, brk, kHeapPopulate), std::memory_order_relaxed);
}

void* PoolFromMalloc(size_t bytes) {
  void* raw = g_real.malloc(bytes);
  if (raw != nullptr) PopulateHeapAhead(reinterpret_cast<uintptr_t>(raw), reinterpret_cast<uintptr_t>(raw) + bytes);
  return raw;
}

uint64_t PoolRealBytes() { return g_domain != nullptr ? g_domain->real_bytes() : 0; }

pool::PoolMap g_pool_map(g_map_root, &g_backend);

}  // namespace poolscope

// Defined here rather than with the other exported functions (libc_override.cc, only in the preload
// library) so that the slow paths link into a test binary as well.
extern "C" __attribute__((visibility("default"), noinline)) void* poolscope_pool_alloc(size_t bytes) {
  namespace ps = poolscope;
  void* p = nullptr;
  if (ps::g_pool_by_malloc) {
    p = ps::PoolFromMalloc(bytes);
  } else if (ps::g_real.posix_memalign(&p, ps::pool::kLine, bytes) != 0) {
    p = nullptr;
  }
  __asm__ volatile("" : : "r"(p) : "memory");  // keep this frame: no tail call
  return p;
}
