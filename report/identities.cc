// File: report/identities.cc
//
// See identities.h. Each equation is evaluated as a sum of named integer terms on both sides, so
// that a broken one is printed with every field and value that went into it. The schema the
// identities read is checked first (schema_check.cc).
#include "report/identities.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "report/check_util.h"
#include "report/report_model.h"
#include "report/schema_check.h"

namespace poolscope::report {
namespace {

using check::IntOf;
using check::IsInt;
using check::Path;
using check::Text;
using nlohmann::json;

// Per-thread counts, which only grow: the threads' sum is at most the process's.
constexpr std::string_view kThreadLedgerFields[] = {"allocs", "frees", "reallocs",
                                                    "bytes_requested"};
constexpr std::string_view kThreadPoolFields[] = {
    "hits",   "pools_created", "pools_reused", "pools_released", "resets_in_place",
    "spills", "absorbs"};
// The report lists at most this many live threads (and counts those beyond in no field), so the
// per-thread sums are only checked with fewer.
constexpr int kMaxListedLiveThreads = 64;
// The library keeps at most 200 samples, and the report adds its own counts as the last point.
constexpr size_t kMaxTimelinePoints = 201;
// sizes.share_at_or_below_pool_size is written with 6 significant digits.
constexpr double kShareTolerance = 1e-5;

// A named integer with its sign in a sum.
struct Term {
  std::string name;
  int64_t value;
  bool minus = false;
};
using Sum = std::vector<Term>;

int64_t Total(const Sum& sum) {
  int64_t total = 0;
  for (const Term& term : sum) total += term.minus ? -term.value : term.value;
  return total;
}

// "a - b = 1000 - 990 = 10", or "a = 11" for one term.
std::string Describe(const Sum& sum) {
  if (sum.size() == 1 && !sum[0].minus) return fmt::format("{} = {}", sum[0].name, sum[0].value);
  std::string names, values;
  for (size_t i = 0; i < sum.size(); ++i) {
    const char* sign = sum[i].minus ? (i == 0 ? "-" : " - ") : (i == 0 ? "" : " + ");
    absl::StrAppend(&names, sign, sum[i].name);
    absl::StrAppend(&values, sign, sum[i].value);
  }
  return fmt::format("{} = {} = {}", names, values, Total(sum));
}

// Keyed counts (by_api, pool.misses), with std::nullopt for a key one side lacks.
using Keyed = std::map<std::string, std::optional<int64_t>>;

std::string Shown(const std::optional<int64_t>& value) {
  return value ? std::to_string(*value) : std::string("missing");
}

class IdentityCheck {
 public:
  explicit IdentityCheck(const json& doc) : doc_(doc) {}

  CheckResult Run();

 private:
  void Record(bool holds, std::string line) {
    if (holds) {
      ++result_.held;
    } else {
      result_.broken.push_back(std::move(line));
    }
  }

  std::optional<int64_t> Int(std::string_view path) const {
    const json* node = Find(doc_, path);
    if (!IsInt(node)) return std::nullopt;
    return IntOf(*node);
  }

  // A sum of the integer fields at `paths` (a leading '-' subtracts one), or std::nullopt when
  // one is absent or not an integer (the identity then does not apply).
  std::optional<Sum> Fields(std::initializer_list<std::string_view> paths) const {
    Sum sum;
    for (std::string_view path : paths) {
      bool minus = !path.empty() && path[0] == '-';
      if (minus) path.remove_prefix(1);
      std::optional<int64_t> value = Int(path);
      if (!value) return std::nullopt;
      sum.push_back({std::string(path), *value, minus});
    }
    return sum;
  }

  // lhs == rhs; `context` (may be empty) says when the identity applies.
  void Equal(const std::optional<Sum>& lhs, const std::optional<Sum>& rhs,
             std::string_view context = "") {
    if (!lhs || !rhs) return;
    std::string line = Describe(*lhs) + " != " + Describe(*rhs);
    if (!context.empty()) line += fmt::format(" ({})", context);
    Record(Total(*lhs) == Total(*rhs), std::move(line));
  }

  // lhs <= rhs.
  void AtMost(const std::optional<Sum>& lhs, const std::optional<Sum>& rhs) {
    if (!lhs || !rhs) return;
    Record(Total(*lhs) <= Total(*rhs), Describe(*lhs) + " > " + Describe(*rhs));
  }

  void EqualFields(std::initializer_list<std::string_view> lhs,
                   std::initializer_list<std::string_view> rhs, std::string_view context = "") {
    Equal(Fields(lhs), Fields(rhs), context);
  }

  // Two keyed counts agree key by key; one identity, one line naming every key that differs.
  void EqualKeyed(std::string_view lhs_name, const Keyed& lhs, std::string_view rhs_name,
                  const Keyed& rhs, std::string_view context);

  Keyed KeyedAt(std::string_view path) const {
    Keyed out;
    const json* node = Find(doc_, path);
    if (node == nullptr || !node->is_object()) return out;
    for (const auto& [key, value] : node->items()) {
      out[key] = IsInt(&value) ? std::optional<int64_t>(IntOf(value)) : std::nullopt;
    }
    return out;
  }

  bool PoolingOff() const;
  void Ledgers();
  void PoolCounts();
  void Reconciliation();
  void DetectorView();
  void Internal();
  void Timeline();
  void TimelineBytes();
  std::optional<Sum> LastPoint(const nlohmann::json& points, const char* field) const;
  void Sizes();
  void Threads();
  void LeakCheck();
  void CrossLedger();
  void LeakGroups();
  void Verdict();

  const json& doc_;
  CheckResult result_;
};

void IdentityCheck::EqualKeyed(std::string_view lhs_name, const Keyed& lhs,
                               std::string_view rhs_name, const Keyed& rhs,
                               std::string_view context) {
  Keyed keys = lhs;
  keys.insert(rhs.begin(), rhs.end());
  std::vector<std::string> differ;
  for (const auto& entry : keys) {
    const std::string& key = entry.first;
    auto l = lhs.find(key);
    auto r = rhs.find(key);
    std::optional<int64_t> a = l == lhs.end() ? std::nullopt : l->second;
    std::optional<int64_t> b = r == rhs.end() ? std::nullopt : r->second;
    if (a != b) {
      differ.push_back(fmt::format("{}.{} = {} != {}.{} = {}", lhs_name, key, Shown(a), rhs_name,
                                   key, Shown(b)));
    }
  }
  std::string line = fmt::format("{} != {}: {}", lhs_name, rhs_name, absl::StrJoin(differ, "; "));
  if (!context.empty()) line += fmt::format(" ({})", context);
  Record(differ.empty(), std::move(line));
}

// Pooling is off with pool=0, or with a negative pool_size.
bool IdentityCheck::PoolingOff() const {
  const json* pool = Find(doc_, "options.pool");
  if (pool != nullptr && (*pool == 0 || *pool == "0" || *pool == false)) return true;
  std::optional<int64_t> size = Int("options.pool_size");
  return size && *size < 0;
}

void IdentityCheck::Ledgers() {
  EqualFields({"logical.allocs", "-logical.frees"}, {"logical.live_blocks"});
  EqualFields({"real.allocs", "-real.frees"}, {"real.live_blocks"});
}

void IdentityCheck::PoolCounts() {
  EqualFields({"pool.pools_cached_at_exit", "pool.pools_in_use_at_exit"},
              {"pool.pools_created", "-pool.pools_released"});
  EqualFields({"reconciliation.pools_cached"}, {"pool.pools_cached_at_exit"});
  EqualFields({"reconciliation.pools_in_use"}, {"pool.pools_in_use_at_exit"});
  EqualFields({"reconciliation.pooled_live_blocks"}, {"pool.pooled_live_blocks"});
}

void IdentityCheck::Reconciliation() {
  EqualFields({"reconciliation.real_live_blocks"}, {"real.live_blocks"});
  EqualFields({"reconciliation.unpooled_live_blocks"},
              {"logical.live_blocks", "-reconciliation.pooled_live_blocks"});
  // A fork() child may inherit a gap from threads that fork stopped mid-call: its own term, zero
  // outside fork children.
  const json* fork_gap = Find(doc_, "reconciliation.interrupted_by_fork");
  const json* forked_from = Find(doc_, "process.forked_from");
  bool in_child = forked_from != nullptr && !forked_from->is_null();
  if (fork_gap != nullptr) {
    Record(IsInt(fork_gap) && (in_child || IntOf(*fork_gap) == 0),
           fmt::format("reconciliation.interrupted_by_fork = {} != 0 outside a fork() child "
                       "(process.forked_from = {})",
                       Text(*fork_gap), forked_from != nullptr ? Text(*forked_from) : "missing"));
  }
}

void IdentityCheck::DetectorView() {
  EqualFields({"reconciliation.detector_view.unfreed_blocks"}, {"reconciliation.real_live_blocks"});
  EqualFields({"reconciliation.detector_view.program_leak_blocks"},
              {"reconciliation.unpooled_live_blocks"});
  EqualFields({"reconciliation.detector_view.pool_blocks"},
              {"reconciliation.pools_cached", "reconciliation.pools_in_use"});
  EqualFields({"reconciliation.detector_view.unfreed_bytes"}, {"real.live_bytes"});
}

// poolscope's resident memory: at most what it has mapped, and at most its sampled peak.
void IdentityCheck::Internal() {
  AtMost(Fields({"internal.resident_bytes"}), Fields({"internal.mapped_bytes"}));
  AtMost(Fields({"internal.resident_bytes"}), Fields({"internal.peak_resident_bytes"}));
}

// The timeline's samples are in time order and at most kMaxTimelinePoints; its last point is the
// report's own counts.
void IdentityCheck::Timeline() {
  const json* points = Find(doc_, "timeline.points");
  if (points == nullptr) return;  // reports written before there was a timeline
  if (!points->is_array() || points->empty()) {
    Record(false, "timeline.points is not a non-empty array");
    return;
  }
  Record(points->size() <= kMaxTimelinePoints,
         fmt::format("timeline.points has {} points, more than {}", points->size(), kMaxTimelinePoints));
  int64_t previous = 0;
  for (size_t i = 0; i < points->size(); ++i) {
    const json* t = Find((*points)[i], "t_ms");
    if (!IsInt(t)) {
      Record(false, fmt::format("timeline.points[{}].t_ms is not an integer", i));
      return;
    }
    Record(IntOf(*t) >= previous,
           fmt::format("timeline.points[{}].t_ms = {} < {} (the point before it)", i, IntOf(*t), previous));
    previous = IntOf(*t);
  }
  Equal(LastPoint(*points, "logical_live_blocks"), Fields({"logical.live_blocks"}));
  Equal(LastPoint(*points, "real_live_blocks"), Fields({"real.live_blocks"}));
  Equal(LastPoint(*points, "pools"), Fields({"pool.pools_cached_at_exit", "pool.pools_in_use_at_exit"}));
}

// A field of the timeline's last point (`points` not empty), as a Sum; none when it is not an integer
// (null).
std::optional<Sum> IdentityCheck::LastPoint(const json& points, const char* field) const {
  const json* n = Find(points.back(), field);
  if (!IsInt(n)) return std::nullopt;
  return Sum{{fmt::format("timeline.points[{}].{}", points.size() - 1, field), IntOf(*n)}};
}

// The timeline's last point's live bytes, when known, are the report's own (counted apart: the point's
// from the per-thread byte counts and the pools' marks, the report's from the live-block table). Not
// in a fork() child of a process with other threads: one of them may have been stopped between
// recording a block and counting its bytes.
void IdentityCheck::TimelineBytes() {
  std::optional<int64_t> lost = Int("threads_lost_at_fork");
  if (lost && *lost != 0) return;
  const json* points = Find(doc_, "timeline.points");
  if (points == nullptr || !points->is_array() || points->empty()) return;
  Equal(LastPoint(*points, "logical_live_bytes"), Fields({"logical.live_bytes"}));
  Equal(LastPoint(*points, "real_live_bytes"), Fields({"real.live_bytes"}));
}

void IdentityCheck::Sizes() {
  const json* buckets = Find(doc_, "sizes.buckets");
  std::optional<int64_t> pool_size = Int("sizes.pool_size");
  if (buckets == nullptr || !buckets->is_array()) return;
  int64_t total = 0, small = 0;
  for (const json& bucket : *buckets) {
    const json* le = Find(bucket, "le");
    const json* count = Find(bucket, "count");
    if (!IsInt(le) || !IsInt(count)) return;
    total += IntOf(*count);
    if (pool_size && IntOf(*le) <= *pool_size) small += IntOf(*count);
  }
  Equal(Sum{{"sum(sizes.buckets[].count)", total}}, Fields({"sizes.total"}));
  if (pool_size) {
    Equal(
        Sum{{fmt::format("sum(sizes.buckets[].count where le <= sizes.pool_size = {})", *pool_size),
             small}},
        Fields({"sizes.at_or_below_pool_size"}));
  }
  std::optional<int64_t> at_or_below = Int("sizes.at_or_below_pool_size");
  std::optional<int64_t> all = Int("sizes.total");
  const json* share = Find(doc_, "sizes.share_at_or_below_pool_size");
  if (at_or_below && all && share != nullptr && share->is_number()) {
    double expected = *all != 0 ? static_cast<double>(*at_or_below) / static_cast<double>(*all) : 0;
    Record(std::fabs(share->get<double>() - expected) <= kShareTolerance,
           fmt::format("sizes.at_or_below_pool_size / sizes.total = {} / {} = {:.6g} != "
                       "sizes.share_at_or_below_pool_size = {}",
                       *at_or_below, *all, expected, Text(*share)));
  }
}

void IdentityCheck::Threads() {
  const json* threads = Find(doc_, "threads");
  if (threads == nullptr || !threads->is_array() || threads->empty()) return;
  if (Int("threads_omitted") != 0) return;
  int live = 0;
  for (const json& thread : *threads) {
    if (!thread.is_object()) return;
    const json* ended = Find(thread, "ended");
    if (ended == nullptr || *ended != true) ++live;
  }
  if (live >= kMaxListedLiveThreads) return;

  // Every thread's own ledger balances.
  for (size_t i = 0; i < threads->size(); ++i) {
    for (std::string_view side : {"logical", "real"}) {
      std::string at = fmt::format("threads[{}].{}.", i, side);
      const json& thread = (*threads)[i];
      std::optional<int64_t> allocs, frees, live_blocks;
      if (const json* n = Find(thread, Path(side, "allocs")); IsInt(n)) allocs = IntOf(*n);
      if (const json* n = Find(thread, Path(side, "frees")); IsInt(n)) frees = IntOf(*n);
      if (const json* n = Find(thread, Path(side, "live_blocks")); IsInt(n))
        live_blocks = IntOf(*n);
      if (!allocs || !frees || !live_blocks) continue;
      Equal(Sum{{at + "allocs", *allocs}, {at + "frees", *frees, true}},
            Sum{{at + "live_blocks", *live_blocks}});
    }
  }

  // The threads' counts add up to at most the process's: a thread's calls after its exit handler
  // (other key and TLS destructors) count in the process's totals only. `field` is the path inside
  // a thread; the identity applies when every thread has it.
  auto at_most_total = [&](const std::string& field, std::string_view total_path) {
    int64_t sum = 0;
    for (const json& thread : *threads) {
      const json* node = Find(thread, field);
      if (!IsInt(node)) return;
      sum += IntOf(*node);
    }
    std::optional<int64_t> total = Int(total_path);
    if (!total) return;
    Record(sum <= *total,
           fmt::format("sum(threads[].{}) = {} > {} = {}", field, sum, total_path, *total));
  };
  auto keyed_at_most_total = [&](const std::string& field, std::string_view total_path) {
    Keyed sums;
    for (const json& thread : *threads) {
      const json* node = Find(thread, field);
      if (node == nullptr || !node->is_object()) return;
      for (const auto& [key, value] : node->items()) {
        if (!IsInt(&value)) return;
        std::optional<int64_t>& sum = sums.emplace(key, 0).first->second;
        *sum += IntOf(value);
      }
    }
    Keyed totals = KeyedAt(total_path);
    std::vector<std::string> over;
    for (const auto& [key, sum] : sums) {
      auto total = totals.find(key);
      if (total == totals.end() || !total->second || *sum > *total->second) {
        over.push_back(fmt::format("{}: {} > {}", key, *sum,
                                   total == totals.end() ? "missing" : Shown(total->second)));
      }
    }
    Record(over.empty(), fmt::format("sum(threads[].{}) > {} at {}", field, total_path,
                                     absl::StrJoin(over, ", ")));
  };
  for (std::string_view side : {"logical", "real"}) {
    for (std::string_view field : kThreadLedgerFields) {
      std::string path = Path(side, field);
      at_most_total(path, path);
    }
    std::string by_api = Path(side, "by_api");
    keyed_at_most_total(by_api, by_api);
  }
  for (std::string_view field : kThreadPoolFields) {
    std::string path = Path("pool", field);
    at_most_total(path, path);
  }
  keyed_at_most_total("pool.misses", "pool.misses");
  // The pools cached at exit are those of the live threads, every one listed; an ended thread
  // lists 0.
  int64_t cached = 0;
  for (const json& thread : *threads) {
    const json* node = Find(thread, "pool.pools_cached");
    if (!IsInt(node)) return;
    cached += IntOf(*node);
  }
  Equal(Sum{{"sum(threads[].pool.pools_cached)", cached}}, Fields({"pool.pools_cached_at_exit"}));
}

void IdentityCheck::LeakCheck() {
  std::optional<Sum> parts =
      Fields({"leak_check.live_blocks", "-leak_check.live_at_start", "-leak_check.stdio_buffers"});
  std::optional<Sum> leaks = Fields({"leak_check.program_leak_blocks"});
  if (!parts || !leaks) return;
  // Each live block is in exactly one of the three; counted from the ledger (exact false) the rest
  // can come out negative, and is then 0.
  int64_t rest = Total(*parts);
  int64_t expected = rest > 0 ? rest : 0;
  Record(expected == Total(*leaks),
         fmt::format("max(0, {}) != {}", Describe(*parts), Describe(*leaks)));
}

// The identities between the two ledgers: only when the counters were read with no other thread
// counting.
void IdentityCheck::CrossLedger() {
  const bool off = PoolingOff();
  const json* enabled = Find(doc_, "pool.enabled");
  const json* pool = Find(doc_, "options.pool");
  const json* pool_size = Find(doc_, "options.pool_size");
  if (enabled != nullptr) {
    Record(
        *enabled == !off,
        fmt::format("pool.enabled = {} != {} (options.pool = {}, options.pool_size = {}: pooling "
                    "is off with pool=0 or a negative pool_size)",
                    Text(*enabled), !off, pool != nullptr ? Text(*pool) : "missing",
                    pool_size != nullptr ? Text(*pool_size) : "missing"));
  }
  if (off) {
    EqualFields({"real.allocs"}, {"logical.allocs"}, "pooling off");
    EqualFields({"real.frees"}, {"logical.frees"}, "pooling off");
    // Blocks of explicit arenas reach the real allocator through malloc when pooling is off.
    Keyed logical = KeyedAt("logical.by_api");
    bool arenas = false;
    for (const auto& [key, value] : logical) {
      arenas = arenas || (absl::StartsWith(key, "poolscope_arena_") && value.value_or(0) != 0);
    }
    if (!arenas) {
      Keyed real = KeyedAt("real.by_api");
      for (Keyed* side : {&logical, &real}) {
        for (auto it = side->begin(); it != side->end();) {
          it = absl::StartsWith(it->first, "poolscope_arena_") ? side->erase(it) : std::next(it);
        }
      }
      EqualKeyed("real.by_api", real, "logical.by_api", logical, "pooling off, no explicit arena");
    }
  } else {
    EqualFields({"real.allocs"},
                {"logical.allocs", "-pool.hits", "pool.pools_created", "pool.spills"},
                "pooling on");
  }
  // `balanced` compares the two ledgers: left out, as the others, when they were read mid-call.
  const json* balanced = Find(doc_, "reconciliation.balanced");
  const json* exact = Find(doc_, "process.counters_exact");
  if (balanced != nullptr && (exact == nullptr || *exact != false)) {
    Record(*balanced == true, fmt::format("reconciliation.balanced = {} != true", Text(*balanced)));
  }
  if (Find(doc_, "reconciliation.interrupted_by_fork") != nullptr) {
    EqualFields({"reconciliation.real_live_blocks"},
                {"reconciliation.unpooled_live_blocks", "reconciliation.pools_cached",
                 "reconciliation.pools_in_use", "reconciliation.interrupted_by_fork"});
  } else {
    EqualFields({"reconciliation.real_live_blocks"},
                {"reconciliation.unpooled_live_blocks", "reconciliation.pools_cached",
                 "reconciliation.pools_in_use"});
  }
}

// With every leak group listed, the groups hold at least logical.live_blocks blocks (more when
// the program freed blocks poolscope never handed out). A fork() child's table also holds blocks
// of threads fork() stopped: not checked there.
void IdentityCheck::LeakGroups() {
  const json* tracked = Find(doc_, "tracked");
  const json* forked_from = Find(doc_, "process.forked_from");
  if (tracked == nullptr || *tracked != true || Int("leak_groups_omitted") != 0 ||
      (forked_from != nullptr && !forked_from->is_null())) {
    return;
  }
  std::optional<int64_t> live = Int("logical.live_blocks");
  const json* leaks = Find(doc_, "leaks");
  if (!live || leaks == nullptr || !leaks->is_array()) return;
  int64_t grouped = 0;
  for (const json& group : *leaks) {
    const json* blocks = Find(group, "blocks");
    if (!IsInt(blocks)) return;
    grouped += IntOf(*blocks);
  }
  Record(grouped >= *live,
         fmt::format("sum(leaks[].blocks) = {} < logical.live_blocks = {} (tracked, every leak "
                     "group listed)",
                     grouped, *live));
}

// The verdict states the report's figures: the unfreed blocks, and, when pools hold some of the
// program's blocks, all the blocks the program leaves unfreed, which a reader would otherwise take
// to be only program_leak_blocks.
void IdentityCheck::Verdict() {
  std::optional<std::string> verdict = String(doc_, "reconciliation.detector_view.verdict");
  std::optional<int64_t> unfreed = Int("reconciliation.detector_view.unfreed_blocks");
  if (!verdict || !unfreed) return;
  auto plural = [](int64_t n) { return n == 1 ? "" : "s"; };
  std::string want = fmt::format("would see {} unfreed block{}", *unfreed, plural(*unfreed));
  Record(absl::StrContains(*verdict, want),
         fmt::format("reconciliation.detector_view.verdict does not say \"{}\" "
                     "(reconciliation.detector_view.unfreed_blocks = {}): \"{}\"",
                     want, *unfreed, *verdict));
  std::optional<int64_t> live = Int("logical.live_blocks");
  std::optional<int64_t> unpooled = Int("reconciliation.unpooled_live_blocks");
  std::optional<int64_t> pool_blocks = Int("reconciliation.detector_view.pool_blocks");
  std::optional<int64_t> pooled = Int("reconciliation.pooled_live_blocks");
  if (!pooled && live && unpooled) pooled = *live - *unpooled;
  if (!live || !pooled || !pool_blocks || *pool_blocks <= 0 || *pooled <= 0) return;
  want = fmt::format("{} more of the program's blocks, so the program leaves {} block{} unfreed",
                     *pooled, *live, plural(*live));
  Record(absl::StrContains(*verdict, want),
         fmt::format("reconciliation.detector_view.verdict does not say \"{}\" "
                     "(reconciliation.pooled_live_blocks = {}, logical.live_blocks = {}): \"{}\"",
                     want, *pooled, *live, *verdict));
}

CheckResult IdentityCheck::Run() {
  Ledgers();
  PoolCounts();
  Reconciliation();
  DetectorView();
  Internal();
  Timeline();
  Sizes();
  Threads();
  LeakCheck();
  // Read while other threads were allocating (a snapshot, or an exit with threads still running):
  // the two ledgers may differ by the calls in flight.
  const json* exact = Find(doc_, "process.counters_exact");
  if (exact == nullptr || *exact != false) {
    CrossLedger();
    LeakGroups();
    TimelineBytes();
    Verdict();
  }
  return std::move(result_);
}

}  // namespace

CheckResult CheckIdentities(const json& doc) { return IdentityCheck(doc).Run(); }

CheckResult CheckReport(const json& doc) {
  CheckResult result;
  result.broken = SchemaProblems(doc);
  if (!result.broken.empty()) return result;
  return CheckIdentities(doc);
}

}  // namespace poolscope::report
