// File: interpose/tracking.cc
//
// See tracking.h.
#include "interpose/tracking.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <new>
#include <unordered_map>
#include <vector>

#include "interpose/internal.h"
#include "track/depot_memory.h"
#include "track/frame_rules.h"
#include "track/live_table.h"
#include "track/recent_blocks.h"
#include "track/stack_capture.h"
#include "track/stack_depot.h"
#include "track/stack_id_cache.h"

namespace poolscope {
namespace {

// Memory for the depot and the table. Small requests are carved from large NORESERVE mappings and never
// returned; arrays of kDirect bytes or more (the live table's, which it gives back when it doubles
// them) are mappings of their own.
class MappedDepotMemory : public track::DepotMemory {
 public:
  // Carves from 64 MiB reservations; when the address space will not give that much (RLIMIT_AS),
  // from reservations of 1 MiB; when not even those, nullptr from then on without asking again (the
  // callers then record less, and the report says so), rather than a failing mmap per request.
  void* Alloc(size_t bytes) override {
    if (bytes >= kDirect) return exhausted_.load(std::memory_order_relaxed) ? nullptr : InternalAlloc(bytes);
    bytes = (bytes + 63) & ~size_t{63};
    SpinLockHolder lock(&lock_);
    if (cur_ == nullptr || static_cast<size_t>(end_ - cur_) < bytes) {
      if (exhausted_.load(std::memory_order_relaxed)) return nullptr;
      size_t chunk = small_chunks_ ? kSmallChunk : kChunk;
      char* p = static_cast<char*>(InternalReserve(chunk));
      if (p == nullptr && !small_chunks_) {
        small_chunks_ = true;
        chunk = kSmallChunk;
        p = static_cast<char*>(InternalReserve(chunk));
      }
      if (p == nullptr) {
        exhausted_.store(true, std::memory_order_relaxed);
        return nullptr;
      }
      cur_ = p;
      end_ = p + chunk;
    }
    void* p = cur_;
    cur_ += bytes;
    return p;
  }
  void Free(void* p, size_t bytes) override {
    if (bytes >= kDirect) InternalFree(p, bytes);
  }
  void ForkPrepare() { lock_.Lock(); }
  void ForkParent() { lock_.Unlock(); }
  void ForkChild() { lock_.Reset(); }

 private:
  static constexpr size_t kChunk = size_t{64} << 20;
  static constexpr size_t kSmallChunk = size_t{1} << 20;
  static constexpr size_t kDirect = size_t{64} << 10;  // (below kSmallChunk: a carve always fits one)
  SpinLock lock_;
  char* cur_ = nullptr;
  char* end_ = nullptr;
  bool small_chunks_ = false;
  std::atomic<bool> exhausted_{false};  // (read without the lock on the direct path)
};

struct alignas(32) Site {
  std::atomic<uint64_t> allocs, hits, real_allocs, bytes;
};

constexpr uint32_t kCapacity = 1u << 20;

alignas(MappedDepotMemory) char g_memory_storage[sizeof(MappedDepotMemory)];
alignas(track::StackDepot) char g_depot_storage[sizeof(track::StackDepot)];
alignas(track::LiveTable) char g_table_storage[sizeof(track::LiveTable)];
alignas(track::RecentBlocks) char g_recent_storage[sizeof(track::RecentBlocks)];
MappedDepotMemory* g_memory = nullptr;
track::StackDepot* g_depot = nullptr;
track::LiveTable* g_table = nullptr;
track::RecentBlocks* g_recent = nullptr;  // each thread's young blocks, in front of g_table
Site* g_sites = nullptr;
int g_depth = 16;
bool g_on = false;
// How many of poolscope's own frames a capture has been seen to start with (CaptureStackId).
std::atomic<int> g_own_frames{2};

// The executable segments of libpoolscope.so: captured frames inside them are poolscope's own and are
// dropped, whatever the compiler inlined, so a stack starts at the program's call.
constexpr int kMaxOwn = 4;
uintptr_t g_own_lo[kMaxOwn], g_own_hi[kMaxOwn];
int g_nown = 0;
// Attached (TrackingHooked): the program reaches each entry point through a hook of poolscope's own
// (attach.cc), so the frame that called the entry point is the hook's, one below the program's.
bool g_hooked = false;

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

// A thread's memo of its last capture (stack_capture.h, about 3 KiB) and the stacks it interned
// lately (stack_id_cache.h, 72 KiB), in one mapping of its own made on its first capture (over
// 64 KiB, so InternalAlloc maps it without taking its lock inside malloc) and unmapped when the
// thread ends; the cache's pages are touched only as it fills. Not in TLS: glibc carves a thread's
// static TLS out of its stack, and a thread made with PTHREAD_STACK_MIN has 16 KiB in all.
constexpr int kArenaStackCacheBits = 6;
struct TrackBlock {
  track::CaptureMemo memo;
  track::StackIdCache cache;
  // Explicit arenas: the stack ids of (open stack, allocating call) pairs seen lately.
  struct ArenaStack {
    uintptr_t ra;
    uint32_t open_stack;
    uint32_t id;
  } arena_stacks[1 << kArenaStackCacheBits];
};
static_assert(sizeof(TrackBlock) > (size_t{64} << 10), "mapped, not carved under a lock");

// Per thread: the id of the last capture's stack and what the memo policy needs, so that the
// common case, an allocation from the same stack as the one before, costs neither a walk of the
// unchanged frames nor a depot lookup. Kept small: it is static TLS (see TrackBlock).
struct TrackThread {
  int busy;  // a capture is under way on this thread (a signal handler's own must not use these)
  // The last capture's request and stack id: when the memo says the capture returned exactly the
  // frames of the one before, the id is the same.
  int last_want;
  int last_skip;
  uint32_t last_id;
  // Whether the memo pays: recording a walked step costs about as much again as walking it, a
  // reused step about half, so below ~60% of steps reused a thread walks without it for a while
  // (perl's short, varying stacks: 54%; python3's: 68%; a loop's: 100%).
  uint32_t memo_off;     // captures left to take without the memo
  uint32_t memo_window;  // captures with the memo in this window
  uint32_t memo_steps, memo_reused;
  // Counts for one site, added to the shared per-site counters when the site changes, every
  // kSiteBatch allocations, at thread exit and before a report: most allocations come from the same
  // site as the one before, and the shared counters cost four atomic additions.
  uint32_t site_id;
  uint32_t site_pending;
  uint64_t site_hits, site_real, site_bytes;
  bool ended;  // the thread's exit handler ran: no more batching, no young blocks
  // This thread's young blocks (recent_blocks.h), and whether a call is using them (a signal
  // handler that interrupted it must not).
  track::RecentBlocks::Node* young;
  int young_busy;
  // The memo and the stack cache (TrackBlock): made on the thread's first capture, nullptr before,
  // after the thread's end, or when no memory could be had (block_failed: not tried again).
  TrackBlock* block;
  bool block_failed;
  ArenaTrack* kept_arenas;  // closed tracked arenas' records, for the next open
  // StackFromReturnAddress's last answer.
  uint32_t last_open_raw, last_open_id;
  uintptr_t last_open_ra;
};
__thread TrackThread t_track __attribute__((tls_model("initial-exec")));

bool IsOwn(uintptr_t pc) {
  for (int i = 0; i < g_nown; ++i) {
    if (pc >= g_own_lo[i] && pc < g_own_hi[i]) return true;
  }
  return false;
}

// The frames of poolscope's own that a capture from `from` starts with: the attach hook's, else none.
// Such a capture takes one frame more (FromDepth) and drops it, so the stack starts at the program's call.
inline int HookFrames(const track::StartFrame& from) {
  return __builtin_expect(g_hooked, false) && IsOwn(from.ra) ? 1 : 0;
}
inline int FromDepth(int hook) {
  return g_depth + hook < track::kMaxStackDepth ? g_depth + hook : track::kMaxStackDepth;
}

PooledBlockWalk g_pooled_blocks = nullptr;

void ForEachPooledBlock(void (*fn)(uintptr_t ptr, uint32_t size, uint32_t stack_id, void* arg), void* arg) {
  if (g_pooled_blocks != nullptr) g_pooled_blocks(fn, arg);
}

}  // namespace

bool TrackingInit(int stack_depth, PooledBlockWalk pooled_blocks) {
  g_pooled_blocks = pooled_blocks;
  g_memory = new (g_memory_storage) MappedDepotMemory();
  g_depot = new (g_depot_storage) track::StackDepot(g_memory, kCapacity);
  g_table = new (g_table_storage) track::LiveTable(g_memory);
  g_recent = new (g_recent_storage) track::RecentBlocks(g_memory, g_table);
  g_sites = static_cast<Site*>(InternalReserve(sizeof(Site) * kCapacity));
  if (g_sites == nullptr) return false;
  g_depth = stack_depth;
  dl_iterate_phdr(FindOwnSegments, reinterpret_cast<void*>(&TrackingInit));
  if (stack_depth > 0) track::WarmUpStackCapture();
  g_on = true;
  return true;
}

bool TrackingOn() { return g_on; }

void TrackingHooked() { g_hooked = true; }

uint64_t TrackingUnrecorded() { return g_on ? g_table->refused() : 0; }

constexpr uint32_t kMemoWindow = 64;  // captures judged together
constexpr uint32_t kMemoRest = 1024;   // captures without the memo after a poor window

// A capture with the memo, for the memo's policy: `steps` of it, `reused` taken from the memo.
void NoteMemoCapture(TrackThread& tt, uint32_t steps, uint32_t reused) {
  tt.memo_steps += steps;
  tt.memo_reused += reused;
  if (++tt.memo_window == kMemoWindow) {
    if (tt.memo_reused * 10 < tt.memo_steps * 6) tt.memo_off = kMemoRest;
    tt.memo_window = tt.memo_steps = tt.memo_reused = 0;
  }
}

// The stack of the last capture from the program's frame, when a capture from `from` would repeat it
// (its id is last_id): checked, not walked nor looked up. False when it cannot tell.
inline bool RepeatedStack(TrackThread& tt, const track::StartFrame& from, uint32_t* id) {
  const int want = FromDepth(HookFrames(from));
  if (tt.busy != 0 || tt.memo_off != 0 || tt.last_skip != -1 || tt.last_want != want ||
      tt.block == nullptr) {
    return false;
  }
  tt.busy = 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const track::CaptureMemo& memo = tt.block->memo;
  const bool repeats = track::RepeatsLastCapture(from, want, memo);
  if (repeats) {
    NoteMemoCapture(tt, memo.last_steps, memo.last_steps);
    *id = tt.last_id;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  tt.busy = 0;
  return repeats;
}

namespace {
// The calling thread's memo and stack cache, made on first use; nullptr once the thread has ended or
// when no memory could be had. Only the capture that owns the thread's state (busy was 0) calls it.
TrackBlock* BlockOf(TrackThread& tt) {
  if (__builtin_expect(tt.block != nullptr, 1)) return tt.block;
  if (tt.ended || tt.block_failed) return nullptr;
  tt.block = static_cast<TrackBlock*>(InternalAlloc(sizeof(TrackBlock)));
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
    track::StackIdCache* cache =
        block != nullptr && depth <= track::StackIdCache::kMaxDepth ? &block->cache : nullptr;
    if (cache != nullptr) id = cache->Find(hash, pcs + first, depth);
    if (id == track::kNoStackId) {
      id = g_depot->Insert(pcs + first, depth, hash);
      if (cache != nullptr) cache->Put(hash, pcs + first, depth, id);
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

void AddToSite(uint32_t id, uint64_t allocs, uint64_t hits, uint64_t real, uint64_t bytes) {
  if (id >= kCapacity || allocs == 0) return;
  Site& s = g_sites[id];
  s.allocs.fetch_add(allocs, std::memory_order_relaxed);
  s.bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (hits != 0) s.hits.fetch_add(hits, std::memory_order_relaxed);
  if (real != 0) s.real_allocs.fetch_add(real, std::memory_order_relaxed);
}

void FlushSite(TrackThread& tt) {
  AddToSite(tt.site_id, tt.site_pending, tt.site_hits, tt.site_real, tt.site_bytes);
  tt.site_pending = 0;
  tt.site_hits = tt.site_real = tt.site_bytes = 0;
}

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
  tt.site_hits += hit;
  tt.site_real += 1 - hit;
  tt.site_bytes += size;
}
}  // namespace

namespace {
void ReleaseKeptArenas(TrackThread& tt);
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
    InternalFree(block, sizeof(TrackBlock));
  }
  if (tt.young != nullptr && tt.young_busy == 0) {
    g_recent->Release(tt.young);
    tt.young = nullptr;
  }
}

namespace {
// The stack id of an allocation, for OnPooledAlloc and OnAlloc: the last one when a capture from the
// program's frame would repeat it, else a capture. Inline into both, so `skip + 1` counts the
// caller's own frame.
__attribute__((always_inline)) inline uint32_t AllocStackId(TrackThread& tt, int skip, const track::StartFrame* from) {
  uint32_t id;
  if (from == nullptr || g_depth <= 0 || !RepeatedStack(tt, *from, &id)) id = CaptureStackId(skip + 1, from);
  return id;
}
}  // namespace

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

// ---- explicit arenas ----------------------------------------------------------------------------------
// Records are never freed: every one made is on g_arena_records (g_arenas_lock guards that list and
// g_free_records only); a closed one waits on its thread's list (TrackThread::kept_arenas) for the
// thread's next open, or, once the thread has ended, on g_free_records. Only the record's thread writes
// it, inside a sequence lock (seq odd while it writes; no atomic read-modify-write); readers copy it and
// retry (ReadArena).
//
// A group counts the blocks of one allocating call: those of the open arena (blocks, bytes), and those
// of the record's earlier arenas opened from the same stack (site_*), which its site has not been
// charged for yet. A record reopened from the same stack (a loop's arena) keeps its groups and charges
// nothing; reopened from another stack, at its thread's exit or when it must give a group up, it adds
// them to the shared site counters. The report reads every record's site_* counts besides.

constexpr uint32_t kArenaGroups = 6;  // return addresses an arena counts apart; more share the open's stack

struct ArenaGroup {
  uintptr_t ra;  // 0: blocks of calls that found no group free (their stack is the open's)
  uint8_t flags;
  uint64_t blocks, bytes;
  uint64_t site_blocks, site_bytes;
};

struct ArenaTrack {
  ArenaTrack* next_all;   // g_arena_records
  ArenaTrack* next_free;  // its thread's kept records, or g_free_records
  std::atomic<uint32_t> seq;
  bool open;
  uint32_t open_stack;
  uint32_t ngroups;
  // groups[kArenaGroups] and [kArenaGroups + 1]: pooled and real blocks past the others (ra 0).
  ArenaGroup groups[kArenaGroups + 2];
  std::atomic<uint64_t> baseline_blocks;  // blocks held at MarkArenaBaseline (written by the reader)
};

namespace {
SpinLock g_arenas_lock;
ArenaTrack* g_arena_records = nullptr;
ArenaTrack* g_free_records = nullptr;

inline void BeginWrite(ArenaTrack* t) {
  t->seq.store(t->seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
}
inline void EndWrite(ArenaTrack* t) {
  t->seq.store(t->seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

inline bool GroupInUse(const ArenaTrack& t, uint32_t i) { return i < t.ngroups || i >= kArenaGroups; }

struct ArenaCopy {
  bool open;
  uint32_t open_stack;
  ArenaGroup groups[kArenaGroups + 2];  // the unused ones zero
  uint64_t blocks;                      // of the open arena
};

// A consistent copy of `t`; false when none could be had (its thread stays inside a write: a signal
// handler that interrupted it is the reader).
bool ReadArena(const ArenaTrack& t, ArenaCopy* c) {
  for (int tries = 0; tries < (1 << 16); ++tries) {
    const uint32_t s1 = t.seq.load(std::memory_order_acquire);
    if (s1 & 1) {
      __builtin_ia32_pause();
      continue;
    }
    c->open = t.open;
    c->open_stack = t.open_stack;
    const uint32_t n = t.ngroups < kArenaGroups ? t.ngroups : kArenaGroups;
    for (uint32_t i = 0; i < kArenaGroups + 2; ++i) {
      c->groups[i] = i < n || i >= kArenaGroups ? t.groups[i] : ArenaGroup{};
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (t.seq.load(std::memory_order_relaxed) != s1) continue;
    c->blocks = 0;
    if (c->open) {
      for (const ArenaGroup& g : c->groups) c->blocks += g.blocks;
    }
    return true;
  }
  return false;
}

// The stack of a block allocated by the call returning to `ra` in an arena opened with `open_stack`.
uint32_t ArenaBlockStack(uint32_t open_stack, uintptr_t ra) {
  if (ra == 0 || g_depth <= 0) return open_stack;
  const uintptr_t* opcs = nullptr;
  const int n = g_depot->Get(open_stack, &opcs);
  uintptr_t pcs[track::kMaxStackDepth];
  int depth = 0;
  pcs[depth++] = ra;
  int from = 0;
  if (n > 0) {
    const void* f = track::FunctionOf(ra - 1);
    if (f != nullptr && f == track::FunctionOf(opcs[0] - 1)) from = 1;  // the open's frame is this one
  }
  for (int i = from; i < n && depth < g_depth; ++i) pcs[depth++] = opcs[i];
  return g_depot->Insert(pcs, depth);
}

// ArenaBlockStack through the thread's cache of the answers (TrackBlock), when it has one.
uint32_t CachedArenaStack(TrackThread& tt, uint32_t open_stack, uintptr_t ra) {
  if (ra == 0 || tt.block == nullptr) return ArenaBlockStack(open_stack, ra);
  const size_t i = ((ra ^ (uintptr_t{open_stack} * 0x9E3779B97F4A7C15ull)) * 0x9E3779B97F4A7C15ull) >>
                   (64 - kArenaStackCacheBits);
  TrackBlock::ArenaStack& e = tt.block->arena_stacks[i];
  if (e.ra != ra || e.open_stack != open_stack) {
    e.id = ArenaBlockStack(open_stack, ra);
    e.ra = ra;
    e.open_stack = open_stack;
  }
  return e.id;
}

// Adds the record's site_* counts to the shared site counters. Its thread, inside a write.
void ChargeArenaSites(TrackThread& tt, ArenaTrack* t) {
  for (uint32_t i = 0; i < kArenaGroups + 2; ++i) {
    ArenaGroup& g = t->groups[i];
    if (!GroupInUse(*t, i) || g.site_blocks == 0) continue;
    const uint64_t hits = (g.flags & kBlockPooled) ? g.site_blocks : 0;
    AddToSite(CachedArenaStack(tt, t->open_stack, g.ra), g.site_blocks, hits, g.site_blocks - hits, g.site_bytes);
    g.site_blocks = g.site_bytes = 0;
  }
}

// A thread that ends charges its kept records' sites and gives the records to the others.
void ReleaseKeptArenas(TrackThread& tt) {
  for (ArenaTrack* t = tt.kept_arenas; t != nullptr; t = t->next_free) {
    BeginWrite(t);
    ChargeArenaSites(tt, t);
    EndWrite(t);
  }
  SpinLockHolder h(&g_arenas_lock);
  while (ArenaTrack* t = tt.kept_arenas) {
    tt.kept_arenas = t->next_free;
    t->next_free = g_free_records;
    g_free_records = t;
  }
}

ArenaTrack* TakeArenaRecord(TrackThread& tt) {
  if (ArenaTrack* t = tt.kept_arenas) {
    tt.kept_arenas = t->next_free;
    return t;
  }
  {
    SpinLockHolder h(&g_arenas_lock);
    if (ArenaTrack* t = g_free_records) {
      g_free_records = t->next_free;
      return t;
    }
  }
  auto* t = static_cast<ArenaTrack*>(InternalAlloc(sizeof(ArenaTrack)));
  if (t == nullptr) return nullptr;
  new (t) ArenaTrack{};
  t->groups[kArenaGroups].flags = kBlockPooled;
  t->groups[kArenaGroups + 1].flags = kBlockReal;
  SpinLockHolder h(&g_arenas_lock);
  t->next_all = g_arena_records;
  g_arena_records = t;
  return t;
}
}  // namespace

namespace {
// The stack `id` from the frame that returns to `ra` when that is one of its first few (the client
// library's frames above it are left out), else `id`. The last answer is kept per thread.
uint32_t StackFromReturnAddress(TrackThread& tt, uint32_t id, uintptr_t ra) {
  if (ra == 0 || g_depth <= 0) return id;
  if (id == tt.last_open_raw && ra == tt.last_open_ra) return tt.last_open_id;
  const uintptr_t* pcs = nullptr;
  const int n = g_depot->Get(id, &pcs);
  uint32_t trimmed = id;
  for (int k = 1; k < n && k < 4; ++k) {
    if (pcs[0] == ra) break;
    if (pcs[k] == ra) {
      trimmed = g_depot->Insert(pcs + k, n - k);
      break;
    }
  }
  tt.last_open_raw = id;
  tt.last_open_ra = ra;
  tt.last_open_id = trimmed;
  return trimmed;
}
}  // namespace

ArenaTrack* OnArenaOpen(int skip, const track::StartFrame* from, uintptr_t ra) {
  TrackThread& tt = t_track;
  ArenaTrack* t = TakeArenaRecord(tt);
  if (t == nullptr) return nullptr;
  const uint32_t id = StackFromReturnAddress(tt, AllocStackId(tt, skip, from), ra);
  BeginWrite(t);
  if (id != t->open_stack) {
    ChargeArenaSites(tt, t);
    t->open_stack = id;
    t->ngroups = 0;
  }
  t->open = true;
  t->baseline_blocks.store(0, std::memory_order_relaxed);
  EndWrite(t);
  return t;
}

void OnArenaAlloc(ArenaTrack* t, size_t size, uint8_t flags, uintptr_t ra) {
  BeginWrite(t);
  ArenaGroup* g = nullptr;
  for (uint32_t i = 0; i < t->ngroups; ++i) {
    if (t->groups[i].ra == ra && t->groups[i].flags == flags) {
      g = &t->groups[i];
      break;
    }
  }
  if (g == nullptr) {
    // A group free, or one of the record's that holds only site counts of earlier arenas (charged
    // now), else the open's stack.
    uint32_t i = t->ngroups;
    if (i == kArenaGroups) {
      for (i = 0; i < kArenaGroups && t->groups[i].blocks != 0; ++i) {
      }
    }
    if (i < kArenaGroups && ra != 0) {
      g = &t->groups[i];
      if (i == t->ngroups) {
        ++t->ngroups;
      } else if (g->site_blocks != 0) {
        const uint64_t hits = (g->flags & kBlockPooled) ? g->site_blocks : 0;
        AddToSite(CachedArenaStack(t_track, t->open_stack, g->ra), g->site_blocks, hits, g->site_blocks - hits,
                  g->site_bytes);
      }
      *g = ArenaGroup{ra, flags, 0, 0, 0, 0};
    } else {
      g = &t->groups[kArenaGroups + ((flags & kBlockPooled) ? 0 : 1)];
    }
  }
  ++g->blocks;
  g->bytes += size;
  EndWrite(t);
}

void OnArenaClose(ArenaTrack* t, uint64_t* pooled_bytes, uint64_t* real_bytes) {
  TrackThread& tt = t_track;
  BeginWrite(t);
  const auto close_group = [pooled_bytes, real_bytes](ArenaGroup& g) {
    uint64_t* bytes = (g.flags & kBlockPooled) ? pooled_bytes : real_bytes;
    if (bytes != nullptr) *bytes += g.bytes;
    g.site_blocks += g.blocks;
    g.site_bytes += g.bytes;
    g.blocks = g.bytes = 0;
  };
  // The groups in use (GroupInUse); the others hold no block.
  const uint32_t n = t->ngroups < kArenaGroups ? t->ngroups : kArenaGroups;
  for (uint32_t i = 0; i < n; ++i) close_group(t->groups[i]);
  close_group(t->groups[kArenaGroups]);
  close_group(t->groups[kArenaGroups + 1]);
  t->open = false;
  EndWrite(t);
  if (!tt.ended) {
    t->next_free = tt.kept_arenas;
    tt.kept_arenas = t;
  } else {
    BeginWrite(t);
    ChargeArenaSites(tt, t);
    EndWrite(t);
    SpinLockHolder h(&g_arenas_lock);
    t->next_free = g_free_records;
    g_free_records = t;
  }
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
  if (stack_id < kCapacity) g_sites[stack_id].real_allocs.fetch_add(1, std::memory_order_relaxed);
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

namespace {
// Calls fn(copy) for every arena record (open or not).
template <typename Fn>
void ForEachArenaRecord(Fn fn) {
  ArenaTrack* first;
  {
    SpinLockHolder h(&g_arenas_lock);
    first = g_arena_records;
  }
  // Records are never freed and the list only grows at its head: the walk from the head read under
  // the lock is safe without it.
  ArenaCopy c;
  for (ArenaTrack* t = first; t != nullptr; t = t->next_all) {
    if (ReadArena(*t, &c)) fn(c);
  }
}
}  // namespace

size_t AggregateLeaks(LeakGroup* groups, size_t max, LiveTotals* totals, uint8_t (*kind_of)(uintptr_t ptr)) {
  *totals = LiveTotals{};
  if (!g_on) return 0;
  std::unordered_map<uint64_t, LeakGroup> by_stack;
  auto add = [&](uint32_t stack_id, uint8_t flags, uint64_t blocks, uint64_t bytes, uintptr_t ptr) {
    const uint8_t kind = kind_of != nullptr && ptr != 0 ? kind_of(ptr) : 0;
    LeakGroup& g = by_stack[uint64_t{kind} << 32 | stack_id];
    g.stack_id = stack_id;
    g.kind = kind;
    g.blocks += blocks;
    g.bytes += bytes;
    totals->blocks += blocks;
    totals->bytes += bytes;
    if (flags & kBlockPooled) {
      g.pooled_blocks += blocks;
      totals->pooled_blocks += blocks;
      totals->pooled_bytes += bytes;
    } else {
      totals->real_blocks += blocks;
      totals->real_bytes += bytes;
    }
  };
  g_table->ForEach([&](const track::LiveEntry& e) { add(e.stack_id, e.flags, 1, e.size, e.ptr); });
  g_recent->ForEach([&](const track::LiveEntry& e) { add(e.stack_id, e.flags, 1, e.size, e.ptr); });
  ForEachPooledBlock(
      [](uintptr_t ptr, uint32_t size, uint32_t stack_id, void* arg) {
        (*static_cast<decltype(add)*>(arg))(stack_id, kBlockPooled, 1, size, ptr);
      },
      &add);
  ForEachArenaRecord([&](const ArenaCopy& c) {
    for (const ArenaGroup& g : c.groups) {
      if (c.open && g.blocks != 0) add(ArenaBlockStack(c.open_stack, g.ra), g.flags, g.blocks, g.bytes, 0);
      if (c.open && (g.flags & kBlockPooled)) totals->arena_pooled_bytes += g.bytes;
    }
  });
  std::vector<LeakGroup> all;
  all.reserve(by_stack.size());
  for (auto& kv : by_stack) all.push_back(kv.second);
  std::sort(all.begin(), all.end(), [](const LeakGroup& a, const LeakGroup& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.blocks > b.blocks;
  });
  size_t n = std::min(max, all.size());
  std::copy(all.begin(), all.begin() + static_cast<long>(n), groups);
  return all.size();
}

size_t TopSites(SiteCounters* sites, size_t max) {
  // This thread's batch; other threads' batches (at most kSiteBatch - 1 allocations each) show in the
  // next report.
  if (!g_on) return 0;
  if (t_track.busy == 0) FlushSite(t_track);
  // The arenas' blocks not yet charged to their sites (the open arenas', and those their records hold
  // back), first: interning their stacks may grow the depot.
  std::unordered_map<uint32_t, SiteCounters> open;
  ForEachArenaRecord([&](const ArenaCopy& c) {
    for (const ArenaGroup& g : c.groups) {
      const uint64_t blocks = (c.open ? g.blocks : 0) + g.site_blocks;
      if (blocks == 0) continue;
      const uint32_t id = ArenaBlockStack(c.open_stack, g.ra);
      SiteCounters& s = open[id];
      s.stack_id = id;
      s.allocs += blocks;
      s.bytes += (c.open ? g.bytes : 0) + g.site_bytes;
      ((g.flags & kBlockPooled) ? s.hits : s.real_allocs) += blocks;
    }
  });
  std::vector<SiteCounters> all;
  uint32_t n = std::min<uint32_t>(g_depot->size() + track::kFirstStackId, kCapacity);
  for (uint32_t id = 0; id < n; ++id) {
    const Site& s = g_sites[id];
    uint64_t allocs = s.allocs.load(std::memory_order_relaxed);
    SiteCounters c{id, allocs, s.hits.load(std::memory_order_relaxed), s.real_allocs.load(std::memory_order_relaxed),
                   s.bytes.load(std::memory_order_relaxed)};
    auto it = open.find(id);
    if (it != open.end()) {
      c.allocs += it->second.allocs;
      c.hits += it->second.hits;
      c.real_allocs += it->second.real_allocs;
      c.bytes += it->second.bytes;
    }
    if (c.allocs == 0) continue;
    all.push_back(c);
  }
  std::sort(all.begin(), all.end(),
            [](const SiteCounters& a, const SiteCounters& b) { return a.allocs > b.allocs; });
  size_t k = std::min(max, all.size());
  std::copy(all.begin(), all.begin() + static_cast<long>(k), sites);
  return k;
}

int StackFrames(uint32_t stack_id, const uintptr_t** pcs) {
  if (!g_on) return 0;
  return g_depot->Get(stack_id, pcs);
}

void ForEachLiveBlock(void (*fn)(uintptr_t ptr, void* arg), void* arg) {
  if (!g_on) return;
  g_table->ForEach([&](const track::LiveEntry& e) { fn(e.ptr, arg); });
  g_recent->ForEach([&](const track::LiveEntry& e) { fn(e.ptr, arg); });
  struct Call {
    void (*fn)(uintptr_t, void*);
    void* arg;
  } call{fn, arg};
  ForEachPooledBlock(
      [](uintptr_t ptr, uint32_t, uint32_t, void* c) { static_cast<Call*>(c)->fn(ptr, static_cast<Call*>(c)->arg); },
      &call);
}

void ForEachTrackedBlockInfo(void (*fn)(uintptr_t ptr, uint64_t size, bool pooled, void* arg), void* arg) {
  if (!g_on) return;
  g_table->ForEach([&](const track::LiveEntry& e) { fn(e.ptr, e.size, (e.flags & kBlockPooled) != 0, arg); });
  g_recent->ForEach([&](const track::LiveEntry& e) { fn(e.ptr, e.size, (e.flags & kBlockPooled) != 0, arg); });
}

void MarkArenaBaseline() {
  if (!g_on) return;
  ArenaTrack* first;
  {
    SpinLockHolder h(&g_arenas_lock);
    first = g_arena_records;
  }
  ArenaCopy c;
  for (ArenaTrack* t = first; t != nullptr; t = t->next_all) {
    if (ReadArena(*t, &c) && c.open) t->baseline_blocks.store(c.blocks, std::memory_order_relaxed);
  }
}

void CountArenaBlocks(uint64_t* blocks, uint64_t* since_baseline) {
  *blocks = *since_baseline = 0;
  if (!g_on) return;
  ArenaTrack* first;
  {
    SpinLockHolder h(&g_arenas_lock);
    first = g_arena_records;
  }
  ArenaCopy c;
  for (ArenaTrack* t = first; t != nullptr; t = t->next_all) {
    if (!ReadArena(*t, &c) || !c.open) continue;
    const uint64_t base = t->baseline_blocks.load(std::memory_order_relaxed);
    *blocks += c.blocks;
    *since_baseline += c.blocks > base ? c.blocks - base : 0;
  }
}

}  // namespace poolscope
