// File: interpose/tracking.cc
//
// See tracking.h. Stack capture and the stack ids of allocations, the per-site counters, the live real
// blocks (each thread's young slots in front of the shared table) and the memory they all take, and
// tracking's thread-exit and fork handlers. The explicit arenas are tracked_arenas.cc's and the
// report's queries tracking_report.cc's; what the three files share is in tracking_internal.h.
#include "interpose/tracking.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/single_threaded.h>

#include <atomic>
#include <cstring>
#include <new>

#include "interpose/internal.h"
#include "interpose/tracking_internal.h"
#include "track/cache_dir.h"
#include "track/depot_memory.h"
#include "track/frame_rule_store.h"
#include "track/frame_rules.h"
#include "track/live_table.h"
#include "track/populate.h"
#include "track/recent_blocks.h"
#include "track/stack_capture.h"
#include "track/stack_depot.h"
#include "track/stack_id_cache.h"

namespace poolscope {

using tracking_internal::AddToSite;
using tracking_internal::AllocStackId;
using tracking_internal::FlushSite;
using tracking_internal::HookFrames;
using tracking_internal::IsOwn;
using tracking_internal::g_arena_records;
using tracking_internal::g_arenas_lock;
using tracking_internal::g_depot;
using tracking_internal::FromDepth;
using tracking_internal::g_depth;
using tracking_internal::g_hooked;
using tracking_internal::g_on;
using tracking_internal::g_pooled_blocks;
using tracking_internal::g_recent;
using tracking_internal::g_sites;
using tracking_internal::g_table;
using tracking_internal::kCapacity;
using tracking_internal::NoteMemoCapture;
using tracking_internal::ReleaseKeptArenas;
using tracking_internal::Site;
using tracking_internal::t_track;
using tracking_internal::TrackBlock;
using tracking_internal::TrackThread;

namespace {

// Memory for the depot and the table. Small requests are carved from large NORESERVE mappings; those of
// a power of two bytes that come back (the live table's stripes give back their arrays when they
// double them) are kept on a list per size and handed out again, zeroed, before anything new is
// carved. Arrays of kDirect bytes or more are mappings of their own. None of it holds a pointer into the
// heap (stack records, hidden block addresses): every mapping is made pointer_free, so the exit scan's
// prediction of a detector below leaves it unread (internal.h). What is handed out is about to be
// written (a record, a table being filled): carved memory is faulted in ahead of the carve point, by as
// much as was carved so far up to kAhead bytes at a time, and a mapping of its own whole, one call
// each instead of a fault per page (and never the zero page a table probed before it is written would
// map, then fault again).
class MappedDepotMemory : public track::DepotMemory {
 public:
  // Carves from 64 MiB reservations; when the address space will not give that much (RLIMIT_AS),
  // from reservations of 1 MiB; when not even those, nullptr from then on without asking again (the
  // callers then record less, and the report says so), rather than a failing mmap per request.
  void* Alloc(size_t bytes) override {
    if (bytes >= kDirect) {
      if (exhausted_.load(std::memory_order_relaxed)) return nullptr;
      void* p = InternalMap(bytes, /*pointer_free=*/true);
      if (p != nullptr) {
        const uintptr_t at = reinterpret_cast<uintptr_t>(p);
        track::PopulateRange(at, at + bytes, at + bytes);
      }
      return p;
    }
    bytes = (bytes + 63) & ~size_t{63};
    SpinLockHolder lock(&lock_);
    if (const int c = SizeClass(bytes); c >= 0 && free_[c] != nullptr) {
      FreeNode* n = free_[c];
      free_[c] = n->next;
      if (bytes > track::kPageBytes) {  // its pages past the first were given back (Free)
        const uintptr_t at = reinterpret_cast<uintptr_t>(n);
        track::PopulateRange(at, at + bytes, at + bytes);
      }
      memset(n, 0, bytes);
      return n;
    }
    if (cur_ == nullptr || static_cast<size_t>(end_ - cur_) < bytes) {
      if (exhausted_.load(std::memory_order_relaxed)) return nullptr;
      size_t chunk = small_chunks_ ? kSmallChunk : kChunk;
      char* p = static_cast<char*>(InternalReserve(chunk, /*noted=*/true, /*pointer_free=*/true));
      if (p == nullptr && !small_chunks_) {
        small_chunks_ = true;
        chunk = kSmallChunk;
        p = static_cast<char*>(InternalReserve(chunk, /*noted=*/true, /*pointer_free=*/true));
      }
      if (p == nullptr) {
        exhausted_.store(true, std::memory_order_relaxed);
        return nullptr;
      }
      begin_ = cur_ = p;
      end_ = p + chunk;
      populated_ = reinterpret_cast<uintptr_t>(p);
    }
    void* p = cur_;
    cur_ += bytes;
    carved_ += bytes;
    // Ahead by as much as was carved so far, up to kAhead: a short process that records a few stacks
    // faults in a page or two, not kAhead bytes it never uses.
    const size_t ahead = carved_ < kAhead ? carved_ : kAhead;
    const uintptr_t was = populated_;
    populated_ = track::PopulateAhead(populated_, reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(cur_),
                                      reinterpret_cast<uintptr_t>(end_), ahead);
    // The chunk is written below its populated part only (the carve never passes it).
    if (populated_ != was) InternalNoteUsed(begin_, populated_);
    return p;
  }
  // An array given back stays on a free list until one of its size is wanted again, which for a
  // stripe's outgrown arrays is mostly never: the pages wholly inside it past its first (the list's
  // link) go back to the kernel now, and fault in again, zeroed, if it is handed out again. Without
  // that, each stripe kept about 128 KiB of outgrown arrays resident: 13 of the 40 bytes per live
  // block at 2.5M live blocks (bench/many_blocks.sh), and 51 bytes per block in all at 3.3M.
  void Free(void* p, size_t bytes) override {
    if (bytes >= kDirect) {
      InternalUnmap(p, bytes);
      return;
    }
    GiveBackPages(p, bytes);
    const int c = SizeClass((bytes + 63) & ~size_t{63});
    if (c < 0) return;  // kept where it is
    SpinLockHolder lock(&lock_);
    auto* n = static_cast<FreeNode*>(p);
    n->next = free_[c];
    free_[c] = n;
  }
  void ForkPrepare() { lock_.Lock(); }
  void ForkParent() { lock_.Unlock(); }
  void ForkChild() { lock_.Reset(); }

 private:
  static constexpr size_t kChunk = size_t{64} << 20;
  static constexpr size_t kSmallChunk = size_t{1} << 20;
  static constexpr size_t kDirect = size_t{128} << 10;  // (below kSmallChunk: a carve always fits one)
  static constexpr size_t kAhead = size_t{64} << 10;
  struct FreeNode {
    FreeNode* next;
  };
  static void GiveBackPages(void* p, size_t bytes) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(p);
    const uintptr_t from = (at + sizeof(FreeNode) + track::kPageBytes - 1) & ~(track::kPageBytes - 1);
    const uintptr_t to = (at + bytes) & ~(track::kPageBytes - 1);
    if (from < to) madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
  }
  // The list of a carved size: log2(bytes) for a power of two from 64 bytes to kDirect / 2, else -1.
  static int SizeClass(size_t bytes) {
    if ((bytes & (bytes - 1)) != 0) return -1;
    const int c = __builtin_ctzll(bytes);
    return c < kMinClass || c >= kNumClasses ? -1 : c;
  }
  static constexpr int kMinClass = 6;
  static constexpr int kNumClasses = 17;  // log2(kDirect)
  SpinLock lock_;
  char* begin_ = nullptr;  // the current chunk: [begin_, end_), carved up to cur_
  char* cur_ = nullptr;
  char* end_ = nullptr;
  uintptr_t populated_ = 0;  // the current chunk is faulted in up to here
  size_t carved_ = 0;        // bytes carved in all chunks
  FreeNode* free_[kNumClasses] = {};
  bool small_chunks_ = false;
  std::atomic<bool> exhausted_{false};  // (read without the lock on the direct path)
};

alignas(MappedDepotMemory) char g_memory_storage[sizeof(MappedDepotMemory)];
alignas(track::StackDepot) char g_depot_storage[sizeof(track::StackDepot)];
alignas(track::LiveTable) char g_table_storage[sizeof(track::LiveTable)];
alignas(track::RecentBlocks) char g_recent_storage[sizeof(track::RecentBlocks)];
MappedDepotMemory* g_memory = nullptr;
}  // namespace

namespace tracking_internal {
track::StackDepot* g_depot = nullptr;
track::LiveTable* g_table = nullptr;
track::RecentBlocks* g_recent = nullptr;  // each thread's young blocks, in front of g_table
Site* g_sites = nullptr;
int g_depth = 16;
bool g_on = false;
__thread TrackThread t_track __attribute__((tls_model("initial-exec")));
}  // namespace tracking_internal

namespace {
// How many of poolscope's own frames a capture has been seen to start with (CaptureStackId).
std::atomic<int> g_own_frames{2};

// The executable segments of libpoolscope.so: captured frames inside them are poolscope's own and are
// dropped, whatever the compiler inlined, so a stack starts at the program's call.
constexpr int kMaxOwn = 4;
uintptr_t g_own_lo[kMaxOwn], g_own_hi[kMaxOwn];
int g_nown = 0;
int FindOwnSegments(struct dl_phdr_info* info, size_t, void* arg) {
  uintptr_t self = reinterpret_cast<uintptr_t>(arg);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (self < lo || self >= lo + ph.p_memsz) continue;
    // This object holds us: take all its executable segments.
    for (int j = 0; j < info->dlpi_phnum && g_nown < kMaxOwn; ++j) {
      const ElfW(Phdr)& q = info->dlpi_phdr[j];
      if (q.p_type != PT_LOAD || (q.p_flags & PF_X) == 0) continue;
      g_own_lo[g_nown] = info->dlpi_addr + q.p_vaddr;
      g_own_hi[g_nown] = g_own_lo[g_nown] + q.p_memsz;
      ++g_nown;
    }
    return 1;
  }
  return 0;
}

}  // namespace

namespace tracking_internal {
bool g_hooked = false;

bool IsOwn(uintptr_t pc) {
  for (int i = 0; i < g_nown; ++i) {
    if (pc >= g_own_lo[i] && pc < g_own_hi[i]) return true;
  }
  return false;
}
}  // namespace tracking_internal

bool TrackingInit(int stack_depth, PooledBlockWalk pooled_blocks) {
  g_pooled_blocks = pooled_blocks;
  g_memory = new (g_memory_storage) MappedDepotMemory();
  g_depot = new (g_depot_storage) track::StackDepot(g_memory, kCapacity);
  g_table = new (g_table_storage) track::LiveTable(g_memory);
  g_recent = new (g_recent_storage) track::RecentBlocks(g_memory, g_table);
  g_sites = static_cast<Site*>(InternalReserve(sizeof(Site) * kCapacity, /*noted=*/true, /*pointer_free=*/true));
  if (g_sites == nullptr) return false;
  g_depth = stack_depth;
  dl_iterate_phdr(FindOwnSegments, reinterpret_cast<void*>(&TrackingInit));
  if (stack_depth > 0) {
    char dir[512];
    if (track::CacheDirPath("frames", dir, sizeof dir)) track::OpenFrameRuleStore(dir);
    track::WarmUpStackCapture();
  }
  g_on = true;
  return true;
}

bool TrackingOn() { return g_on; }

void TrackingHooked() { g_hooked = true; }

uint64_t TrackingUnrecorded() { return g_on ? g_table->refused() : 0; }

namespace {
// The calling thread's memo and stack cache, made on first use; nullptr once the thread has ended or
// when no memory could be had. Only the capture that owns the thread's state (busy was 0) calls it.
TrackBlock* BlockOf(TrackThread& tt) {
  if (__builtin_expect(tt.block != nullptr, 1)) return tt.block;
  if (tt.ended || tt.block_failed) return nullptr;
  tt.block = static_cast<TrackBlock*>(InternalMap(sizeof(TrackBlock), /*pointer_free=*/false));
  tt.block_failed = tt.block == nullptr;
  return tt.block;
}
}  // namespace

uint32_t CaptureStackId(int skip, const track::StartFrame* from) {
  if (g_depth <= 0) return track::kNoStackId;
  TrackThread& tt = t_track;
  const bool mine = tt.busy == 0;
  tt.busy = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  uintptr_t pcs[track::kMaxStackDepth];
  // Unwinding costs per frame, so ask for the program's frames plus as many of our own as a call has
  // been seen to carry (learned, only ever raised); a capture that comes back full with too few
  // program frames had more of ours than that and is taken again, deeper. A capture from the
  // program's own frame has none of ours to skip (skip -1 tells its stack ids from the others'), but
  // for an attach hook's frame (HookFrames), which it drops.
  int own = g_own_frames.load(std::memory_order_relaxed);
  TrackBlock* const block = mine ? BlockOf(tt) : nullptr;
  int n, first, want;
  int hook = 0;  // the attach hook's frame, first in a capture from `from`
  bool with_memo;
  for (;;) {
    want = g_depth + own < track::kMaxStackDepth ? g_depth + own : track::kMaxStackDepth;
    with_memo = block != nullptr && tt.memo_off == 0;
    track::CaptureMemo* memo = with_memo ? &block->memo : nullptr;
    n = -1;
    if (from != nullptr) {
      hook = HookFrames(*from);
      n = track::CaptureStackFrom(*from, pcs, FromDepth(hook), memo);
      if (n >= 0) {
        want = FromDepth(hook);
        skip = -1;
      } else {
        from = nullptr;  // the walk cannot go on from there: from here, with the unwinder behind it
      }
    }
    if (n < 0) n = track::CaptureStack(pcs, want, skip + 1, memo);
    if (!with_memo) {
      if (mine && tt.memo_off != 0) --tt.memo_off;
    } else {
      NoteMemoCapture(tt, block->memo.last_steps, block->memo.reused);
    }
    if (with_memo && block->memo.same && want == tt.last_want && skip == tt.last_skip) {
      // The very frames of the last capture: its stack id, without looking at them.
      std::atomic_signal_fence(std::memory_order_seq_cst);
      tt.busy = 0;
      return tt.last_id;
    }
    first = 0;
    if (skip < 0) {
      first = hook < n ? hook : n;
      break;
    }
    while (first < n && IsOwn(pcs[first])) ++first;
    if (n < want || n - first >= g_depth || want == track::kMaxStackDepth) break;
    own = first + 1;  // at least one more than this capture showed, in case the last one was ours too
    int seen = g_own_frames.load(std::memory_order_relaxed);
    while (seen < own && !g_own_frames.compare_exchange_weak(seen, own, std::memory_order_relaxed)) {
    }
  }
  const int depth = n - first < g_depth ? n - first : g_depth;
  uint32_t id = track::kNoStackId;
  if (depth > 0) {
    const uint32_t hash = track::StackDepot::Hash(pcs + first, depth);
    track::StackIdCache* cache = block != nullptr ? &block->cache : nullptr;
    if (cache != nullptr) id = cache->Find(*g_depot, hash, pcs + first, depth);
    if (id == track::kNoStackId) {
      id = g_depot->Insert(pcs + first, depth, hash);
      if (cache != nullptr) cache->Put(*g_depot, hash, id);
    }
  }
  if (with_memo) {
    // The memo holds this capture now, and `same` will be said of it: only then is its id the one to
    // give again (a capture without the memo leaves the memo describing an older one).
    tt.last_want = want;
    tt.last_skip = skip;
    tt.last_id = id;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (mine) tt.busy = 0;
  return id;
}

namespace {
constexpr uint32_t kSiteBatch = 64;
}  // namespace

namespace {
// Stack ids are dense, so the sites' array is written in order of id: it is faulted in a batch of
// kSitesAhead sites (64 KiB) at a time, ahead of the ids counted, instead of a fault per page.
constexpr uint32_t kSitesAhead = (64 << 10) / sizeof(Site);
std::atomic<uint32_t> g_sites_ready{0};  // sites below this id are faulted in

__attribute__((noinline)) void ReadySites(uint32_t id) {
  uint32_t ready = g_sites_ready.load(std::memory_order_relaxed);
  while (id >= ready) {
    uint32_t to = (id / kSitesAhead + 1) * kSitesAhead;
    if (to > kCapacity) to = kCapacity;
    const uintptr_t sites = reinterpret_cast<uintptr_t>(g_sites);
    // Noted before any thread may write there (InternalReserve's `noted`).
    InternalNoteUsed(g_sites, sites + sizeof(Site) * to);
    if (g_sites_ready.compare_exchange_weak(ready, to, std::memory_order_relaxed)) {
      track::PopulateRange(sites + sizeof(Site) * ready, sites + sizeof(Site) * to, sites + sizeof(Site) * kCapacity);
      return;
    }
  }
}
}  // namespace

namespace tracking_internal {
namespace {
// Adds n to a site's count: while the process has one thread (glibc's __libc_single_threaded), one add
// to memory without the lock prefix (a signal handler on this thread cannot split one instruction),
// else a locked one. python3 flushes a site at nearly every allocation: three locked adds were 4% of
// its run with the defaults.
inline void AddCount(std::atomic<uint64_t>& count, uint64_t n, bool alone) {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
  if (alone) {
    asm volatile("addq %1, %0" : "+m"(*reinterpret_cast<uint64_t*>(&count)) : "r"(n));
    return;
  }
#endif
  (void)alone;
  count.fetch_add(n, std::memory_order_relaxed);
}
}  // namespace

void AddToSite(uint32_t id, uint64_t allocs, uint64_t hits, uint64_t real, uint64_t bytes) {
  if (id >= kCapacity || allocs == 0) return;
  if (__builtin_expect(id >= g_sites_ready.load(std::memory_order_relaxed), 0)) ReadySites(id);
  Site& s = g_sites[id];
  const bool alone = __atomic_load_n(&__libc_single_threaded, __ATOMIC_RELAXED) != 0;
  AddCount(s.allocs, allocs, alone);
  AddCount(s.bytes, bytes, alone);
  if (hits != 0) AddCount(s.hits, hits, alone);
  if (real != 0) AddCount(s.real_allocs, real, alone);
}

void FlushSite(TrackThread& tt) {
  AddToSite(tt.site_id, tt.site_pending, tt.site_pending - tt.site_real, tt.site_real, tt.site_bytes);
  tt.site_pending = 0;
  tt.site_real = tt.site_bytes = 0;
}
}  // namespace tracking_internal

namespace {
__attribute__((always_inline)) inline void ChargeSite(uint32_t id, size_t size, uint8_t flags) {
  TrackThread& tt = t_track;
  const uint64_t hit = (flags & kBlockPooled) ? 1 : 0;
  if (tt.busy != 0 || tt.ended) {  // a signal handler inside a capture, or a thread past its end
    AddToSite(id, 1, hit, 1 - hit, size);
    return;
  }
  if (id != tt.site_id || tt.site_pending >= kSiteBatch) {
    FlushSite(tt);
    tt.site_id = id;
  }
  ++tt.site_pending;
  tt.site_real += 1 - hit;
  tt.site_bytes += size;
}
}  // namespace

void TrackingThreadExit() {
  if (!g_on) return;
  TrackThread& tt = t_track;
  FlushSite(tt);
  ReleaseKeptArenas(tt);
  tt.ended = true;
  if (tt.block != nullptr && tt.busy == 0) {
    TrackBlock* block = tt.block;
    tt.block = nullptr;
    InternalUnmap(block, sizeof(TrackBlock));
  }
  if (tt.young != nullptr && tt.young_busy == 0) {
    g_recent->Release(tt.young);
    tt.young = nullptr;
  }
}

uint32_t OnPooledAlloc(size_t size, int skip, const track::StartFrame* from) {
  const uint32_t id = AllocStackId(t_track, skip, from);
  ChargeSite(id, size, kBlockPooled);
  return id;
}

void OnAlloc(void* p, size_t size, int skip, const track::StartFrame* from) {
  const uintptr_t ptr = reinterpret_cast<uintptr_t>(p);
  TrackThread& tt = t_track;
  // The table lines the insert will touch load while the stack is captured.
  if (tt.young != nullptr && tt.young_busy == 0) {
    g_recent->PrefetchInsert(tt.young, ptr);
  } else {
    g_table->Prefetch(ptr);
  }
  const uint32_t id = AllocStackId(tt, skip, from);
  bool kept = false;  // in the thread's young slots
  if (tt.young_busy == 0 && !tt.ended) {
    tt.young_busy = 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (tt.young == nullptr) tt.young = g_recent->Acquire();
    kept = tt.young != nullptr;
    if (kept) g_recent->Insert(tt.young, ptr, size, id, kBlockReal);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    tt.young_busy = 0;
  }
  if (!kept) g_table->Insert(ptr, size, id, kBlockReal);
  ChargeSite(id, size, kBlockReal);
}

void PrefetchFree(void* p) {
  // A block in the thread's own young slots (most frees) is erased there: nothing to load.
  const TrackThread& tt = t_track;
  const uintptr_t ptr = reinterpret_cast<uintptr_t>(p);
  if (tt.young != nullptr && tt.young_busy == 0 && g_recent->Holds(tt.young, ptr)) return;
  g_table->Prefetch(ptr);
}

bool OnFree(void* p, uint64_t* size) {
  TrackThread& tt = t_track;
  const bool usable = tt.young_busy == 0;
  ++tt.young_busy;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const bool found = g_recent->Erase(tt.young, usable, reinterpret_cast<uintptr_t>(p), size);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  --tt.young_busy;
  return found;
}

void ChargeRealAlloc(uint32_t stack_id) {
  if (stack_id >= kCapacity) return;
  if (__builtin_expect(stack_id >= g_sites_ready.load(std::memory_order_relaxed), 0)) ReadySites(stack_id);
  g_sites[stack_id].real_allocs.fetch_add(1, std::memory_order_relaxed);
}

void TrackingCodeUnmapped() {
  if (g_on) track::InvalidateFrameRules();
}

void TrackingForkPrepare() {
  if (!g_on) return;
  g_recent->ForkPrepare();
  g_arenas_lock.Lock();
  g_depot->ForkPrepare();
  g_table->ForkPrepare();
  g_memory->ForkPrepare();
}

void TrackingForkParent() {
  if (!g_on) return;
  g_memory->ForkParent();
  g_table->ForkParent();
  g_depot->ForkParent();
  g_arenas_lock.Unlock();
  g_recent->ForkParent();
}

void TrackingForkChild() {
  if (!g_on) return;
  track::FrameRulesForkChild();
  g_memory->ForkChild();
  g_table->ForkChild();
  g_depot->ForkChild();
  // A thread that is gone may have been writing its arena's record at fork(); its arenas stay open (and
  // leak) in the child, and their records must be readable.
  for (ArenaTrack* t = g_arena_records; t != nullptr; t = t->next_all) {
    const uint32_t seq = t->seq.load(std::memory_order_relaxed);
    if (seq & 1) t->seq.store(seq + 1, std::memory_order_relaxed);
  }
  g_arenas_lock.Reset();
  // The other threads' young blocks are the child's live blocks too; their nodes go to the table.
  g_recent->ForkChild(t_track.young);
}

}  // namespace poolscope
