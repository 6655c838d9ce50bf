// File: interpose/report_render.cc
//
// Renders the report's JSON (see report_render.h): the report top to bottom, with the parts that come
// from tracking and the exit scan (leaks, sites, reachability) written by report_leaks.cc. Runs under
// the caller's reentrancy guard: libc calls made here pass straight through.
#include "interpose/report_render.h"

#include <sys/resource.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "interpose/attach.h"
#include "interpose/internal.h"
#include "interpose/report_leaks.h"
#include "interpose/shim_internal.h"
#include "interpose/signals.h"
#include "interpose/thread_state.h"
#include "interpose/timeline.h"
#include "interpose/tracking.h"
#include "track/frame_rule_store.h"
#include "track/frame_rules.h"
#include "track/populate.h"
#include "track/symbolizer.h"

namespace poolscope {

extern const char* const kVersion;

namespace {

// Memory over time (timeline.h): the samples taken while the program ran, then this report's own
// counts as the last point. `pooled_bytes`: the live pooled blocks' bytes the report counted (-1: read
// them).
void WriteTimeline(report::JsonWriter& w, const Snapshot& s, int64_t pooled_bytes) {
  POOLSCOPE_LARGE_BSS static TimelinePoint points[kTimelinePoints + 1];  // the report is written by one thread at a time
  uint64_t interval_ns = 0;
  size_t n = TimelineRead(points, &interval_ns);
  points[n++] = TimelinePointOf(s, TimelineNowNs(), pooled_bytes);
  w.Key("timeline");
  w.BeginObject();
  w.Field("interval_ms", interval_ns / 1000000);
  w.Key("points");
  w.BeginArray();
  for (size_t i = 0; i < n; ++i) {
    const TimelinePoint& p = points[i];
    w.BeginObject();
    w.Field("t_ms", p.t_ns / 1000000);
    w.FieldInt("logical_live_blocks", p.logical_live);
    w.FieldInt("real_live_blocks", p.real_live);
    w.FieldInt("pools", p.pools);
    w.FieldIntOrNull("rss_kib", p.rss_kib >= 0, p.rss_kib);
    // Known with track=1 only (docs/report-schema.md).
    w.FieldIntOrNull("logical_live_bytes", p.logical_live_bytes >= 0, p.logical_live_bytes);
    w.FieldIntOrNull("real_live_bytes", p.real_live_bytes >= 0, p.real_live_bytes);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

struct BadFree {
  uintptr_t address;
  bool is_double;
  int tid;
  uint32_t stack_id;
};
constexpr int kMaxBadFrees = 64;
BadFree g_bad_frees[kMaxBadFrees];
std::atomic<int> g_nbad{0};

void WriteLedger(report::JsonWriter& w, const char* key, const Ledger& l, bool with_live,
                 int64_t live_bytes = -1) {
  w.Key(key);
  w.BeginObject();
  w.Field("allocs", l.nallocs);
  w.Field("frees", l.nfrees);
  w.Field("reallocs", l.nreallocs);
  w.Field("bytes_requested", l.nbytes);
  if (with_live) {
    w.FieldInt("live_blocks", static_cast<int64_t>(l.nallocs - l.nfrees));
    // live_bytes needs the live-block table (track=1), see docs/report-schema.md
    w.FieldIntOrNull("live_bytes", live_bytes >= 0, live_bytes);
  }
  w.Key("by_api");
  w.BeginObject();
  for (int api = 0; api < kNumApis; ++api) w.Field(ApiName(api), l.ncalls[api]);
  w.EndObject();
  w.EndObject();
}

void WritePoolCounters(report::JsonWriter& w, const pool::PoolStats& s) {
  w.Field("hits", s.hits);
  w.Key("misses");
  w.BeginObject();
  for (int r = 0; r < pool::kNumMissReasons; ++r) w.Field(pool::MissReasonName(r), s.misses[r]);
  w.EndObject();
  w.Field("pools_created", s.pools_created);
  w.Field("pools_reused", s.pools_reused);
  w.Field("pools_released", s.pools_released);
  w.Field("resets_in_place", s.resets_in_place);
  w.Field("spills", s.spills);
  w.Field("absorbs", s.absorbs);
}

void WriteThread(report::JsonWriter& w, int tid, bool ended, const ThreadCounters& c,
                 const pool::PoolStats& ps, int cached) {
  w.BeginObject();
  w.FieldInt("tid", tid);
  w.FieldBool("ended", ended);
  WriteLedger(w, "logical", Logical(c), true);
  WriteLedger(w, "real", Real(c), true);
  w.Key("pool");
  w.BeginObject();
  WritePoolCounters(w, ps);
  w.FieldInt("pools_cached", cached);
  w.EndObject();
  w.EndObject();
}

void WriteLeakCheck(report::JsonWriter& w, const LeakCheck& c) {
  w.Key("leak_check");
  w.BeginObject();
  w.FieldInt("leak_exitcode", c.leak_exitcode);
  w.FieldInt("live_blocks", c.leaks.live_blocks);
  w.FieldInt("live_at_start", c.leaks.live_at_start);
  w.FieldInt("stdio_buffers", c.leaks.stdio_buffers);
  w.FieldInt("program_leak_blocks", c.leaks.blocks);
  w.FieldBool("exact", c.leaks.exact);
  w.FieldStr("judged_by", c.lost_blocks >= 0 ? "reachability" : "live_blocks");
  w.FieldIntOrNull("lost_blocks", c.lost_blocks >= 0, c.lost_blocks);
  w.FieldIntOrNull("exit_status", c.exit_status != 0, c.exit_status);
  w.EndObject();
}

}  // namespace

uint64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void Render(report::JsonWriter& w, const char* reason, const Options& o, const ProcessInfo& p,
            const Snapshot& s, const LeakCheck* check, const char* path, uint64_t started_ns) {
  const ThreadCounters& t = s.totals;
  // Report time: allocation through the normal malloc is fine here (the caller holds the guard, so it
  // passes straight through, counted as poolscope's own).
  ReportLeaks leaks;
  GatherLeaks(&leaks);
  const bool tracked = leaks.tracked;
  const LiveTotals& live = leaks.live;
  track::Symbolizer* sym = leaks.sym;
  // Every other stack the report shows is symbolized now, so that report_ms counts all of it (the
  // answers are cached: WriteStack finds them below).
  const int nbad = g_nbad.load(std::memory_order_acquire);
  if (sym != nullptr) {
    std::vector<uint32_t> shown;
    for (const SiteCounters& site : leaks.sites) shown.push_back(site.stack_id);
    for (int i = 0; i < nbad && i < kMaxBadFrees; ++i) shown.push_back(g_bad_frees[i].stack_id);
    for (uint32_t id : shown) {
      uintptr_t pcs[track::kMaxStackDepth];
      const int n = ProgramFrames(sym, id, pcs);
      for (int k = 0; k < n; ++k) sym->ReturnAddressFrame(pcs[k]);
    }
  }
  const uint64_t report_ms = (MonotonicNs() - started_ns) / 1000000;
  w.BeginObject();
  w.FieldStr("schema", "poolscope.report/1");
  w.FieldStr("poolscope_version", kVersion);

  w.Key("process");
  w.BeginObject();
  w.FieldInt("pid", p.pid);
  w.FieldInt("ppid", p.ppid);
  w.FieldStr("exe", p.exe);
  w.Key("argv");
  w.BeginArray();
  for (size_t off = 0; p.argv != nullptr && off < p.argv_bytes;) {
    size_t len = strnlen(p.argv + off, p.argv_bytes - off);
    w.String(p.argv + off, len);
    off += len + 1;
  }
  w.EndArray();
  w.Field("start_ns", p.start_ns);
  AttachInfo attach;
  const bool attached = AttachReportInfo(&attach);
  if (attached) w.Field("attached_ns", attach.attached_ns);
  w.Field("end_ns", NowNs());
  {
    // The process's peak RSS so far, as getrusage counts it (what `diff` compares).
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) w.FieldInt("max_rss_kib", ru.ru_maxrss);
  }
  w.FieldStr("reason", reason);
  if (strcmp(reason, "signal") == 0) w.FieldStr("signal", SignalName(ReportSignal()));
  // False when other threads were running while the counters were read (a snapshot, or an exit with
  // threads still running): the ledgers may then be off by the calls in flight.
  // The reader is exact only when no thread but itself can be counting: the snapshot thread is not
  // a registered thread, so while the program's main thread lives its reads are never exact.
  bool others = false;
  for (int i = 0; i < s.live_threads; ++i) others = others || !s.live[i].self;
  // A signal that stopped this thread inside poolscope may have stopped it between two counter updates.
  others = others || (strcmp(reason, "signal") == 0 && SignalInterruptedPoolscope());
  w.FieldBool("counters_exact", !others);
  w.FieldIntOrNull("forked_from", p.forked_from != 0, p.forked_from);
  // Under `poolscope run`/`compare` (POOLSCOPE_ROOT_PID set): the process poolscope started, and for
  // any other process the one that forked it (a fork() child) or that it was started by (getppid()
  // at start-up). Whether that parent was itself preloaded is for the reader to see in the tree.
  w.FieldIntOrNull("root_pid", p.root_pid != 0, p.root_pid);
  // The run (POOLSCOPE_RUN): the same in every report of one run, so no two runs' reports are merged.
  w.FieldStrOrNull("run", p.run[0] != '\0', p.run);
  w.Key("parent_pid");
  if (p.forked_from != 0) {
    w.Int(p.forked_from);
  } else if (p.root_pid != 0 && p.root_pid != p.pid) {
    w.Int(p.ppid);
  } else {
    w.Null();
  }
  w.FieldStr("report_path", path);
  w.Field("report_ms", report_ms);
  w.EndObject();

  w.Key("options");
  w.BeginObject();
  w.FieldInt("pool", o.pool);
  w.FieldInt("pool_size", o.pool_size);
  w.FieldInt("pools", o.pools);
  char tag[600];
  snprintf(tag, sizeof tag, "%s%s",
           o.tag == TagMode::kSmall ? "small" : o.tag == TagMode::kExplicit ? "explicit" : "caller:",
           o.tag == TagMode::kCaller ? o.tag_globs : "");
  w.FieldStr("tag", tag);
  w.FieldInt("malloc_align", o.malloc_align);
  w.FieldInt("track", o.track);
  w.FieldInt("stack_depth", o.stack_depth);
  w.FieldStr("report", o.report);
  w.FieldInt("drain_at_exit", o.drain_at_exit);
  w.FieldInt("reachability", o.reachability);
  char kinds[64];
  w.FieldStr("leak_kinds", LeakKindsText(o.leak_kinds, kinds, sizeof kinds));
  w.FieldInt("snapshot_interval", o.snapshot_interval);
  w.FieldInt("quiet", o.quiet);
  w.FieldInt("leak_exitcode", o.leak_exitcode);
  w.FieldInt("valgrind", o.valgrind);
  w.FieldInt("help", o.help);
  w.EndObject();

  const Ledger logical = Logical(t);
  const Ledger real = Real(t);
  uint64_t pools_existing = s.pool.pools_created - s.pool.pools_released;
  const uint64_t pool_bytes = PoolRealBytes();
  int64_t real_live_bytes =
      tracked ? static_cast<int64_t>(live.real_bytes + pools_existing * pool_bytes) : -1;
  WriteLedger(w, "logical", logical, true, tracked ? static_cast<int64_t>(live.bytes) : -1);
  WriteLedger(w, "real", real, true, real_live_bytes);

  w.Key("internal");
  w.BeginObject();
  w.Field("mmaps", s.internal.nmmaps);
  w.Field("munmaps", s.internal.nmunmaps);
  w.Field("mapped_bytes", s.internal.mapped_bytes);
  w.Field("resident_bytes", s.internal.resident_bytes);
  w.Field("peak_resident_bytes", s.internal.peak_resident_bytes);
  w.Field("bootstrap_allocs", s.internal.bootstrap_allocs);
  w.Field("bootstrap_bytes", s.internal.bootstrap_bytes);
  w.Field("passthrough_allocs", s.internal.passthrough_allocs);
  w.Field("passthrough_frees", s.internal.passthrough_frees);
  w.Field("real_blocks_held", 0);
  w.Field("frame_rules_computed", track::FrameRulesComputed());
  w.Field("frame_rules_from_cache", track::FrameRulesFromStore());
  w.EndObject();

  if (attached) {
    // `poolscope attach`: what the process did with blocks made before the attach (in no ledger).
    w.Key("attach");
    w.BeginObject();
    w.Field("attached_ns", attach.attached_ns);
    w.FieldUIntOrNull("detached_ns", attach.detached_ns != 0, attach.detached_ns);
    w.Field("objects_patched", attach.objects_patched);
    w.Field("slots_patched", attach.slots_patched);
    w.Field("preexisting_frees", attach.preexisting_frees);
    w.Field("preexisting_reallocs", attach.preexisting_reallocs);
    w.Field("preexisting_usable_size", attach.preexisting_usable_size);
    w.FieldBool("hooks_kept", attach.hooks_kept);
    w.EndObject();
  }

  uint64_t pools_live = s.pool.pools_created - s.pool.pools_released;
  uint64_t in_use = pools_live - s.pools_cached;
  w.Key("pool");
  w.BeginObject();
  w.FieldBool("enabled", s.pooling);
  w.Field("pool_size", s.pool_size);
  w.Field("pool_real_bytes", pool_bytes);
  w.FieldInt("pools_per_thread", s.pools_per_thread);
  WritePoolCounters(w, s.pool);
  w.Field("pools_cached_at_exit", s.pools_cached);
  w.Field("pools_in_use_at_exit", in_use);
  w.Field("pooled_live_blocks", s.pool.hits - s.pool.pooled_frees);
  w.EndObject();

  w.Key("threads");
  w.BeginArray();
  for (int i = 0; i < s.live_threads; ++i) {
    const LiveThread& lt = s.live[i];
    WriteThread(w, lt.tid, false, lt.c, lt.pool, lt.cached);
  }
  for (const ThreadRecord* r = s.records; r != nullptr; r = r->next) {
    WriteThread(w, r->tid, true, r->c, r->pool, 0);
  }
  w.EndArray();
  w.Field("threads_omitted", s.records_omitted);
  w.Field("threads_lost_at_fork", s.threads_lost_at_fork);
  WriteTimeline(w, s, tracked ? static_cast<int64_t>(live.pooled_bytes - live.arena_pooled_bytes) : -1);

  w.Key("sizes");
  w.BeginObject();
  uint64_t total = 0, small = 0;
  w.Key("buckets");
  w.BeginArray();
  for (int b = 0; b < kSizeBuckets; ++b) {
    uint64_t count = t.sizes[b];
    total += count;
    uint64_t le = uint64_t{1} << b;
    if (le <= s.pool_size) small += count;
    if (count == 0) continue;
    w.BeginObject();
    w.Field("le", le);
    w.Field("count", count);
    w.EndObject();
  }
  w.EndArray();
  w.Field("pool_size", s.pool_size);
  w.Field("at_or_below_pool_size", small);
  w.Field("total", total);
  w.Key("share_at_or_below_pool_size");
  w.Double(total != 0 ? static_cast<double>(small) / static_cast<double>(total) : 0.0);
  w.EndObject();

  WriteSites(w, leaks);
  WriteLeaks(w, leaks);

  // real live = the program's live real blocks + every pool that exists.
  int64_t real_live = static_cast<int64_t>(real.nallocs - real.nfrees);
  int64_t logical_live = static_cast<int64_t>(logical.nallocs - logical.nfrees);
  int64_t pooled_live = static_cast<int64_t>(s.pool.hits - s.pool.pooled_frees);
  int64_t unpooled_live = logical_live - pooled_live;
  int64_t cached = static_cast<int64_t>(s.pools_cached);
  int64_t used = static_cast<int64_t>(in_use);
  bool balanced = ReconciliationGap(s) == 0;
  w.Key("reconciliation");
  w.BeginObject();
  w.FieldInt("real_live_blocks", real_live);
  w.FieldInt("unpooled_live_blocks", unpooled_live);
  w.FieldInt("pooled_live_blocks", pooled_live);
  w.FieldInt("pools_cached", cached);
  w.FieldInt("pools_in_use", used);
  w.FieldInt("interrupted_by_fork", s.fork_carryover);
  w.Field("pools_drained_at_exit", s.drained_at_exit);
  w.FieldBool("balanced", balanced);
  w.Key("detector_view");
  w.BeginObject();
  w.FieldInt("unfreed_blocks", real_live);
  w.FieldIntOrNull("unfreed_bytes", real_live_bytes >= 0, real_live_bytes);
  w.FieldInt("program_leak_blocks", unpooled_live);
  w.FieldInt("pool_blocks", cached + used);
  w.FieldInt("internal_blocks", 0);
  char verdict[600];
  const long long unfreed = real_live, own = unpooled_live, pools = cached + used;
  auto s_if = [](long long n) { return n == 1 ? "" : "s"; };
  auto be = [](long long n) { return n == 1 ? "is" : "are"; };
  if (pools == 0) {
    snprintf(verdict, sizeof verdict,
             "A malloc/free-counting leak detector would see %lld unfreed block%s, %sthe program's own: "
             "poolscope holds no pool at %s.",
             unfreed, s_if(unfreed), unfreed == 1 ? "" : "all of them ", reason);
  } else {
    const int n = snprintf(verdict, sizeof verdict,
                           "A malloc/free-counting leak detector would see %lld unfreed block%s: %lld %s the "
                           "program's own and %lld %s poolscope's pool%s (%lld cached, %lld in use), which ",
                           unfreed, s_if(unfreed), own, be(own), pools, be(pools), s_if(pools),
                           static_cast<long long>(cached), static_cast<long long>(used));
    char* tail = verdict + (n > 0 && static_cast<size_t>(n) < sizeof verdict ? n : 0);
    const size_t room = sizeof verdict - static_cast<size_t>(tail - verdict);
    const char* drain = o.drain_at_exit || cached == 0 ? "" : " (drain_at_exit=1 releases the cached pools)";
    if (pooled_live <= 0) {
      snprintf(tail, room, "%s%s.", pools == 1 ? "is not a leak" : "are not leaks", drain);
    } else {
      // The program's blocks inside pools are its own unfreed blocks too, though no detector below
      // poolscope can count them: say so, or a reader takes the unpooled count for all it leaks.
      snprintf(tail, room,
               "%s %lld more of the program's blocks, so the program leaves %lld block%s unfreed, as it "
               "would without pooling%s.",
               pools == 1 ? "is not a leak itself but holds" : "are not leaks themselves but hold",
               static_cast<long long>(pooled_live), static_cast<long long>(logical_live), s_if(logical_live),
               drain);
    }
  }
  w.FieldStr("verdict", verdict);
  WriteDetectorScan(w, leaks);
  w.EndObject();
  w.EndObject();
  if (check != nullptr) WriteLeakCheck(w, *check);

  w.Key("errors");
  w.BeginObject();
  w.Field("invalid_frees", s.pool.invalid_frees);
  w.Field("double_frees", s.pool.double_frees);
  w.Key("cases");
  w.BeginArray();
  for (int i = 0; i < nbad && i < kMaxBadFrees; ++i) {
    w.BeginObject();
    w.FieldStr("kind", g_bad_frees[i].is_double ? "double_free" : "invalid_free");
    w.FieldHex("address", g_bad_frees[i].address);
    w.FieldInt("tid", g_bad_frees[i].tid);
    WriteStack(w, sym, &leaks.frames, g_bad_frees[i].stack_id);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();

  w.EndObject();
  if (sym != nullptr) {
    // libdw is loaded when the first frame needs it; without it, one line per process.
    static std::atomic<bool> warned{false};
    const char* why = track::SymbolizerUnavailable();
    if (why != nullptr && !warned.exchange(true)) {
      char line[500];
      snprintf(line, sizeof line, "cannot load libdw (%s): report stacks name objects and offsets, no functions or lines",
               why);
      WarnLine(nullptr, line);
    }
  }
  delete sym;
}

void RecordBadFree(const void* p, bool is_double) {
  int i = g_nbad.load(std::memory_order_relaxed);
  if (i >= kMaxBadFrees) return;
  i = g_nbad.fetch_add(1, std::memory_order_acq_rel);
  if (i >= kMaxBadFrees) return;
  g_bad_frees[i] = BadFree{reinterpret_cast<uintptr_t>(p), is_double, CurrentThread().tid,
                           TrackingOn() ? CaptureStackId(0) : 0};
}

}  // namespace poolscope
