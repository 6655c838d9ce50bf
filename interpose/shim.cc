// File: interpose/shim.cc
//
// Slow paths of the entry points, thread and process life cycle, and the C API. See shim.h.
//
// Lock order: the table of docs/design.md ("Lock order"). ForkPrepare takes g_registry_lock, then
// tracking's locks (TrackingForkPrepare), the internal memory locks and the Domain's metadata lock.
#include "interpose/shim.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "interpose/caller_tag.h"
#include "interpose/internal.h"
#include "interpose/leak_exit.h"
#include "interpose/leak_scan.h"
#include "interpose/real.h"
#include "interpose/signals.h"
#include "interpose/snapshot.h"
#include "interpose/tracking.h"

namespace poolscope {

namespace {

std::atomic<pool::PoolMap::Leaf*> g_map_root[pool::PoolMap::kRootSize];

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
__attribute__((noinline)) void ValgrindDescribeAlloc(void* p, size_t n) {
  VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, 1);
}

// A pooled block's free, told to memcheck before the pool sees it: the free may release the pool, and
// memcheck must already count the block as freed then. A block that is not live is still described:
// memcheck then reports the program's invalid or double free as it would without poolscope. A live
// block's memory stays addressable and defined, since it is back in the pool, which zeroes and reuses it.
void ValgrindDescribeFree(const pool::PoolHeader* h, void* p);

__attribute__((noinline)) void WipeStackBelow() {
  volatile char pad[4096];
  for (size_t i = 0; i < sizeof pad; ++i) pad[i] = 0;
}

alignas(pool::Domain) char g_domain_storage[sizeof(pool::Domain)];
pool::Domain* g_domain = nullptr;

void ValgrindDescribeFree(const pool::PoolHeader* h, void* p) {
  size_t usable = g_domain->UsableSize(h, p);
  VALGRIND_FREELIKE_BLOCK(p, 0);
  if (usable != 0) VALGRIND_MAKE_MEM_DEFINED(p, usable);
}

// The live pooled blocks, for tracking (TrackingInit).
void ForEachPooledBlock(void (*fn)(uintptr_t ptr, uint32_t size, uint32_t stack_id, void* arg), void* arg) {
  if (g_domain == nullptr) return;
  g_domain->ForEachLiveBlock(
      [&](void* p, pool::BlockInfo info) { fn(reinterpret_cast<uintptr_t>(p), info.size, info.stack_id, arg); });
}

class ShimBackend : public pool::Backend {
 public:
  // Every pool's real allocation is made here and nowhere else: `poolscope suppressions`
  // (tools/suppressions.h) matches this function by name, mangled
  // (_ZN9poolscope*ShimBackend9AllocPool*) for memcheck and demangled for LSan and heaptrack.
  void* AllocPool(size_t bytes) override {
    ThreadState& ts = t_state;
    void* p;
    {
      Guard guard(ts);  // what the next allocator allocates for itself meanwhile is not ours
      p = poolscope_pool_alloc(bytes);
    }
    ++ts.c.real.ncalls[g_pool_by_malloc ? kMalloc : kPosixMemalign];
    if (p == nullptr) return nullptr;
    if (g_valgrind) VALGRIND_MEMPOOL_ALLOC(&g_valgrind_anchor, p, bytes);
    ++ts.c.real.nallocs;
    ts.c.real.nbytes += g_pool_by_malloc ? bytes + kPoolSlack : bytes;
    return p;
  }
  void FreePool(void* p) override {
    ThreadState& ts = t_state;
    ++ts.c.real.ncalls[kFree];
    ++ts.c.real.nfrees;
    if (g_valgrind) VALGRIND_MEMPOOL_FREE(&g_valgrind_anchor, p);
    if (g_pool_by_malloc) {
      void* raw;
      memcpy(&raw, static_cast<char*>(p) + g_domain->pool_bytes(), sizeof raw);
      p = raw;
    }
    Guard guard(ts);
    g_real.free(p);
  }
  void* AllocMeta(size_t bytes) override { return InternalAlloc(bytes); }
  void FreeMeta(void* p, size_t bytes) override { InternalFree(p, bytes); }
  void* ReserveLeaf(size_t bytes) override { return InternalReserve(bytes); }
};

ShimBackend g_backend;

}  // namespace

// track=1: every logical allocation and free is recorded, so the inline fast paths are off (the
// exported free jumps to FreeTracked itself).
bool g_tracking = false;
// track=1 with tag=small and no valgrind: malloc's slow path is MallocTracked (the exported malloc
// jumps there directly).
bool g_tracked_malloc = false;

bool g_pool_by_malloc = false;

void* PoolFromMalloc(size_t pool_bytes) {
  char* raw = static_cast<char*>(g_real.malloc(pool_bytes + kPoolSlack));
  if (raw == nullptr) return nullptr;
  uintptr_t base = (reinterpret_cast<uintptr_t>(raw) + pool::kLine - 1) & ~uintptr_t{pool::kLine - 1};
  if (base + pool_bytes + sizeof raw > reinterpret_cast<uintptr_t>(raw) + pool_bytes + kPoolSlack) {
    // The next allocator gave less than 16-byte alignment: no room for the address past the pool.
    g_real.free(raw);
    return nullptr;
  }
  memcpy(reinterpret_cast<char*>(base) + pool_bytes, &raw, sizeof raw);
  return reinterpret_cast<void*>(base);
}

namespace {


Options g_options;
bool g_pooling = false;
size_t g_pool_size = 0;  // pool_size as configured
// The largest malloc-family request a pool can hold: carving rounds sizes up to 16 bytes (8 with
// malloc_align=8), so with pool_size=24 a 24-byte request needs 32 and never fits.
size_t g_pool_capacity = 0;
size_t g_max_align = 16;

std::atomic<int> g_init{0};  // 0 not yet, 1 in progress, 2 done
pthread_key_t g_key;

SpinLock g_registry_lock;
ThreadState* g_threads = nullptr;
ThreadCounters g_ended;
pool::PoolStats g_ended_pool;
ThreadRecord* g_records = nullptr;
ThreadRecord** g_records_tail = &g_records;
int g_nrecords = 0;
uint64_t g_records_omitted = 0;
constexpr int kMaxRecords = 256;
uint64_t g_bootstrap_allocs = 0, g_bootstrap_bytes = 0;
std::atomic<uint64_t> g_passthrough_allocs{0}, g_passthrough_frees{0};

ProcessInfo g_process;
int64_t g_fork_carryover = 0;
uint64_t g_threads_lost_at_fork = 0;
uint64_t g_drained_at_exit = 0;  // pools drain_at_exit=1 released

int GetTid() { return static_cast<int>(syscall(SYS_gettid)); }

int RegularMissFor(const ThreadState& ts) {
  if (ts.phase != kActive || ts.guard > 0 || g_valgrind || g_tracking) return 0;
  if (!g_pooling) return 1 + pool::kMissDisabled;
  // Pooling gave up: no one reason fits every request (above the pool size is still too_large), so
  // the slow path (Decide) tells them apart.
  if (g_domain->exhausted()) return 0;
  return g_options.tag == TagMode::kSmall ? 1 + pool::kMissTooLarge : 0;
}

size_t LimitFor(const ThreadState& ts) {
  if (!g_pooling || ts.phase != kActive || g_valgrind || g_tracking || ts.carves == nullptr ||
      g_domain->exhausted()) {
    return 0;
  }
  switch (g_options.tag) {
    case TagMode::kSmall: return g_pool_capacity;
    case TagMode::kExplicit: return ts.tag_depth > 0 ? g_pool_capacity : 0;
    case TagMode::kCaller: return 0;
  }
  return 0;
}

// The inline path (TryPooled) serves the pooled requests it can count in its table, and only in the
// 16-byte mode (its carve has no malloc_align=8 branch); the rest of the pool's range takes
// MallocRegular's pooled branch or the slow paths.
size_t FastLimitFor(size_t pool_limit) {
  if (g_max_align != 16) return 0;
  return pool_limit < kFastSizes ? pool_limit : kFastSizes;
}

// Explicit arenas ignore the tag option and malloc_align. At most kFastSizes: the inline carve counts
// in the carve table.
size_t ArenaLimitFor(const ThreadState& ts) {
  if (!g_pooling || ts.phase != kActive || g_tracking || ts.carves == nullptr) return 0;
  return g_pool_size < kFastSizes ? g_pool_size : kFastSizes;
}

void SetLimits(ThreadState& ts) {
  ts.pool_limit = LimitFor(ts);
  ts.fast_limit = FastLimitFor(ts.pool_limit);
  ts.regular_miss = RegularMissFor(ts);
  ts.arena_limit = ArenaLimitFor(ts);
}

void WarnLine(void*, const char* line) {
  char buf[700];
  snprintf(buf, sizeof buf, "poolscope: warning: %s", line);
  if (!g_options.quiet) RawLine(buf);
}

void EmitLine(void*, const char* line) { RawLine(line); }

// A thread's carve table, or an empty one when it has none.
const FastCarves& CarvesOf(const ThreadState& ts) {
  static const FastCarves kNone{};
  return ts.carves != nullptr ? *ts.carves : kNone;
}

// Gives back the carve table of a thread that counts no more (ended, or lost at fork).
void FreeCarves(ThreadState& ts) {
  FastCarves* carves = ts.carves;
  ts.carves = nullptr;
  InternalFree(carves, sizeof *carves);
}

// A thread's own counters, settled (counters.h) in place.
void SettleOwn(ThreadState& ts) {
  pool::PoolStats& stats = ts.tc.stats();
  Settle(&ts.c, CarvesOf(ts), &stats.hits, &stats.pooled_frees, &stats.resets_in_place);
  if (ts.carves != nullptr) memset(ts.carves, 0, sizeof *ts.carves);
}

void FoldInto(ThreadState& ts, ThreadRecord* record) {
  SettleOwn(ts);
  AddCounters(&g_ended, ts.c);
  pool::AddStats(&g_ended_pool, ts.tc.stats());
  if (record != nullptr) {
    record->c = ts.c;
    record->pool = ts.tc.stats();
  }
  memset(&ts.c, 0, sizeof ts.c);
  ts.tc.stats() = pool::PoolStats{};
}

ThreadRecord* NewRecord(const ThreadState& ts) {
  if (g_nrecords >= kMaxRecords) {
    ++g_records_omitted;
    return nullptr;
  }
  auto* r = static_cast<ThreadRecord*>(InternalAlloc(sizeof(ThreadRecord)));
  if (r == nullptr) return nullptr;
  r->tid = ts.tid;
  r->ended = true;
  *g_records_tail = r;
  g_records_tail = &r->next;
  ++g_nrecords;
  return r;
}

void Unregister(ThreadState& ts) {
  if (ts.prev != nullptr) ts.prev->next = ts.next;
  if (ts.next != nullptr) ts.next->prev = ts.prev;
  if (g_threads == &ts) g_threads = ts.next;
  ts.next = ts.prev = nullptr;
}

void OnThreadExit(void* arg) {
  ThreadState& ts = *static_cast<ThreadState*>(arg);
  if (ts.phase != kActive) return;
  {
    Guard guard(ts);
    if (g_tracking) TrackingThreadExit();
    ts.tc.Shutdown();
    SpinLockHolder lock(&g_registry_lock);
    Unregister(ts);
    FoldInto(ts, NewRecord(ts));
    ts.phase = kDead;
  }
  // After the guard's end, which puts back the shortcut fields it cleared: a dead thread's later
  // allocations (other key and TLS destructors) must take the slow path, which counts them (FoldDead).
  ts.fast_limit = 0;
  ts.arena_limit = 0;
  ts.pool_limit = 0;
  ts.regular_miss = 0;
  // Settled and unregistered, so no snapshot reads it again, and with the limits 0 no path counts
  // in it (not even a signal handler's malloc that lands between these lines).
  FreeCarves(ts);
}

// A thread past its exit handler still allocates (other TLS destructors): its counts go straight to
// the ended totals.
void FoldDead(ThreadState& ts) {
  SpinLockHolder lock(&g_registry_lock);
  FoldInto(ts, nullptr);
}

void ForkPrepare() {
  g_registry_lock.Lock();
  TrackingForkPrepare();
  InternalForkPrepare();
  if (g_domain != nullptr) g_domain->ForkPrepare();
}

void ForkParent() {
  if (g_domain != nullptr) g_domain->ForkParent();
  InternalForkParent();
  TrackingForkParent();
  g_registry_lock.Unlock();
}

void ForkChild() {
  if (g_domain != nullptr) g_domain->ForkChild();
  InternalForkChild();
  TrackingForkChild();
  g_registry_lock.Reset();
  ThreadState& self = t_state;
  g_process.forked_from = g_process.pid;
  g_process.pid = getpid();
  g_process.ppid = getppid();
  g_process.start_ns = NowNs();
  if (self.phase == kActive) self.tid = GetTid();
  // Every other thread is gone. fork() stopped each wherever it stood, possibly between two counter
  // updates of one call, so their counters are not taken into the child's ledgers (which therefore
  // start from the forking thread's and the ended threads' totals, both consistent), nor are their
  // pools (possibly halfway between two places: ThreadCache::AbandonAtFork), and what that leaves
  // unbalanced is measured below.
  Guard guard(self);
  if (self.phase == kActive) self.tc.ResetAtFork();
  for (ThreadState* ts = g_threads; ts != nullptr;) {
    ThreadState* next = ts->next;
    if (ts != &self) {
      ts->tc.AbandonAtFork();
      Unregister(*ts);
      memset(&ts->c, 0, sizeof ts->c);
      FreeCarves(*ts);
      ts->tc.stats() = pool::PoolStats{};
      ts->phase = kDead;
      ++g_threads_lost_at_fork;
    }
    ts = next;
  }
  // The other threads were stopped by fork() wherever they stood, some between two counter updates of
  // one allocation. Whatever that left unbalanced is measured now, while nothing else runs, and
  // reported as its own term of the reconciliation.
  SnapshotNow snap;
  if (snap.get() != nullptr) {
    g_fork_carryover += ReconciliationGap(*snap.get());
    // leak_exitcode: this process's own code begins here; what it inherited is not its leak.
    if (g_options.leak_exitcode > 0) TakeLeakBaseline(LogicalLive(*snap.get()));
  }
}

void InitGlobal(ThreadState& ts) {
  Guard guard(ts);
  const char* text = getenv("POOLSCOPE_OPTIONS");
  Options parsed;
  // quiet applies to the warnings of the same string, wherever it stands in it.
  if (text != nullptr && (strstr(text, "quiet=1") != nullptr)) g_options.quiet = 1;
  ParseOptions(text, &parsed, WarnLine, nullptr);
  g_options = parsed;
  g_pooling = g_options.pooling();
  pool::Config config;
  config.enabled = g_pooling;
  config.pool_size = g_options.pool_size > 0 ? static_cast<size_t>(g_options.pool_size) : 64;
  config.max_cached = g_options.pools;
  config.align8 = g_options.malloc_align == 8;
  if (g_options.valgrind && RUNNING_ON_VALGRIND) {
    g_valgrind = true;
    config.carve_offset = 16;
    // No VALGRIND_MEMPOOL_AUTO_FREE: it would free, with a pool, every block memcheck knows inside the
    // pool's range, the real allocator's own block included, before FreePool hands that block back.
    VALGRIND_CREATE_MEMPOOL_EXT(&g_valgrind_anchor, 0, 1, VALGRIND_MEMPOOL_METAPOOL);
  }
  g_pool_by_malloc = !g_valgrind;
  g_domain = new (g_domain_storage) pool::Domain(config, &g_backend, g_map_root);
  g_pool_size = g_domain->config().pool_size;
  g_max_align = config.align8 ? 8 : 16;
  size_t usable = g_pool_size - g_domain->config().carve_offset;
  g_pool_capacity = usable & ~(g_max_align - 1);
  pthread_key_create(&g_key, OnThreadExit);
  pthread_atfork(ForkPrepare, ForkParent, ForkChild);
  InitProcessInfo(&g_process, g_options);
  // Under valgrind, with valgrind=0 as with valgrind=1, memcheck records the stacks itself, and
  // libunwind's memory probes (a write() of stack memory below the stack pointer) would be reported as
  // the program's errors: the table still counts live blocks, without stacks.
  if (g_options.track) {
    g_tracking = TrackingInit(RUNNING_ON_VALGRIND ? 0 : g_options.stack_depth, ForEachPooledBlock);
    if (!g_tracking) {
      WarnLine(nullptr, "no memory for leak tracking (an address-space limit?): track=1 is off, and the "
                        "report lists no leaks (tracked: false)");
    }
  }
  g_tracked_malloc = g_tracking && !g_valgrind && g_options.tag == TagMode::kSmall;
  if (g_options.tag == TagMode::kCaller) CallerTagInit(g_options.tag_globs);
  if (g_options.help) DescribeOptions(g_options, EmitLine, nullptr);
  // Touch the next allocator once, under the guard, before the program's first call reaches it: a
  // profiler below us (heaptrack) initialises itself on its first call and does not record that one.
  g_real.free(g_real.malloc(1));
}

// Returns false when this call must not be counted (poolscope's own, or before the real allocator is
// known); the caller then passes through or uses the bootstrap buffer.
bool EnsureGlobal(ThreadState& ts) {
  int s = g_init.load(std::memory_order_acquire);
  if (POOLSCOPE_LIKELY(s == 2)) return true;
  if (!ResolveReal()) return false;
  int expected = 0;
  if (g_init.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    InitGlobal(ts);
    g_init.store(2, std::memory_order_release);
    return true;
  }
  if (ts.guard > 0) return false;
  while (g_init.load(std::memory_order_acquire) != 2) sched_yield();
  return true;
}

void InitThread(ThreadState& ts) {
  if (!EnsureGlobal(ts)) return;
  if (ts.phase != kFresh || ts.guard > 0) return;
  Guard guard(ts);
  ts.tc.Init(g_domain);
  ts.tid = GetTid();
  // Zeroed (InternalAlloc's memory is). Without it, SetLimits keeps every shortcut off.
  ts.carves = static_cast<FastCarves*>(InternalAlloc(sizeof(FastCarves)));
  pthread_setspecific(g_key, &ts);
  {
    SpinLockHolder lock(&g_registry_lock);
    ts.next = g_threads;
    ts.prev = nullptr;
    if (g_threads != nullptr) g_threads->prev = &ts;
    g_threads = &ts;
  }
  ts.phase = kActive;
}

enum class Mode { kCounted, kPassthrough, kBootstrap };

// Every slow path starts here.
inline Mode Enter(ThreadState& ts) {
  if (POOLSCOPE_LIKELY(ts.phase == kActive && ts.guard == 0)) return Mode::kCounted;
  if (ts.guard > 0 || InResolve()) return RealResolved() ? Mode::kPassthrough : Mode::kBootstrap;
  if (ts.phase == kFresh) {
    InitThread(ts);
    if (ts.phase != kActive) return RealResolved() ? Mode::kPassthrough : Mode::kBootstrap;
    SetLimits(ts);
    return Mode::kCounted;
  }
  return Mode::kCounted;  // kDead: counted, then folded by Scope
}

// Folds a dead thread's counts after each call.
class Scope {
 public:
  explicit Scope(ThreadState& ts) : ts_(ts) {}
  ~Scope() {
    if (POOLSCOPE_UNLIKELY(ts_.phase == kDead)) FoldDead(ts_);
  }

 private:
  ThreadState& ts_;
};

void* Bootstrap(size_t n, size_t align) {
  void* p = BootstrapAlloc(n, align);
  ++g_bootstrap_allocs;
  g_bootstrap_bytes += n;
  return p;
}

// The miss reason once the pools' own memory could not be had (Domain::exhausted): pooling is off for
// the rest of the process, every request takes the regular path (one the pool would have taken is a
// `disabled` miss; the others keep their reasons, too_large and the like),
// one line on stderr says so, and the calling thread's shortcuts stop sending requests to the pool
// (each thread's, on its first pooled-size request after that).
__attribute__((noinline, cold)) int PoolingExhausted(ThreadState& ts) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true, std::memory_order_relaxed)) {
    WarnLine(nullptr,
             "no memory for the pool map or the pool metadata (an address-space limit?): pooling is off "
             "from here on, and every request passes through");
  }
  SetLimits(ts);
  return pool::kMissDisabled;
}

// -1: pool it; otherwise the miss reason.
// `align`: what the caller needs beyond malloc's own guarantee (0 for the malloc family).
inline int Decide(const ThreadState& ts, size_t n, size_t align, const void* ra) {
  if (!g_pooling || ts.phase != kActive) return pool::kMissDisabled;
  if (n > g_pool_capacity) return pool::kMissTooLarge;
  // Pooled blocks are 16-aligned, or with malloc_align=8 8-aligned below 16 bytes.
  if (align > 16 || (align > 8 && g_max_align == 8 && n < 16)) return pool::kMissAlignment;
  bool tagged = true;
  switch (g_options.tag) {
    case TagMode::kSmall: break;
    case TagMode::kExplicit: tagged = ts.tag_depth > 0; break;
    case TagMode::kCaller: tagged = CallerTagged(ra); break;
  }
  if (!tagged) return pool::kMissUntagged;
  // Once pooling has given up, a request it would have taken is a `disabled` miss; the others keep
  // their reasons.
  return POOLSCOPE_UNLIKELY(g_domain->exhausted()) ? pool::kMissDisabled : -1;
}

// Tries the pool for a logical allocation; counts the hit or the miss.
inline void* TryPool(ThreadState& ts, Api api, size_t n, size_t align, const void* ra,
                     const track::StartFrame* from = nullptr) {
  int reason = Decide(ts, n, align, ra);
  if (reason < 0) {
    void* p = ts.tc.Carve(n == 0 ? 1 : n);
    if (p != nullptr) {
      if (POOLSCOPE_UNLIKELY(g_tracking)) {
        std::atomic<uint8_t>* slot = ts.tc.InfoSlot(p);  // before the capture (see InfoSlot)
        pool::StoreBlockInfo(slot, static_cast<uint32_t>(n), OnPooledAlloc(n, 0, from));
      }
      if (POOLSCOPE_UNLIKELY(g_valgrind)) {
        ts.tc.ForgetLast();  // frees must come through FreePooled, which tells memcheck
        ValgrindDescribeAlloc(p, n == 0 ? 1 : n);
        WipeStackBelow();
      }
      if (n != 0) {
        CountPooled(ts, api, n);
      } else {
        ++ts.c.logical.ncalls[api];
        ++ts.c.logical.nallocs;
        ++ts.c.sizes[SizeBucket(0)];
      }
      return p;
    }
    reason = pool::kMissPoolFull;  // (or the carve found pooling exhausted: below)
  }
  if (POOLSCOPE_UNLIKELY(reason == pool::kMissDisabled || reason == pool::kMissPoolFull) && g_pooling &&
      g_domain->exhausted()) {
    reason = PoolingExhausted(ts);
  }
  ++ts.tc.stats().misses[reason];
  return nullptr;
}

inline void CountAlloc(Ledger& l, Api api, size_t n, bool ok) {
  ++l.ncalls[api];
  if (ok) {
    ++l.nallocs;
    l.nbytes += n;
  }
}

// A logical allocation that took the regular path: one event in both ledgers, same entry point.
inline void CountRegular(ThreadState& ts, Api api, size_t n, bool ok) {
  CountAlloc(ts.c.regular, api, n, ok);
  ++ts.c.sizes[SizeBucket(n)];
}

// The same, and recorded in the live-block table (track=1).
inline void* RegularAllocated(ThreadState& ts, Api api, size_t n, void* p,
                              const track::StartFrame* from = nullptr) {
  CountRegular(ts, api, n, p != nullptr);
  if (POOLSCOPE_UNLIKELY(g_tracking) && p != nullptr) OnAlloc(p, n, 0, from);
  return p;
}

// The program's frame that called an entry point, for a capture that starts there (CaptureStackFrom),
// seen from a slow path that the entry point reached by tail calls only: then its return address slot,
// at its CFA - 8, holds `ra` (the entry point's __builtin_return_address), its CFA is rsp after the
// program's call returns, and the rbp it saved is the program's (callee-saved registers are restored
// before a tail call). Anything else (a build that made calls of those jumps) gives nullptr, and the
// capture walks up from itself instead. `cfa` and `fp`: __builtin_dwarf_cfa() and
// __builtin_frame_address(0) of that slow path (the latter makes it keep a frame pointer).
// The reads are of the function's own frame.
#define POOLSCOPE_PROGRAM_FRAME(frame, ra) \
  (g_tracking ? ProgramFrame(&(frame), (ra), __builtin_dwarf_cfa(), __builtin_frame_address(0)) : nullptr)
inline const track::StartFrame* ProgramFrame(track::StartFrame* f, const void* ra, void* cfa, void* fp) {
  const uintptr_t c = reinterpret_cast<uintptr_t>(cfa);
  if (*reinterpret_cast<const uintptr_t*>(c - 8) != reinterpret_cast<uintptr_t>(ra)) return nullptr;
  f->ra = reinterpret_cast<uintptr_t>(ra);
  f->sp = c;
  f->bp = *static_cast<const uintptr_t*>(fp);
  return f;
}

inline void TrackFree(void* p) {
  if (POOLSCOPE_UNLIKELY(g_tracking) && p != nullptr) OnFree(p);
}

inline void CountFree(Ledger& l, Api api, bool freed) {
  ++l.ncalls[api];
  if (freed) ++l.nfrees;
}

// A pooled block released by free/delete (h from the pool map).
void FreePooled(ThreadState& ts, Api api, void* p, pool::PoolHeader* h) {
  if (POOLSCOPE_UNLIKELY(g_valgrind)) ValgrindDescribeFree(h, p);
  pool::Domain::FreeResult r = ts.tc.Free(h, p);
  CountFree(ts.c.logical, api, r == pool::Domain::FreeResult::kFreed);
  if (r != pool::Domain::FreeResult::kFreed) RecordBadFree(p, r == pool::Domain::FreeResult::kDouble);
}

void RealDelete(Api api, void* p, size_t size, size_t align, bool nothrow) {
  const RealFns& r = g_real;
  std::align_val_t al = static_cast<std::align_val_t>(align);
  std::nothrow_t nt;
  if (api == kFree) return r.free(p);
  bool array = api == kDeleteArray;
  auto plain = array ? r.op_delete_array : r.op_delete;
  if (align != 0) {
    auto sized_al = array ? r.op_delete_array_sized_aligned : r.op_delete_sized_aligned;
    auto nt_al = array ? r.op_delete_array_aligned_nothrow : r.op_delete_aligned_nothrow;
    auto just_al = array ? r.op_delete_array_aligned : r.op_delete_aligned;
    if (size != 0 && sized_al != nullptr) return sized_al(p, size, al);
    if (nothrow && nt_al != nullptr) return nt_al(p, al, nt);
    if (just_al != nullptr) return just_al(p, al);
  } else {
    auto sized = array ? r.op_delete_array_sized : r.op_delete_sized;
    auto nt_plain = array ? r.op_delete_array_nothrow : r.op_delete_nothrow;
    if (size != 0 && sized != nullptr) return sized(p, size);
    if (nothrow && nt_plain != nullptr) return nt_plain(p, nt);
  }
  if (plain != nullptr) return plain(p);
  r.free(p);
}

}  // namespace

pool::PoolMap g_pool_map(g_map_root, &g_backend);

// ---- malloc family ------------------------------------------------------------------------------------

void* AllocSlow(Api api, size_t n, void* ra) {
  ThreadState& ts = t_state;
  switch (Enter(ts)) {
    case Mode::kBootstrap: return Bootstrap(n, 16);
    case Mode::kPassthrough:
      g_passthrough_allocs.fetch_add(1, std::memory_order_relaxed);
      return g_real.malloc(n);
    case Mode::kCounted: break;
  }
  Scope scope(ts);
  track::StartFrame frame;
  const track::StartFrame* from = POOLSCOPE_PROGRAM_FRAME(frame, ra);
  if (void* p = TryPool(ts, api, n, 0, ra, from)) return p;
  void* p;
  {
    // The next allocator may allocate for itself while it serves us (heaptrack records the call):
    // those calls pass straight through, neither counted nor pooled.
    Guard guard(ts);
    p = g_real.malloc(n);
  }
  return RegularAllocated(ts, api, n, p, from);
}

// malloc with track=1 (and tag=small, no valgrind), for an initialised thread outside poolscope: what
// AllocSlow does for it, without the checks that cannot apply (entry modes, the tag, alignment) and
// with its stack captured from the program's frame. Anything else goes to AllocSlow.
__attribute__((noinline)) void* MallocTracked(size_t n, void* ra) {
  ThreadState& ts = t_state;
  if (POOLSCOPE_UNLIKELY(ts.phase != kActive || ts.guard != 0 || n == 0)) return AllocSlow(kMalloc, n, ra);
  track::StartFrame frame;
  const track::StartFrame* from = POOLSCOPE_PROGRAM_FRAME(frame, ra);
  void* p;
  if (g_pooling && n <= g_pool_capacity) {
    p = ts.tc.Carve(n);
    if (POOLSCOPE_UNLIKELY(p == nullptr)) return AllocSlow(kMalloc, n, ra);
    std::atomic<uint8_t>* slot = ts.tc.InfoSlot(p);  // before the capture (see InfoSlot)
    pool::StoreBlockInfo(slot, static_cast<uint32_t>(n), OnPooledAlloc(n, 0, from));
    CountPooled(ts, kMalloc, n);
    return p;
  }
  ++ts.tc.stats().misses[g_pooling ? pool::kMissTooLarge : pool::kMissDisabled];
  {
    Guard guard(ts);
    p = g_real.malloc(n);
  }
  return RegularAllocated(ts, kMalloc, n, p, from);
}

// A malloc that the inline path declined although it is within pool_limit, outside poolscope (above
// kFastSizes, or malloc_align=8, or the current pool has no room): pooled here with Carve, which takes
// a fresh pool when it must; else (no pool to be had) the slow path.
__attribute__((noinline)) void* MallocPooled(size_t n, void* ra) {
  ThreadState& ts = t_state;
  // The thread is active and outside poolscope, and Decide would pool this (see pool_limit).
  if (void* p = ts.tc.CarveUncounted(n)) {
    if (n <= kFastSizes) {
      ++ts.carves->n[kFastMalloc][n];  // as TryPooled counts: with malloc_align=8, most requests
    } else {
      CountPooled(ts, kMalloc, n);
      ++ts.tc.stats().hits;
    }
    return p;
  }
  return AllocSlow(kMalloc, n, ra);
}

// malloc when the pooled fast path declined, either because the request is outside the pool limit
// (then the regular path runs inline when nothing else can apply) or because it is pooled but not by
// the inline path (MallocPooled). (With g_tracked_malloc the exported malloc goes to MallocTracked
// instead; tracking without it ends in AllocSlow here.)
void* MallocRegular(size_t n, void* ra) {
  ThreadState& ts = t_state;
  if (n - 1 < ts.pool_limit && ts.guard == 0) return MallocPooled(n, ra);
  int miss = ts.regular_miss;
  if (POOLSCOPE_LIKELY(miss > 0 && n != 0)) {  // (and n is above pool_limit, or inside poolscope)
    ++ts.tc.stats().misses[miss - 1];
    void* p;
    {
      Guard guard(ts);
      p = g_real.malloc(n);
    }
    CountRegular(ts, kMalloc, n, p != nullptr);
    return p;
  }
  return AllocSlow(kMalloc, n, ra);
}

// FreeNotLast with track=1 (pool_limit and regular_miss are 0 then, so nothing here takes the inline
// or regular shortcuts): a block of the thread's own pool is freed here (what FreePooled does, without
// its layers; pooled blocks are not in the live table, so there is nothing to record), and for a real
// block the live table's lines start loading before anything else.
__attribute__((noinline)) void FreeTracked(Api api, void* p) {
  pool::PoolHeader* h = g_pool_map.Find(p);
  if (h == nullptr) PrefetchFree(p);
  ThreadState& ts = t_state;
  // Counted in nfast: the call, the logical free and the pooled free (and in nfast_reset, the reset).
  if (h != nullptr && !g_valgrind && ts.tc.FreeOwnTracked(h, p, &ts.c.nfast[api], &ts.c.nfast_reset[api])) {
    return;
  }
  FreeSlow(api, p, h);
}

// A free that is not of the block this thread carved last: a live block of its current pool, freed
// with the owner's fast path, or anything else, through FreeSlow.
void FreeNotLast(Api api, void* p) {
  pool::PoolHeader* h = g_pool_map.Find(p);
  ThreadState& ts = t_state;
  if (POOLSCOPE_LIKELY(h != nullptr && !g_valgrind && ts.tc.FreeOwn(h, p))) {
    ++ts.c.nfast[api];  // the call, the logical free and the pooled free
    return;
  }
  if (POOLSCOPE_LIKELY(h == nullptr && api == kFree && ts.regular_miss > 0 && !IsBootstrap(p))) {
    CountFree(ts.c.regular, kFree, p != nullptr);
    Guard guard(ts);
    return g_real.free(p);
  }
  FreeSlow(api, p, h);
}

void FreeSlow(Api api, void* p, pool::PoolHeader* h) {
  ThreadState& ts = t_state;
  if (IsBootstrap(p)) return;
  Mode mode = Enter(ts);
  if (mode != Mode::kCounted && h == nullptr) {
    if (p == nullptr) return;
    g_passthrough_frees.fetch_add(1, std::memory_order_relaxed);
    if (RealResolved()) RealDelete(api, p, 0, 0, false);
    return;
  }
  Scope scope(ts);
  if (h != nullptr) return FreePooled(ts, api, p, h);
  CountFree(ts.c.regular, api, p != nullptr);
  TrackFree(p);
  Guard guard(ts);
  if (api == kFree) return g_real.free(p);
  RealDelete(api, p, 0, 0, false);
}

namespace {
void* CallocSlow(size_t n, size_t m, void* ra);
}  // namespace

void* Calloc(size_t n, size_t m, void* ra) {
  ThreadState& ts = t_state;
  size_t total;
  bool overflow = __builtin_mul_overflow(n, m, &total);
  if (POOLSCOPE_LIKELY(!overflow && total - 1 < ts.pool_limit && ts.guard == 0)) {
    void* p = ts.tc.Carve(total);  // pool memory is always zero
    if (POOLSCOPE_LIKELY(p != nullptr)) {
      CountPooled(ts, kCalloc, total);
      return p;
    }
  }
  return CallocSlow(n, m, ra);
}

namespace {
// Calloc when the pooled fast path declined (a function of its own, so that the fast path keeps no
// frame pointer).
__attribute__((noinline)) void* CallocSlow(size_t n, size_t m, void* ra) {
  ThreadState& ts = t_state;
  size_t total;
  bool overflow = __builtin_mul_overflow(n, m, &total);
  switch (Enter(ts)) {
    case Mode::kBootstrap: return overflow ? nullptr : Bootstrap(total, 16);  // static: zero
    case Mode::kPassthrough:
      g_passthrough_allocs.fetch_add(1, std::memory_order_relaxed);
      return g_real.calloc(n, m);
    case Mode::kCounted: break;
  }
  Scope scope(ts);
  track::StartFrame frame;
  const track::StartFrame* from = POOLSCOPE_PROGRAM_FRAME(frame, ra);
  if (!overflow) {
    if (void* p = TryPool(ts, kCalloc, total, 0, ra, from)) return p;
  }
  void* p;
  {
    Guard guard(ts);
    p = g_real.calloc(n, m);
  }
  return RegularAllocated(ts, kCalloc, overflow ? ~size_t{0} : total, p, from);
}
}  // namespace

void* Realloc(Api api, void* p, size_t n, size_t m, void* ra) {
  ThreadState& ts = t_state;
  size_t total = n;
  bool overflow = api == kReallocarray && __builtin_mul_overflow(n, m, &total);
  Mode mode = Enter(ts);
  pool::PoolHeader* h = p != nullptr ? g_pool_map.Find(p) : nullptr;
  if (mode == Mode::kBootstrap || (IsBootstrap(p) && mode == Mode::kPassthrough)) {
    if (overflow) return nullptr;
    void* q = mode == Mode::kBootstrap ? Bootstrap(total, 16) : g_real.malloc(total);
    if (q != nullptr && p != nullptr) {
      size_t old = BootstrapSize(p);
      memcpy(q, p, old < total ? old : total);
    }
    return q;
  }
  if (mode == Mode::kPassthrough && h == nullptr) {
    g_passthrough_allocs.fetch_add(1, std::memory_order_relaxed);
    return api == kRealloc ? g_real.realloc(p, n) : g_real.reallocarray(p, n, m);
  }
  Scope scope(ts);
  track::StartFrame frame;
  const track::StartFrame* from = POOLSCOPE_PROGRAM_FRAME(frame, ra);
  // glibc's reallocarray calls realloc through the PLT: what it calls in turn passes through uncounted.
  auto real_call = [&]() {
    Guard guard(ts);
    return api == kRealloc ? g_real.realloc(p, n) : g_real.reallocarray(p, n, m);
  };
  if (p == nullptr || IsBootstrap(p)) {
    // realloc(NULL, n) is an allocation.
    if (!overflow && p == nullptr) {
      if (void* q = TryPool(ts, api, total, 0, ra, from)) return q;
    }
    void* q;
    if (p == nullptr) {
      q = real_call();
    } else {
      q = overflow ? nullptr : g_real.malloc(total);
      if (q != nullptr) memcpy(q, p, BootstrapSize(p) < total ? BootstrapSize(p) : total);
    }
    return RegularAllocated(ts, api, total, q, from);
  }
  if (h == nullptr) {
    // A real block: the next allocator resizes it.
    ++ts.c.regular.ncalls[api];
    void* q = real_call();
    if (q != nullptr) {
      ++ts.c.regular.nreallocs;
      if (POOLSCOPE_UNLIKELY(g_tracking)) {
        OnFree(p);
        OnAlloc(q, total, 0, from);
      }
    } else if (total == 0 && !overflow) {
      ++ts.c.regular.nfrees;  // glibc: realloc(p, 0) frees p
      TrackFree(p);
    }
    return q;
  }
  ++ts.c.logical.ncalls[api];
  // A pooled block.
  if (overflow) {
    errno = ENOMEM;
    return nullptr;
  }
  if (total == 0) {
    FreePooled(ts, api, p, h);
    --ts.c.logical.ncalls[api];  // FreePooled counted the call again: it was counted above
    return nullptr;
  }
  size_t old = g_domain->UsableSize(h, p);
  if (old == 0) {
    // Not a live block of ours: reported like a bad free, and nothing changes.
    ++ts.tc.stats().invalid_frees;
    RecordBadFree(p, false);
    errno = EINVAL;
    return nullptr;
  }
  if (total <= old) {
    ++ts.c.logical.nreallocs;
    if (POOLSCOPE_UNLIKELY(g_tracking)) {
      pool::Domain::NoteBlock(h, p, static_cast<uint32_t>(total), OnPooledAlloc(total, 0, from));
    }
    return p;
  }
  void* q = nullptr;
  if (Decide(ts, total, 0, ra) < 0) {
    q = ts.tc.Carve(total);
    if (q != nullptr) {
      --ts.tc.stats().hits;  // a move, not a logical allocation
      if (POOLSCOPE_UNLIKELY(g_tracking)) {
        std::atomic<uint8_t>* slot = ts.tc.InfoSlot(q);  // before the capture (see InfoSlot)
        pool::StoreBlockInfo(slot, static_cast<uint32_t>(total), OnPooledAlloc(total, 0, from));
      }
      if (POOLSCOPE_UNLIKELY(g_valgrind)) {
        ts.tc.ForgetLast();
        ValgrindDescribeAlloc(q, total);
        WipeStackBelow();
      }
    }
  }
  bool spill = q == nullptr;
  if (spill) {
    q = g_real.malloc(total);
    ++ts.c.real.ncalls[kMalloc];
    if (q == nullptr) return nullptr;
    ++ts.c.real.nallocs;
    ts.c.real.nbytes += total;
    ++ts.tc.stats().spills;
  }
  memcpy(q, p, old);
  if (POOLSCOPE_UNLIKELY(g_valgrind)) ValgrindDescribeFree(h, p);
  ts.tc.Free(h, p);
  if (!spill) --ts.tc.stats().pooled_frees;  // the block moved within the pools
  ++ts.c.logical.nreallocs;
  if (POOLSCOPE_UNLIKELY(g_tracking) && spill) OnAlloc(q, total, 0, from);
  return q;
}

int PosixMemalign(void** out, size_t align, size_t n, void* ra) {
  ThreadState& ts = t_state;
  bool valid = align >= sizeof(void*) && (align & (align - 1)) == 0;
  switch (Enter(ts)) {
    case Mode::kBootstrap:
      if (!valid) return EINVAL;
      *out = Bootstrap(n, align);
      return *out != nullptr ? 0 : ENOMEM;
    case Mode::kPassthrough:
      g_passthrough_allocs.fetch_add(1, std::memory_order_relaxed);
      return g_real.posix_memalign(out, align, n);
    case Mode::kCounted: break;
  }
  Scope scope(ts);
  if (valid) {
    if (void* p = TryPool(ts, kPosixMemalign, n, align, ra)) {
      *out = p;
      return 0;
    }
  }
  int rc;
  {
    Guard guard(ts);
    rc = g_real.posix_memalign(out, align, n);
  }
  RegularAllocated(ts, kPosixMemalign, n, rc == 0 ? *out : nullptr);
  return rc;
}

void* AlignedEntry(Api api, size_t align, size_t n, void* ra) {
  ThreadState& ts = t_state;
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto real_call = [&]() -> void* {
    switch (api) {
      case kAlignedAlloc: return g_real.aligned_alloc(align, n);
      case kMemalign: return g_real.memalign(align, n);
      case kValloc: return g_real.valloc(n);
      default: return g_real.pvalloc(n);
    }
  };
  if (api == kValloc || api == kPvalloc) align = page;
  switch (Enter(ts)) {
    case Mode::kBootstrap: return Bootstrap(api == kPvalloc ? (n + page - 1) & ~(page - 1) : n, align);
    case Mode::kPassthrough:
      g_passthrough_allocs.fetch_add(1, std::memory_order_relaxed);
      return real_call();
    case Mode::kCounted: break;
  }
  Scope scope(ts);
  if (align != 0 && (align & (align - 1)) == 0) {
    if (void* p = TryPool(ts, api, n, align, ra)) return p;
  } else {
    ++ts.tc.stats().misses[pool::kMissAlignment];
  }
  void* p;
  {
    Guard guard(ts);  // valloc and pvalloc may call memalign through the PLT
    p = real_call();
  }
  return RegularAllocated(ts, api, n, p);
}

size_t UsableSize(void* p) {
  if (p == nullptr) return 0;
  if (IsBootstrap(p)) return BootstrapSize(p);
  if (pool::PoolHeader* h = g_pool_map.Find(p)) return g_domain->UsableSize(h, p);
  if (!RealResolved() && !ResolveReal()) return 0;
  return g_real.malloc_usable_size != nullptr ? g_real.malloc_usable_size(p) : 0;
}

// ---- C++ operators ------------------------------------------------------------------------------------

void* NewSlow(Api api, size_t n, void* ra) { return NewForm(api, n, 0, false, ra); }

void* NewForm(Api api, size_t n, size_t align, bool nothrow, void* ra) {
  ThreadState& ts = t_state;
  bool array = api == kNewArray;
  std::align_val_t al = static_cast<std::align_val_t>(align);
  const std::nothrow_t& nt = std::nothrow;
  auto real_call = [&]() -> void* {
    const RealFns& r = g_real;
    if (align == 0) {
      if (nothrow) {
        auto f = array ? r.op_new_array_nothrow : r.op_new_nothrow;
        return f != nullptr ? f(n, nt) : r.malloc(n);
      }
      auto f = array ? r.op_new_array : r.op_new;
      if (f != nullptr) return f(n);
    } else {
      if (nothrow) {
        auto f = array ? r.op_new_array_aligned_nothrow : r.op_new_aligned_nothrow;
        if (f != nullptr) return f(n, al, nt);
        void* p = nullptr;
        return r.posix_memalign(&p, align < sizeof(void*) ? sizeof(void*) : align, n) == 0 ? p : nullptr;
      }
      auto f = array ? r.op_new_array_aligned : r.op_new_aligned;
      if (f != nullptr) return f(n, al);
    }
    // No C++ runtime below us: behave like it.
    void* p = nullptr;
    if (align == 0) {
      p = r.malloc(n);
    } else if (r.posix_memalign(&p, align < sizeof(void*) ? sizeof(void*) : align, n) != 0) {
      p = nullptr;
    }
    if (p == nullptr) throw std::bad_alloc();
    return p;
  };
  switch (Enter(ts)) {
    case Mode::kBootstrap: {
      void* p = Bootstrap(n, align == 0 ? 16 : align);
      if (p == nullptr && !nothrow) throw std::bad_alloc();
      return p;
    }
    case Mode::kPassthrough:
      g_passthrough_allocs.fetch_add(1, std::memory_order_relaxed);
      return real_call();
    case Mode::kCounted: break;
  }
  Scope scope(ts);
  track::StartFrame frame;
  const track::StartFrame* from = POOLSCOPE_PROGRAM_FRAME(frame, ra);
  if (void* p = TryPool(ts, api, n, align, ra, from)) return p;
  // Counted before the call: operator new may throw.
  ++ts.c.regular.ncalls[api];
  ++ts.c.sizes[SizeBucket(n)];
  void* p;
  {
    Guard guard(ts);  // libstdc++'s operator new calls malloc: passed through, uncounted
    p = real_call();
  }
  if (p != nullptr) {
    ++ts.c.regular.nallocs;
    ts.c.regular.nbytes += n;
    if (POOLSCOPE_UNLIKELY(g_tracking)) OnAlloc(p, n, 0, from);
  }
  return p;
}

void DeleteForm(Api api, void* p, size_t size, size_t align, bool nothrow) {
  pool::PoolHeader* h = g_pool_map.Find(p);
  ThreadState& ts = t_state;
  if (IsBootstrap(p)) return;
  Mode mode = Enter(ts);
  if (mode != Mode::kCounted && h == nullptr) {
    if (p == nullptr) return;
    g_passthrough_frees.fetch_add(1, std::memory_order_relaxed);
    if (RealResolved()) RealDelete(api, p, size, align, nothrow);
    return;
  }
  Scope scope(ts);
  if (h != nullptr) return FreePooled(ts, api, p, h);
  CountFree(ts.c.regular, api, p != nullptr);
  TrackFree(p);
  Guard guard(ts);
  RealDelete(api, p, size, align, nothrow);
}

// ---- the C API ----------------------------------------------------------------------------------------

__attribute__((noinline)) void* ArenaOpenSlow() {
  ThreadState& ts = t_state;
  if (Enter(ts) != Mode::kCounted) return nullptr;
  pool::Arena* a = ts.tc.NewArena();
  if (a == nullptr) {
    errno = ENOMEM;
  } else if (POOLSCOPE_UNLIKELY(g_tracking)) {
    a->track = OnArenaOpen();
  }
  return a;
}

__attribute__((noinline)) void* ArenaAllocSlow(void* arena, size_t size, size_t align) {
  ThreadState& ts = t_state;
  auto* a = static_cast<pool::Arena*>(arena);
  if (a == nullptr || Enter(ts) != Mode::kCounted) {
    errno = EINVAL;
    return nullptr;
  }
  if (align == 0) align = 16;
  if ((align & (align - 1)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  Scope scope(ts);
  ++ts.c.logical.ncalls[kArenaAlloc];
  ++ts.c.sizes[SizeBucket(size)];
  int reason = pool::kMissDisabled;
  void* p = g_pooling ? ts.tc.ArenaCarve(a, size, align, &reason) : nullptr;
  if (p != nullptr) {
    ++ts.c.logical.nallocs;
    ts.c.logical.nbytes += size;
    if (a->track != nullptr) OnArenaAlloc(static_cast<ArenaTrack*>(a->track), size, kBlockPooled, 0);
    return p;
  }
  ++ts.tc.stats().misses[reason];
  // The regular path: a real, zeroed block, freed when the arena closes.
  auto* node = static_cast<pool::RegularBlock*>(InternalAlloc(sizeof(pool::RegularBlock)));
  if (node == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  if (align <= 16) {
    p = g_real.calloc(1, size == 0 ? 1 : size);
    CountAlloc(ts.c.real, kCalloc, size, p != nullptr);
  } else {
    int rc = g_real.posix_memalign(&p, align, size == 0 ? 1 : size);
    if (rc != 0) p = nullptr;
    if (p != nullptr) memset(p, 0, size);
    CountAlloc(ts.c.real, kPosixMemalign, size, p != nullptr);
  }
  if (p == nullptr) {
    InternalFree(node, sizeof *node);
    errno = ENOMEM;
    return nullptr;
  }
  node->p = p;
  node->next = a->regular;
  a->regular = node;
  ++a->regular_blocks;
  ++ts.c.logical.nallocs;
  ts.c.logical.nbytes += size;
  if (a->track != nullptr) OnArenaAlloc(static_cast<ArenaTrack*>(a->track), size, kBlockReal, 0);
  return p;
}

__attribute__((noinline)) void ArenaCloseSlow(void* arena) {
  ThreadState& ts = t_state;
  auto* a = static_cast<pool::Arena*>(arena);
  if (Enter(ts) != Mode::kCounted) return;
  Scope scope(ts);
  ++ts.c.logical.ncalls[kArenaClose];
  if (a == nullptr) return;
  ts.c.logical.nfrees += a->pooled_blocks + a->regular_blocks;
  for (pool::RegularBlock* b = a->regular; b != nullptr;) {
    pool::RegularBlock* next = b->next;
    CountFree(ts.c.real, kFree, true);
    g_real.free(b->p);
    InternalFree(b, sizeof *b);
    b = next;
  }
  if (a->track != nullptr) OnArenaClose(static_cast<ArenaTrack*>(a->track));
  a->track = nullptr;
  ts.tc.ArenaClosePool(a);
  ts.tc.DeleteArena(a);
}

void TagPush() {
  ThreadState& ts = t_state;
  if (Enter(ts) != Mode::kCounted) return;
  ++ts.tag_depth;
  SetLimits(ts);
}

void TagPop() {
  ThreadState& ts = t_state;
  if (Enter(ts) != Mode::kCounted) return;
  if (ts.tag_depth > 0) --ts.tag_depth;
  SetLimits(ts);
}

int Active() {
  ThreadState& ts = t_state;
  Enter(ts);
  return g_pooling ? 1 : 0;
}

// ---- process life cycle and snapshots -----------------------------------------------------------------

namespace {
void OnQuickExit() { OnExitCall(); }

// The object `fn` lies in, and whether it defines `fn` there (a symbol of a section, not an undefined one).
bool DefinedIn(void* fn, Dl_info* info, struct link_map** map) {
  void* sym_entry = nullptr;  // a const ElfW(Sym)*
  if (fn == nullptr || dladdr1(fn, info, &sym_entry, RTLD_DL_SYMENT) == 0) return false;
  if (dladdr1(fn, info, reinterpret_cast<void**>(map), RTLD_DL_LINKMAP) == 0 || *map == nullptr) return false;
  const auto* sym = static_cast<const ElfW(Sym)*>(sym_entry);
  return sym != nullptr && sym->st_shndx != SHN_UNDEF;
}

// The object the program's calls to `name` bind to: the first object in the global search order that
// defines it. That is dlsym(RTLD_DEFAULT)'s answer, except for a non-PIE executable that takes the
// function's address (python3 does): it exports a "canonical PLT" entry, an undefined symbol with the
// address of its PLT slot. dlsym returns that; calls skip it and bind to the next definition, which is
// looked up here object by object, in load order.
bool CallsBindTo(const char* name, Dl_info* info) {
  struct link_map* map = nullptr;
  void* fn = dlsym(RTLD_DEFAULT, name);
  if (DefinedIn(fn, info, &map)) return true;
  if (map == nullptr) return false;
  for (struct link_map* lm = map->l_next; lm != nullptr; lm = lm->l_next) {
    if (lm->l_name == nullptr || lm->l_name[0] == '\0') continue;
    void* handle = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    struct link_map* owner = nullptr;
    bool here = DefinedIn(dlsym(handle, name), info, &owner) && owner == lm;
    dlclose(handle);
    if (here) return true;
  }
  return false;
}

// Whether the process's malloc and free are this library's. A program that defines its own (or an
// allocator preloaded ahead of this library) comes first in symbol lookup: poolscope then sees none
// of the program's allocations, and its report would say nothing without saying why. One warning line
// names the object whose function wins.
void WarnIfShadowed() {
  Dl_info ours, theirs;
  if (dladdr(reinterpret_cast<void*>(&OnLoad), &ours) == 0) return;
  for (const char* name : {"malloc", "free"}) {
    if (!CallsBindTo(name, &theirs) || theirs.dli_fbase == ours.dli_fbase) continue;
    char line[600];
    snprintf(line, sizeof line,
             "%s() comes from %s, not from poolscope: the program's allocations are not seen, and the report "
             "counts none of them",
             name, theirs.dli_fname != nullptr && theirs.dli_fname[0] != '\0' ? theirs.dli_fname : "the program");
    WarnLine(nullptr, line);
    return;
  }
}
}  // namespace

void OnLoad() {
  ThreadState& ts = t_state;
  Enter(ts);
  if (ts.phase == kActive) {
    SetLimits(ts);
    // leak_exitcode: the blocks library initialisers made before this constructor ran (poolscope's
    // own dependencies among them) are not the program's leaks.
    if (g_options.leak_exitcode > 0) {
      Guard guard(ts);
      SnapshotNow snap;
      if (snap.get() != nullptr) TakeLeakBaseline(LogicalLive(*snap.get()));
    }
    StartSnapshots(g_options);
    // quick_exit() runs the at_quick_exit handlers, then glibc's internal _exit (which the interposed
    // _exit never sees): the report is written by a handler of our own. Registered before the
    // program's, it runs after them.
    Guard guard(ts);
    at_quick_exit(OnQuickExit);
    // SIGTERM, SIGINT and SIGHUP with their default action write the exit report first (signals.h).
    if (strcmp(g_options.report, "none") != 0) InstallSignalReport(OnExitCall);
    WarnIfShadowed();
  }
}

// The exit-time report is written on a stack of its own when the process ends from a thread other
// than the main one: writing it (the snapshot, symbolizing, the JSON) on the stack of a thread that
// called exit() needs a 24 KiB thread (16 and 20 KiB are too small), and programs make threads as
// small as PTHREAD_STACK_MIN (16 KiB, their TLS included). The stack is mapped for the call (only the
// pages used are touched), with its lowest page left inaccessible, and unmapped afterwards. The main
// thread's stack is the process's (RLIMIT_STACK) and is used as it is (exit() from a coroutine of
// 8 KiB on it works).
namespace {
constexpr size_t kExitStackBytes = size_t{1} << 20;

// The exiting thread's stack pointer where poolscope's exit work began: the reachability scan reads
// that thread's stack from there up.
uintptr_t g_exit_sp = 0;

void ForEachPoolForScan(void (*fn)(uintptr_t real, size_t real_bytes, uintptr_t base, size_t pool_bytes,
                                   bool explicit_arena, void* arg),
                        void* arg) {
  if (g_domain == nullptr) return;
  const size_t bytes = g_domain->pool_bytes();
  g_domain->ForEachPool([&](char* base, bool explicit_arena) {
    uintptr_t real = reinterpret_cast<uintptr_t>(base);
    if (g_pool_by_malloc) memcpy(&real, base + bytes, sizeof real);
    fn(real, g_pool_by_malloc ? bytes + kPoolSlack : bytes, reinterpret_cast<uintptr_t>(base), bytes,
       explicit_arena, arg);
  });
}

// reachability=1: classifies the live blocks before the exit report is written (once).
void ScanBeforeExitReport() {
  const Options& o = g_options;
  if (!g_tracking || !o.reachability || (o.leak_exitcode <= 0 && strcmp(o.report, "none") == 0)) return;
  ScanThread* threads = nullptr;
  int n = 0;
  {
    SpinLockHolder lock(&g_registry_lock);
    for (ThreadState* ts = g_threads; ts != nullptr; ts = ts->next) ++n;
    threads = static_cast<ScanThread*>(InternalAlloc(sizeof(ScanThread) * (n + 1)));
    if (threads == nullptr) return;
    int i = 0;
    for (ThreadState* ts = g_threads; ts != nullptr && i < n; ts = ts->next) {
      threads[i++] = ScanThread{ts->tid, reinterpret_cast<uintptr_t>(ts)};
    }
  }
  ScanInputs in = {};
  in.threads = threads;
  in.nthreads = n;
  in.exit_sp = g_exit_sp;
  in.self_state = reinterpret_cast<uintptr_t>(&t_state);
  in.for_each_pool = ForEachPoolForScan;
  ScanAtExit(in);
  InternalFree(threads, sizeof(ScanThread) * (n + 1));
}

struct ExitReport {
  bool may_change_status;
  int status;
  ucontext_t caller;
};

// makecontext passes int arguments: the ExitReport's address comes in two halves.
void WriteExitReportOnOwnStack(unsigned hi, unsigned lo) {
  auto* r = reinterpret_cast<ExitReport*>((uintptr_t{hi} << 32) | lo);
  ScanBeforeExitReport();
  r->status = WriteReportAtExit(g_options, r->may_change_status);
  ReleaseScan();
}  // back to r->caller (uc_link)

int WriteExitReport(bool may_change_status) {
  char* stack = nullptr;
  if (GetTid() != getpid()) stack = static_cast<char*>(InternalAlloc(kExitStackBytes));
  ucontext_t context;
  if (stack == nullptr || mprotect(stack, 4096, PROT_NONE) != 0 || getcontext(&context) != 0) {
    InternalFree(stack, kExitStackBytes);
    ScanBeforeExitReport();
    const int status = WriteReportAtExit(g_options, may_change_status);
    ReleaseScan();
    return status;
  }
  ExitReport r;
  r.may_change_status = may_change_status;
  r.status = 0;
  context.uc_stack.ss_sp = stack;
  context.uc_stack.ss_size = kExitStackBytes;
  context.uc_link = &r.caller;
  const uintptr_t a = reinterpret_cast<uintptr_t>(&r);
  makecontext(&context, reinterpret_cast<void (*)()>(WriteExitReportOnOwnStack), 2,
              static_cast<unsigned>(a >> 32), static_cast<unsigned>(a));
  const unsigned id = VALGRIND_STACK_REGISTER(stack, stack + kExitStackBytes);
  if (swapcontext(&r.caller, &context) != 0) {
    ScanBeforeExitReport();
    r.status = WriteReportAtExit(g_options, may_change_status);
    ReleaseScan();
  }
  VALGRIND_STACK_DEREGISTER(id);
  InternalFree(stack, kExitStackBytes);
  return r.status;
}
}  // namespace

// _exit() and _Exit(): the report is written, and the status is the program's own whatever it leaks
// (docs/report-schema.md, `leak_check`): these calls skip the exit-time cleanup on purpose (fork()
// children after their work, dash, 127 after a failed exec), so what is live then was let go, not
// forgotten; LeakSanitizer does not check leaks there either.
void OnExitCall() {
  ThreadState& ts = t_state;
  if (g_init.load(std::memory_order_acquire) != 2) return;
  // A vfork() child shares its parent's memory and ran no fork handler: it must not touch our state.
  if (getpid() != g_process.pid) return;
  Guard guard(ts);
  if (g_exit_sp == 0) g_exit_sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  WriteExitReport(false);
}

void OnUnload() {
  ThreadState& ts = t_state;
  if (g_init.load(std::memory_order_acquire) != 2) return;
  Guard guard(ts);
  if (g_exit_sp == 0) {
    track::StartFrame from;
    g_exit_sp = ProgramFrame(&from, __builtin_return_address(0), __builtin_dwarf_cfa(), __builtin_frame_address(0))
                    ? ExitPathSp(from)
                    : reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  }
  if (g_options.drain_at_exit && ts.phase == kActive) {
    uint64_t before = ts.tc.stats().pools_released;
    ts.tc.Drain();
    g_drained_at_exit = ts.tc.stats().pools_released - before;
  }
  // exit() in a vfork() child (which it must not call) would be judging its parent's blocks.
  int status = WriteExitReport(getpid() == g_process.pid);
  if (status != 0) ExitForLeaks(status);
}

const Options& CurrentOptions() { return g_options; }
const ProcessInfo& CurrentProcess() { return g_process; }

void TakeSnapshot(Snapshot* s) {
  ThreadState& self = t_state;
  SpinLockHolder lock(&g_registry_lock);
  s->totals = g_ended;
  s->pool = g_ended_pool;
  s->records = g_records;
  s->records_omitted = g_records_omitted;
  s->live_threads = 0;
  s->pools_cached = 0;
  for (ThreadState* ts = g_threads; ts != nullptr; ts = ts->next) {
    // Other threads keep counting: settle a copy.
    ThreadCounters c = ts->c;
    pool::PoolStats stats = ts->tc.stats();
    Settle(&c, CarvesOf(*ts), &stats.hits, &stats.pooled_frees, &stats.resets_in_place);
    AddCounters(&s->totals, c);
    pool::AddStats(&s->pool, stats);
    s->pools_cached += static_cast<uint64_t>(ts->tc.cached());
    if (s->live_threads < Snapshot::kMaxLive) {
      LiveThread& lt = s->live[s->live_threads++];
      lt.tid = ts->tid;
      lt.self = ts == &self;
      lt.c = c;
      lt.pool = stats;
      lt.cached = ts->tc.cached();
    }
  }
  s->pooling = g_pooling;
  s->pool_size = g_pool_size;
  s->pools_per_thread = g_domain != nullptr ? g_domain->config().max_cached : g_options.pools;
  s->fork_carryover = g_fork_carryover;
  s->threads_lost_at_fork = g_threads_lost_at_fork;
  s->drained_at_exit = g_drained_at_exit;
  InternalSnapshot(&s->internal);
  s->internal.bootstrap_allocs = g_bootstrap_allocs;
  s->internal.bootstrap_bytes = g_bootstrap_bytes;
  s->internal.passthrough_allocs = g_passthrough_allocs.load(std::memory_order_relaxed);
  s->internal.passthrough_frees = g_passthrough_frees.load(std::memory_order_relaxed);
}

}  // namespace poolscope
