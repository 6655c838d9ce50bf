// File: interpose/threads.cc
//
// The process-wide configuration and its one-time set-up (InitGlobal), each thread's start
// (InitThread), the limits state machine (SetLimits), the registry of live threads and the records
// of ended ones (thread exit), and the fork() handlers.
//
// Lock order: the table of docs/design.md ("Lock order"). ForkPrepare takes g_registry_lock, then
// the timeline's sampler flag, then tracking's locks (TrackingForkPrepare), the internal memory locks and the Domain's metadata lock.
#include "interpose/shim.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "interpose/attach.h"
#include "interpose/caller_tag.h"
#include "interpose/internal.h"
#include "interpose/leak_exit.h"
#include "interpose/real.h"
#include "interpose/shim_internal.h"
#include "interpose/snapshot.h"
#include "interpose/tracking.h"

namespace poolscope {

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
TrackedBytes g_ended_bytes;
TrackedBytes g_stray_bytes;
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
  ts.tc.AllowArenaSlot(ts.arena_limit != 0);  // (ArenaOpen and ArenaClose rely on it)
}

void WarnLine(void*, const char* line) {
  char buf[700];
  snprintf(buf, sizeof buf, "poolscope: warning: %s", line);
  if (!g_options.quiet) RawLine(buf);
}

void EmitLine(void*, const char* line) { RawLine(line); }

namespace {
// A thread's carve table, or an empty one when it has none.
const FastCarves& CarvesOf(const ThreadState& ts) {
  static const FastCarves kNone{};
  return ts.carves != nullptr ? *ts.carves : kNone;
}
}  // namespace

void SettledCopy(const ThreadState& ts, ThreadCounters* c, pool::PoolStats* stats) {
  *c = ts.c;
  *stats = ts.tc.stats();
  Settle(c, CarvesOf(ts), &stats->hits, &stats->pooled_frees, &stats->resets_in_place);
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
  if (ts.carves != nullptr) memset(ts.carves->n, 0, sizeof ts.carves->n);  // (bytes: not settled)
}

void FoldInto(ThreadState& ts, ThreadRecord* record) {
  SettleOwn(ts);
  AddCounters(&g_ended, ts.c);
  if (ts.carves != nullptr) {
    AddTrackedBytes(&g_ended_bytes, ts.carves->bytes);
    ts.carves->bytes = TrackedBytes{};
  }
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
TrackedBytes* StrayBytes() { return &g_stray_bytes; }

TrackedBytes TrackedBytesNow() {
  TrackedBytes sum = g_ended_bytes;
  AddTrackedBytes(&sum, g_stray_bytes);
  for (ThreadState* ts = g_threads; ts != nullptr; ts = ts->next) {
    if (ts->carves != nullptr) AddTrackedBytes(&sum, ts->carves->bytes);
  }
  return sum;
}

void FoldDead(ThreadState& ts) {
  SpinLockHolder lock(&g_registry_lock);
  FoldInto(ts, nullptr);
}

void ForkPrepare() {
  g_registry_lock.Lock();
  TimelineForkPrepare();
  TrackingForkPrepare();
  InternalForkPrepare();
  if (g_domain != nullptr) g_domain->ForkPrepare();
}

void ForkParent() {
  if (g_domain != nullptr) g_domain->ForkParent();
  InternalForkParent();
  TrackingForkParent();
  TimelineForkParent();
  g_registry_lock.Unlock();
}

void ForkChild() {
  if (g_domain != nullptr) g_domain->ForkChild();
  InternalForkChild();
  TrackingForkChild();
  TimelineForkChild();
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
      // Its blocks stay in the live table (their memory is the child's): their bytes stay counted,
      // but for a block it was recording or releasing when fork() stopped it.
      if (ts->carves != nullptr) AddTrackedBytes(&g_ended_bytes, ts->carves->bytes);
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
  NoteStarted();
}

namespace {

// getenv, also before libc has set the environment up: a program built with a sanitizer (liblsan,
// libasan) runs its runtime's initialiser from the executable's preinit_array, ahead of libc's, and
// that initialiser allocates, so poolscope starts while `environ` is still null. The environment is
// then read from /proc/self/environ, into memory kept for good (the options keep pointers into
// their text). nullptr when the variable is not set or cannot be read.
const char* StartupGetenv(const char* name) {
  if (environ != nullptr) return getenv(name);
  const int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  size_t cap = size_t{256} << 10, used = 0;
  char* buf = static_cast<char*>(InternalAlloc(cap));
  while (buf != nullptr) {
    if (used + 1 == cap) {  // room for the final NUL
      char* bigger = cap < (size_t{64} << 20) ? static_cast<char*>(InternalRealloc(buf, cap, 2 * cap)) : nullptr;
      if (bigger == nullptr) {
        InternalFree(buf, cap);
        buf = nullptr;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
    const ssize_t got = read(fd, buf + used, cap - 1 - used);
    if (got <= 0) break;
    used += static_cast<size_t>(got);
  }
  close(fd);
  if (buf == nullptr) return nullptr;
  buf[used] = '\0';
  const size_t len = strlen(name);
  for (size_t at = 0; at < used; at += strlen(buf + at) + 1) {
    if (strncmp(buf + at, name, len) == 0 && buf[at + len] == '=') return buf + at + len + 1;
  }
  InternalFree(buf, cap);
  return nullptr;
}

}  // namespace

void InitGlobal(ThreadState& ts) {
  Guard guard(ts);
  // Loaded by `poolscope attach`: the options it gave, not the process's environment.
  const char* text = AttachOptionsText();
  if (text == nullptr) text = StartupGetenv("POOLSCOPE_OPTIONS");
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
  config.block_info = g_options.track != 0;  // sizes and stacks of pooled blocks, for tracking
  static_assert(kMaxStackIds <= pool::kCompactStackIds, "a stack id fits a compact BlockInfo word");
  if (g_options.valgrind && RUNNING_ON_VALGRIND) {
    g_valgrind = true;
    config.carve_offset = kValgrindPoolHead;
    // No VALGRIND_MEMPOOL_AUTO_FREE: it would free, with a pool, every block memcheck knows inside the
    // pool's range, the real allocator's own block included, before FreePool hands that block back.
    VALGRIND_CREATE_MEMPOOL_EXT(&g_valgrind_anchor, 0, 1, VALGRIND_MEMPOOL_METAPOOL);
  }
  g_pool_by_malloc = !g_valgrind;
  g_domain = new (g_domain_storage) pool::Domain(config, ShimPoolBackend(), g_map_root);
  g_pool_map.SetLayout(g_domain->pool_bytes(), g_domain->meta_bytes());
  g_pool_size = g_domain->config().pool_size;
  g_max_align = config.align8 ? 8 : 16;
  size_t usable = g_pool_size - g_domain->config().carve_offset;
  g_pool_capacity = usable & ~(g_max_align - 1);
  pthread_key_create(&g_key, OnThreadExit);
  pthread_atfork(ForkPrepare, ForkParent, ForkChild);
  InitProcessInfo(&g_process, g_options);
  NoteStarted();
  // Under valgrind, with valgrind=0 as with valgrind=1, memcheck records the stacks itself, and
  // the unwinder's reads of other frames' stack memory could be reported as
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

}  // namespace poolscope
