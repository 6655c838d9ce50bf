// File: interpose/timeline.cc
//
// See timeline.h. The samples live in this file's static arrays (poolscope's own writable segment):
// no allocation, so a sample may be taken inside any malloc.
#include "interpose/timeline.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <sched.h>

#include <atomic>
#include <cstdlib>

#include "interpose/internal.h"
#include "interpose/shim_internal.h"
#include "interpose/timeline_peak.h"
#include "interpose/tracking.h"
#include "track/populate.h"

namespace poolscope {
namespace {

std::atomic<bool> g_on{false};
uint64_t g_start_ns = 0;
// When the next sample is due, for the ticks' quick test (the series decides under g_busy).
std::atomic<uint64_t> g_next_ns{0};
std::atomic<bool> g_busy{false};  // one sampler (or reader) at a time; other samplers skip
POOLSCOPE_LARGE_BSS TimelineSeries g_series;
// How long the last sample's read of the pools took, and when it began (under g_busy; WalkAffordable).
uint64_t g_walk_ns = 0;
uint64_t g_walk_at_ns = 0;

// The pools each site pinned at the peak of real live bytes (timeline_peak.h): on with track=1 and
// pooling (TimelineStart). g_peak is used under g_busy; the checks raise g_peak_high, the highest real
// live bytes seen since the last snapshot, and read g_peak_above, the high past which a fall calls for
// one, and g_peak_jump, the real live bytes past which one is due at once, without it, and count
// themselves under the registry's lock.
bool g_peak_on = false;
PeakPins g_peak;
std::atomic<int64_t> g_peak_above{0};
std::atomic<int64_t> g_peak_jump{0};
std::atomic<int64_t> g_peak_high{0};
int64_t g_peak_seen = -1;  // the highest real live bytes a check saw
uint64_t g_peak_checks = 0;

uint64_t Now() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000ull + static_cast<uint64_t>(t.tv_nsec);
}

// Set once /proc/self/statm could not be opened (a sandbox that refuses it, perhaps through a SIGSYS
// handler of the program's): not asked again.
std::atomic<bool> g_no_statm{false};

// Resident pages from /proc/self/statm's second field, in KiB; -1 when it cannot be read.
int64_t ResidentKib() {
  if (g_no_statm.load(std::memory_order_relaxed)) return -1;
  const int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    g_no_statm.store(true, std::memory_order_relaxed);
    return -1;
  }
  char buf[128];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char* p = buf;
  strtoull(p, &p, 10);  // size
  const unsigned long long pages = strtoull(p, nullptr, 10);
  return static_cast<int64_t>(pages * static_cast<unsigned long long>(sysconf(_SC_PAGESIZE)) / 1024);
}

// The live pooled blocks' bytes, from their pools' marks (the sizes tracking keeps there).
int64_t PooledLiveBytes() {
  uint64_t bytes = 0;
  ForEachPooledBlock([](uintptr_t, uint32_t size, uint32_t, void* arg) { *static_cast<uint64_t*>(arg) += size; },
                     &bytes);
  return static_cast<int64_t>(bytes);
}

// `walk`: whether to read the pooled blocks' sizes (PooledLiveBytes); without, the point's logical live
// bytes are unknown. Sets *walk_ns (when not null) to how long the read took, if it was made.
// `pooled_bytes` >= 0: those bytes instead of a read.
TimelinePoint PointOf(const ThreadCounters& totals, const TrackedBytes& bytes, const pool::PoolStats& pool,
                      uint64_t t_ns, bool walk, uint64_t* walk_ns, int64_t pooled_bytes = -1) {
  const Ledger logical = Logical(totals), real = Real(totals);
  TimelinePoint p;
  p.t_ns = t_ns;
  p.logical_live = static_cast<int64_t>(logical.nallocs - logical.nfrees);
  p.real_live = static_cast<int64_t>(real.nallocs - real.nfrees);
  p.pools = static_cast<int64_t>(pool.pools_created - pool.pools_released);
  p.rss_kib = ResidentKib();
  p.logical_live_bytes = p.real_live_bytes = -1;
  // Without tracking, or with blocks the live table could not record, frees are not all sized.
  if (g_tracking && TrackingUnrecorded() == 0) {
    LiveByteCounts c;
    c.unpooled = bytes.unpooled_bytes;
    c.unpooled_freed = bytes.unpooled_freed_bytes;
    c.arena_pooled = bytes.arena_pooled_bytes;
    c.arena_pooled_freed = bytes.arena_pooled_freed_bytes;
    c.pooled = pooled_bytes;
    if (walk && pooled_bytes < 0) {
      const uint64_t start = walk_ns != nullptr ? Now() : 0;
      c.pooled = PooledLiveBytes();
      if (walk_ns != nullptr) *walk_ns = Now() - start;
    }
    c.pools = p.pools;
    c.pool_bytes = PoolRealBytes();  // as the report counts a pool (report_render.cc)
    SetLiveBytes(&p, c);
  }
  return p;
}

// The real live bytes now, as a point's (SetLiveBytes), from every thread's tracked bytes and pools;
// -1 when the registry's lock is held (by another thread, or by the code a signal handler on this
// thread interrupted) or a live block went unrecorded.
int64_t RealLiveBytesNow() {
  if (TrackingUnrecorded() != 0 || !g_registry_lock.TryLock()) return -1;
  const TrackedBytes bytes = TrackedBytesNow();
  uint64_t pools = g_ended_pool.pools_created - g_ended_pool.pools_released;
  for (ThreadState* t = g_threads; t != nullptr; t = t->next) {
    const pool::PoolStats& stats = t->tc.stats();
    pools += stats.pools_created - stats.pools_released;
  }
  LiveByteCounts c = {};
  c.unpooled = bytes.unpooled_bytes;
  c.unpooled_freed = bytes.unpooled_freed_bytes;
  c.pooled = -1;
  c.pools = static_cast<int64_t>(pools);
  c.pool_bytes = PoolRealBytes();
  TimelinePoint p = {};
  SetLiveBytes(&p, c);
  ++g_peak_checks;
  if (p.real_live_bytes > g_peak_seen) g_peak_seen = p.real_live_bytes;
  g_registry_lock.Unlock();
  return p.real_live_bytes;
}

// Under g_busy: the snapshot of the pools each site pins, at `real_live_bytes`, on the way down from
// `high` (to `after`, when a large block is about to be freed; else real_live_bytes).
void TakePeak(uint64_t now, int64_t high, int64_t after, int64_t real_live_bytes) {
  if (!g_peak.Due(high, real_live_bytes, after)) return;  // another thread's check took one meanwhile
  g_peak.Take(now - g_start_ns, real_live_bytes, ForEachPooledBlock);
  g_peak_high.store(real_live_bytes, std::memory_order_relaxed);
  g_peak_above.store(g_peak.next(), std::memory_order_relaxed);
  g_peak_jump.store(g_peak.jump(), std::memory_order_relaxed);
}

// A check's real live bytes raise the highest since the last snapshot; returns that highest.
int64_t RaisePeakHigh(int64_t real) {
  int64_t high = g_peak_high.load(std::memory_order_relaxed);
  while (real > high && !g_peak_high.compare_exchange_weak(high, real, std::memory_order_relaxed)) {
  }
  return real > high ? real : high;
}

void Sample(uint64_t now) {
  if (!g_registry_lock.TryLock()) return;
  ThreadCounters totals = g_ended;
  const TrackedBytes bytes = TrackedBytesNow();
  pool::PoolStats pool = g_ended_pool;
  for (ThreadState* t = g_threads; t != nullptr; t = t->next) {
    ThreadCounters c;
    pool::PoolStats stats;
    SettledCopy(*t, &c, &stats);
    AddCounters(&totals, c);
    pool::AddStats(&pool, stats);
  }
  g_registry_lock.Unlock();
  const bool walk = WalkAffordable(g_walk_ns, now - g_walk_at_ns, g_series.interval_ns());
  if (walk) g_walk_at_ns = now;
  g_series.Add(PointOf(totals, bytes, pool, now - g_start_ns, walk, &g_walk_ns));
  g_next_ns.store(now + g_series.interval_ns(), std::memory_order_relaxed);
}

}  // namespace

uint64_t TimelineNowNs() { return Now() - g_start_ns; }

void TimelineStart(bool on) {
  g_start_ns = Now();
  g_next_ns.store(g_start_ns, std::memory_order_relaxed);
  if (on && g_tracking && g_pooling) {
    // Zero pages reserved, touched as stack ids are used (at most 8 bytes a stack): counts only.
    auto* words = static_cast<uint32_t*>(
        InternalReserve(2 * size_t{kMaxStackIds} * sizeof(uint32_t), /*noted=*/false, /*pointer_free=*/true));
    if (words != nullptr) {
      g_peak.Init(words, words + kMaxStackIds, kMaxStackIds);
      g_peak_on = true;
    }
  }
  g_on.store(on, std::memory_order_release);
}

namespace {

// A tick's work: a sample if `may_sample` and one is due, and the peak's check (track=1, pooling on):
// the real live bytes summed over the threads, and a snapshot of the pools each site pins only when
// they fall from a high past the last one's, or double it. `falling`: bytes of a block about to be
// freed (TimelineLargeFree), counted in the check's real live bytes, whose fall the check judges: the
// snapshot it calls for is taken before they go.
void Tick(bool may_sample, int64_t falling) {
  // The tick runs in the middle of a call's counting, in the vDSO and libc much of the time: a report
  // signal landing here is poolscope's work interrupted (its report waits for the tick's end and says
  // its counters are not exact), not the program's.
  Busy busy(t_state);
  const uint64_t now = Now();
  const bool sample = may_sample && now >= g_next_ns.load(std::memory_order_relaxed);
  int64_t peak_at = -1, peak_after = -1, peak_high = -1;
  if (g_peak_on) {
    const int64_t real = RealLiveBytesNow();
    if (real >= 0) {
      const int64_t high = RaisePeakHigh(real), after = real - falling;
      if (PeakSnapshotDue(g_peak_above.load(std::memory_order_relaxed), g_peak_jump.load(std::memory_order_relaxed),
                          high, real, after)) {
        peak_at = real;
        peak_after = after;
        peak_high = high;
      }
    }
  }
  if (!sample && peak_at < 0) return;
  // The signals whose report takes the registry's lock wait while the sample holds it: a handler
  // that interrupted its holder would wait for it forever. Only those: a signal the kernel forces
  // (SIGSYS from a seccomp trap on the open below, SIGSEGV) while blocked kills the process.
  sigset_t report_signals, old;
  sigemptyset(&report_signals);
  sigaddset(&report_signals, SIGTERM);
  sigaddset(&report_signals, SIGINT);
  sigaddset(&report_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &report_signals, &old);
  if (!g_busy.exchange(true, std::memory_order_acquire)) {
    if (peak_at >= 0) TakePeak(now, peak_high, peak_after, peak_at);
    if (sample && g_series.Due(now - g_start_ns)) Sample(now);
    g_busy.store(false, std::memory_order_release);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

void TimelineTick() {
  if (!g_on.load(std::memory_order_acquire)) return;
  Tick(/*may_sample=*/true, /*falling=*/0);
}

void TimelineLargeFree(uint64_t bytes) {
  if (!g_peak_on || !g_on.load(std::memory_order_acquire)) return;
  // A free that cannot make the fall alone is left to the regular checks: a program freeing large
  // blocks all the time pays a load here, not a sum over its threads.
  if (static_cast<int64_t>(bytes) * kPeakDip < g_peak_high.load(std::memory_order_relaxed)) return;
  Tick(/*may_sample=*/false, static_cast<int64_t>(bytes));
}

void TimelineForkPrepare() {
  // A sample another thread is taking finishes first: the child would copy it half written. (The
  // sampler holds no lock while it waits: it gives up when the registry's lock, held now, is taken.)
  while (g_busy.exchange(true, std::memory_order_acquire)) sched_yield();
}

void TimelineForkParent() { g_busy.store(false, std::memory_order_release); }

void TimelineForkChild() { g_busy.store(false, std::memory_order_relaxed); }

size_t TimelineRead(TimelinePoint* out, uint64_t* interval_ns) {
  // A sampler that is compacting the array meanwhile: wait for it, a while (it finishes in
  // microseconds, with the report's signals blocked; a bounded wait all the same: no samples rather
  // than a hang).
  for (int tries = 0; g_busy.exchange(true, std::memory_order_acquire); ++tries) {
    if (tries == 1000) {
      *interval_ns = kTimelineFirstIntervalNs;
      return 0;
    }
    sched_yield();
  }
  const size_t n = g_series.size();
  for (size_t i = 0; i < n; ++i) out[i] = g_series[i];
  *interval_ns = g_series.interval_ns();
  g_busy.store(false, std::memory_order_release);
  return n;
}

bool TimelineReadPeak(std::vector<uint64_t>* pins, PeakPinning* info) {
  *info = PeakPinning{};
  pins->clear();
  if (!g_peak_on) return false;
  // A snapshot under way (it walks every pool: 80 ms at 3.6 million): wait for it, a while.
  for (int tries = 0; g_busy.exchange(true, std::memory_order_acquire); ++tries) {
    if (tries == 100000) return false;
    sched_yield();
  }
  info->snapshots = g_peak.snapshots();
  info->t_ns = g_peak.t_ns();
  info->real_live_bytes = g_peak.real_live_bytes();
  pins->resize(g_peak.ids());
  for (uint32_t id = 0; id < g_peak.ids(); ++id) (*pins)[id] = g_peak.pins(id);
  g_busy.store(false, std::memory_order_release);
  g_registry_lock.Lock();
  info->checks = g_peak_checks;
  info->max_seen = g_peak_seen;
  g_registry_lock.Unlock();
  return info->snapshots != 0;
}

TimelinePoint TimelinePointOf(const Snapshot& s, uint64_t t_ns, int64_t pooled_bytes) {
  return PointOf(s.totals, s.tracked_bytes, s.pool, t_ns, true, nullptr, pooled_bytes);
}

}  // namespace poolscope
