// File: report/text_report.cc
//
// See text_report.h. Sections, in order: process, totals, the two ledgers side by side (with
// by_api), the pool, the program's live blocks by reachability class (when the report has a scan),
// the reconciliation and the detector view with its verdicts, the leaks (lost groups first with
// their stacks, still reachable in one line; the largest groups by bytes in a report without a
// scan), errors. Every string taken from the report goes through OneLine() so that it
// cannot break the layout.
#include "report/text_report.h"

#include <algorithm>
#include <array>
#include <set>
#include <vector>

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/ledger_table.h"
#include "report/report_model.h"
#include "report/site_pinning.h"

namespace poolscope::report {
namespace {

using nlohmann::json;

// The by_api keys in the order of the schema; keys the report adds come after them.
constexpr const char* kApiOrder[] = {
    "malloc",  "calloc",   "realloc", "reallocarray", "posix_memalign",        "aligned_alloc",
    "memalign", "valloc",  "pvalloc", "free",         "new",                   "new[]",
    "delete",  "delete[]", "poolscope_arena_alloc",   "poolscope_arena_close",
};

std::string Heading(const std::string& title) { return fmt::format("\n{}\n", title); }

// "1 block (32 B)".
std::string BlocksAndBytes(std::optional<int64_t> blocks, std::optional<int64_t> bytes) {
  return fmt::format("{} block{} ({})", Thousands(blocks), blocks == 1 ? "" : "s", Bytes(bytes));
}

}  // namespace

int KindRank(const json& leak) {
  std::string kind = String(leak, "kind").value_or("");
  if (kind == "definitely_lost") return 0;
  if (kind == "indirectly_lost") return 1;
  if (kind == "possibly_lost") return 2;
  return 3;
}

std::vector<std::string> ApiKeys(const json& report) {
  std::vector<std::string> keys(std::begin(kApiOrder), std::end(kApiOrder));
  std::set<std::string> known(keys.begin(), keys.end());
  for (const char* ledger : {"logical.by_api", "real.by_api"}) {
    const json* by_api = Find(report, ledger);
    if (by_api == nullptr || !by_api->is_object()) continue;
    for (auto it = by_api->begin(); it != by_api->end(); ++it) {
      if (known.insert(it.key()).second) keys.push_back(it.key());
    }
  }
  return keys;
}

namespace {

std::string ProcessSection(const json& report, const std::string& path) {
  std::string out = fmt::format("poolscope report {}\n", OneLine(path));
  std::string argv;
  if (const json* args = Find(report, "process.argv"); args != nullptr && args->is_array()) {
    for (const json& arg : *args) {
      if (!argv.empty()) argv += ' ';
      argv += arg.is_string() ? OneLine(arg.get<std::string>()) : OneLine(arg.dump());
    }
  }
  out += fmt::format("process  pid {}  ppid {}  {}\n", Thousands(Count(report, "process.pid")),
                     Thousands(Count(report, "process.ppid")),
                     OneLine(String(report, "process.exe").value_or("(exe unknown)")));
  if (!argv.empty()) out += fmt::format("         argv: {}\n", argv);
  out += fmt::format("         ran {}", Seconds(WallSeconds(report)));
  if (std::optional<std::string> reason = String(report, "process.reason")) {
    out += fmt::format(", report written at {}", OneLine(*reason));
  }
  if (std::optional<int64_t> parent = Count(report, "process.forked_from")) {
    out += fmt::format(", child of fork() from pid {}", *parent);
  }
  out += "\n";
  if (const json* options = Find(report, "options"); options != nullptr && options->is_object()) {
    std::string line;
    for (auto it = options->begin(); it != options->end(); ++it) {
      std::string value =
          it->is_string() ? it->get<std::string>() : it->dump(-1, ' ', false,
                                                              json::error_handler_t::replace);
      line += fmt::format("{}{}={}", line.empty() ? "" : ":", it.key(), value);
    }
    out += fmt::format("         options {}\n", OneLine(line));
  }
  return out;
}

// The timeline's peaks, two lines: "  over time (N points): logical live peak X blocks at T s, real
// live peak Y at T s" and "  resident set peak Z at T s". Empty without a timeline of two points
// or more.
std::string TimelineLine(const json& report) {
  const json* points = Find(report, "timeline.points");
  if (points == nullptr || !points->is_array() || points->size() < 2) return std::string();
  auto peak_of = [&](const char* key) {
    std::optional<int64_t> peak, at;
    for (const json& p : *points) {
      std::optional<int64_t> v = Count(p, key), t = Count(p, "t_ms");
      if (v && t && (!peak || *v > *peak)) {
        peak = v;
        at = t;
      }
    }
    return std::pair{peak, at ? std::optional<double>(static_cast<double>(*at) / 1000) : std::nullopt};
  };
  auto [logical, logical_at] = peak_of("logical_live_blocks");
  auto [real, real_at] = peak_of("real_live_blocks");
  auto [rss, rss_at] = peak_of("rss_kib");
  std::string out =
      fmt::format("  over time ({} points): logical live peak {} blocks at {}, real live peak {} at {}\n",
                  points->size(), Thousands(logical), Seconds(logical_at), Thousands(real), Seconds(real_at));
  if (rss) out += fmt::format("  resident set peak {} at {}\n", Bytes(*rss * 1024), Seconds(rss_at));
  return out;
}

std::string TotalsSection(const json& report) {
  std::optional<int64_t> logical = Count(report, "logical.allocs");
  std::optional<int64_t> real = Count(report, "real.allocs");
  std::optional<int64_t> hits = Count(report, "pool.hits");
  std::string out = Heading("TOTALS");
  out += fmt::format("  {} logical allocations became {} real allocations", Thousands(logical),
                     Thousands(real));
  if (hits) out += fmt::format("; {} served from pools ({})", Thousands(hits), Percent(hits, logical));
  out += "\n";
  if (const json* threads = Find(report, "threads"); threads != nullptr && threads->is_array()) {
    int64_t ended = 0;
    for (const json& thread : *threads) ended += Bool(thread, "ended").value_or(false) ? 1 : 0;
    int64_t omitted = Count(report, "threads_omitted").value_or(0);
    out += fmt::format("  threads: {} ({} ended before exit{})\n",
                       Thousands(static_cast<int64_t>(threads->size()) + omitted),
                       Thousands(ended),
                       omitted > 0 ? fmt::format(", {} not listed", Thousands(omitted)) : "");
  }
  if (std::optional<double> share = Number(report, "sizes.share_at_or_below_pool_size")) {
    out += fmt::format("  requests at or below the pool size ({}): {:.1f}% of {}\n",
                       Bytes(Count(report, "sizes.pool_size")), *share * 100,
                       Thousands(Count(report, "sizes.total")));
  }
  out += TimelineLine(report);
  return out;
}

std::string LedgersSection(const json& report) {
  std::vector<std::array<std::string, 3>> rows = {
      {"allocs", Thousands(Count(report, "logical.allocs")), Thousands(Count(report, "real.allocs"))},
      {"frees", Thousands(Count(report, "logical.frees")), Thousands(Count(report, "real.frees"))},
      {"reallocs", Thousands(Count(report, "logical.reallocs")),
       Thousands(Count(report, "real.reallocs"))},
      {"bytes requested", Thousands(Count(report, "logical.bytes_requested")),
       Thousands(Count(report, "real.bytes_requested"))},
      {"live blocks at exit", Thousands(Count(report, "logical.live_blocks")),
       Thousands(Count(report, "real.live_blocks"))},
      {"live bytes at exit", Thousands(Count(report, "logical.live_bytes")),
       Thousands(Count(report, "real.live_bytes"))},
  };
  bool header_done = false;
  for (const std::string& key : ApiKeys(report)) {
    const json* logical_by_api = Find(report, "logical.by_api");
    const json* real_by_api = Find(report, "real.by_api");
    std::optional<int64_t> l = logical_by_api && logical_by_api->contains(key) ? Count((*logical_by_api)[key], "")
                                                        : std::nullopt;
    std::optional<int64_t> r = real_by_api && real_by_api->contains(key)
                                   ? Count((*real_by_api)[key], "")
                                   : std::nullopt;
    if (l.value_or(0) == 0 && r.value_or(0) == 0) continue;
    if (!header_done) {
      rows.push_back({"calls by entry point", "", ""});
      header_done = true;
    }
    rows.push_back({"  " + OneLine(key), Thousands(l), Thousands(r)});
  }
  size_t w0 = 0, w1 = 7, w2 = 4;
  for (const auto& row : rows) {
    w0 = std::max(w0, row[0].size());
    w1 = std::max(w1, row[1].size());
    w2 = std::max(w2, row[2].size());
  }
  std::string out = Heading("LEDGERS (logical: as the program asked; real: as the allocator below saw)");
  out += fmt::format("  {:<{}}  {:>{}}  {:>{}}\n", "", w0, "logical", w1, "real", w2);
  for (const auto& row : rows) {
    out += fmt::format("  {:<{}}  {:>{}}  {:>{}}\n", row[0], w0, row[1], w1, row[2], w2);
  }
  return out;
}

std::string PoolSection(const json& report) {
  std::string out = Heading("POOL");
  std::optional<bool> enabled = Bool(report, "pool.enabled");
  if (enabled.has_value() && !*enabled) {
    out += "  pooling off: every request went to the allocator below\n";
  }
  out += fmt::format("  pool size {}, {} pools per thread cache\n",
                     Bytes(Count(report, "pool.pool_size")),
                     Thousands(Count(report, "pool.pools_per_thread")));
  out += fmt::format("  hits {}", Thousands(Count(report, "pool.hits")));
  if (const json* misses = Find(report, "pool.misses"); misses != nullptr && misses->is_object()) {
    std::string list;
    int64_t total = 0;
    for (auto it = misses->begin(); it != misses->end(); ++it) {
      std::optional<int64_t> n = Count(*it, "");
      total += n.value_or(0);
      if (n.value_or(0) == 0) continue;
      list += fmt::format("{}{} {}", list.empty() ? "" : ", ", OneLine(it.key()), Thousands(n));
    }
    out += fmt::format(", misses {}{}", Thousands(total), list.empty() ? "" : " (" + list + ")");
  }
  out += "\n";
  out += fmt::format("  pools created {}, reused {}, released {}, reset in place {}\n",
                     Thousands(Count(report, "pool.pools_created")),
                     Thousands(Count(report, "pool.pools_reused")),
                     Thousands(Count(report, "pool.pools_released")),
                     Thousands(Count(report, "pool.resets_in_place")));
  out += fmt::format("  at exit: pools cached {}, in use {}; spills {}, absorbs {}\n",
                     Thousands(Count(report, "pool.pools_cached_at_exit")),
                     Thousands(Count(report, "pool.pools_in_use_at_exit")),
                     Thousands(Count(report, "pool.spills")),
                     Thousands(Count(report, "pool.absorbs")));
  return out;
}

std::string ReconciliationSection(const json& report) {
  std::string out = Heading("RECONCILIATION (real blocks live at exit)");
  std::optional<bool> balanced = Bool(report, "reconciliation.balanced");
  out += fmt::format("  {} real live = {} unpooled live + {} pools cached + {} pools in use: {}\n",
                     Thousands(Count(report, "reconciliation.real_live_blocks")),
                     Thousands(Count(report, "reconciliation.unpooled_live_blocks")),
                     Thousands(Count(report, "reconciliation.pools_cached")),
                     Thousands(Count(report, "reconciliation.pools_in_use")),
                     !balanced ? "n/a" : *balanced ? "balanced" : "NOT BALANCED");
  out += Heading("DETECTOR VIEW (what a malloc/free-counting leak checker below poolscope sees)");
  out += fmt::format("  {} unfreed blocks ({}): {} outside pools, {} pool blocks, {} internal\n",
                     Thousands(Count(report, "reconciliation.detector_view.unfreed_blocks")),
                     Bytes(Count(report, "reconciliation.detector_view.unfreed_bytes")),
                     Thousands(Count(report, "reconciliation.detector_view.program_leak_blocks")),
                     Thousands(Count(report, "reconciliation.detector_view.pool_blocks")),
                     Thousands(Count(report, "reconciliation.detector_view.internal_blocks")));
  out += fmt::format("  verdict: {}\n", Verdict(json::object(), report));
  constexpr std::string_view kDetector = "reconciliation.detector_view.reachability";
  if (Bool(report, "reconciliation.detector_view.reachability.scanned").value_or(false)) {
    auto figure = [&](std::string_view kind) {
      return BlocksAndBytes(ReachabilityBlocks(report, kDetector, kind),
                            ReachabilityBytes(report, kDetector, kind));
    };
    out += fmt::format(
        "  memcheck below poolscope reports {} lost blocks (definitely + indirectly)\n"
        "    definitely {}, indirectly {}, possibly {}, still reachable {}\n",
        Thousands(DetectorLostBlocks(report)), figure("definitely_lost"),
        figure("indirectly_lost"), figure("possibly_lost"), figure("still_reachable"));
    out += fmt::format("    the program's lost blocks it cannot see, in pools: {}\n",
                       BlocksAndBytes(Count(report, "reconciliation.detector_view.hidden_in_pools.blocks"),
                                      Count(report, "reconciliation.detector_view.hidden_in_pools.bytes")));
  }
  constexpr std::string_view kLsan = "reconciliation.detector_view.lsan";
  auto lsan_figure = [&](std::string_view what) {
    return BlocksAndBytes(Count(report, fmt::format("{}.{}.blocks", kLsan, what)),
                          Count(report, fmt::format("{}.{}.bytes", kLsan, what)));
  };
  if (Bool(report, "reconciliation.detector_view.lsan.scanned").value_or(false)) {
    out += fmt::format("  LeakSanitizer below poolscope reports {} leaked\n    direct {}, indirect {}\n",
                       lsan_figure("leaked"), lsan_figure("direct"), lsan_figure("indirect"));
    out += fmt::format("    the program's leaked blocks it cannot see, in pools: {}\n",
                       lsan_figure("hidden_in_pools"));
  } else if (std::optional<std::string> why = String(report, "reconciliation.detector_view.lsan.not_scanned_why")) {
    out += fmt::format("  LeakSanitizer below poolscope: not predicted ({})\n", OneLine(*why));
  }
  if (std::optional<std::string> sentence =
          String(report, "reconciliation.detector_view.reachability_verdict")) {
    out += fmt::format("  reachability verdict: {}\n", OneLine(*sentence));
  }
  return out;
}

void AppendStack(const json& stack, const std::string& indent, std::string* out) {
  if (!stack.is_array() || stack.empty()) {
    *out += indent + "(no stack recorded)\n";
    return;
  }
  for (const json& frame : stack) {
    std::string where = FrameWhere(frame);
    *out += fmt::format("{}{}{}{}\n", indent, FrameFunction(frame), where.empty() ? "" : "  ",
                        where);
  }
}

bool IsStillReachable(const json& leak) {
  return String(leak, "kind").value_or("") == "still_reachable";
}

// "definitely lost" for "definitely_lost".
std::string KindName(const std::string& kind) {
  std::string name = OneLine(kind);
  std::replace(name.begin(), name.end(), '_', ' ');
  return name;
}

// The report's leak groups carry a reachability class (or the report says a scan ran).
bool LeaksClassified(const json& report) {
  if (Bool(report, "reachability.scanned").value_or(false)) return true;
  const json* leaks = Find(report, "leaks");
  if (leaks == nullptr || !leaks->is_array()) return false;
  for (const json& leak : *leaks) {
    if (String(leak, "kind")) return true;
  }
  return false;
}

// One leak group's title line: "#1  definitely lost  32 B in 1 block, 1 in pools".
std::string LeakLine(const json& leak, size_t number) {
  std::optional<int64_t> blocks = Count(leak, "blocks");
  std::optional<std::string> kind = String(leak, "kind");
  std::optional<int64_t> pooled = Count(leak, "pooled_blocks");
  std::string in_pools;
  if (pooled.value_or(0) > 0) {
    in_pools = pooled == blocks ? ", all in pools" : fmt::format(", {} in pools", Thousands(pooled));
  }
  return fmt::format("  #{}  {}{} in {} block{}{}\n", number,
                     kind ? KindName(*kind) + "  " : std::string(), Bytes(Count(leak, "bytes")),
                     Thousands(blocks), blocks == 1 ? "" : "s", in_pools);
}

}  // namespace

std::string LoadedByPoolscopeClause(const json& report) {
  const json* loaded = Find(report, "reachability.loaded_by_poolscope");
  if (loaded == nullptr || !loaded->is_object()) return "";
  const int64_t blocks = Count(*loaded, "blocks").value_or(0);
  if (blocks <= 0) return "";
  std::string names;
  const json* objects = Find(*loaded, "objects");
  if (objects != nullptr && objects->is_array()) {
    for (const json& o : *objects) {
      if (o.is_string()) names += (names.empty() ? "" : ", ") + o.get<std::string>();
    }
  }
  return fmt::format("; {} block{} ({}) of them only because poolscope loaded {}", Thousands(blocks),
                     blocks == 1 ? "" : "s", Bytes(Count(*loaded, "bytes").value_or(0)),
                     names.empty() ? "objects the program does not use" : names);
}

namespace {

// Still reachable in one line: the class's totals and the innermost functions of its largest
// stacks.
std::string StillReachableLine(const json& report, const std::vector<const json*>& groups) {
  std::optional<int64_t> blocks = ReachabilityBlocks(report, "reachability", "still_reachable");
  std::optional<int64_t> bytes = ReachabilityBytes(report, "reachability", "still_reachable");
  if (!blocks) {
    // No totals in the report: add up the groups it lists.
    int64_t sum_blocks = 0, sum_bytes = 0;
    for (const json* group : groups) {
      sum_blocks += Count(*group, "blocks").value_or(0);
      sum_bytes += Count(*group, "bytes").value_or(0);
    }
    blocks = sum_blocks;
    bytes = sum_bytes;
  }
  std::string out = "  still reachable: " + BlocksAndBytes(blocks, bytes);
  if (!groups.empty()) {
    std::vector<const json*> sorted = groups;
    std::stable_sort(sorted.begin(), sorted.end(), [](const json* a, const json* b) {
      return Count(*a, "bytes").value_or(0) > Count(*b, "bytes").value_or(0);
    });
    std::string names;
    for (size_t i = 0; i < sorted.size() && i < 3; ++i) {
      const json* stack = Find(*sorted[i], "stack");
      std::string name = stack != nullptr && stack->is_array() && !stack->empty()
                             ? FrameFunction(stack->at(SiteFrame(*stack)))
                             : std::string("(no stack)");
      names += (names.empty() ? "" : ", ") + name;
    }
    out += fmt::format(" in {} stack{}; largest: {}", Thousands(static_cast<int64_t>(groups.size())),
                       groups.size() == 1 ? "" : "s", names);
  }
  return out + LoadedByPoolscopeClause(report) + "\n";
}

// Before a reachability scan existed: the largest groups by bytes.
std::string UnclassifiedLeaksSection(const json& report) {
  const json* leaks = Find(report, "leaks");
  size_t total = leaks != nullptr && leaks->is_array() ? leaks->size() : 0;
  std::string out = Heading(
      fmt::format("LARGEST LEAKS (live logical blocks at exit; {} of {} stacks, by bytes)",
                  std::min<size_t>(total, kLeaksShown), total));
  if (total == 0) return out + "  none\n";
  std::vector<const json*> sorted;
  for (const json& leak : *leaks) sorted.push_back(&leak);
  std::stable_sort(sorted.begin(), sorted.end(), [](const json* a, const json* b) {
    return Count(*a, "bytes").value_or(0) > Count(*b, "bytes").value_or(0);
  });
  for (size_t i = 0; i < sorted.size() && i < static_cast<size_t>(kLeaksShown); ++i) {
    out += LeakLine(*sorted[i], i + 1);
    const json* stack = Find(*sorted[i], "stack");
    AppendStack(stack ? *stack : json(), "      ", &out);
  }
  return out;
}

// Lost groups first (definitely, indirectly, then possibly lost, each by bytes), with their
// stacks; still reachable in one line.
std::string LeaksSection(const json& report) {
  if (!LeaksClassified(report)) return UnclassifiedLeaksSection(report);
  std::vector<const json*> lost, reachable;
  if (const json* leaks = Find(report, "leaks"); leaks != nullptr && leaks->is_array()) {
    for (const json& leak : *leaks) (IsStillReachable(leak) ? reachable : lost).push_back(&leak);
  }
  std::stable_sort(lost.begin(), lost.end(), [](const json* a, const json* b) {
    int rank_a = KindRank(*a), rank_b = KindRank(*b);
    if (rank_a != rank_b) return rank_a < rank_b;
    return Count(*a, "bytes").value_or(0) > Count(*b, "bytes").value_or(0);
  });
  std::string out = Heading(fmt::format(
      "LEAKS (live logical blocks at exit by reachability; {} of {} lost stacks, definitely and "
      "indirectly lost first)",
      std::min<size_t>(lost.size(), kLeaksShown), lost.size()));
  if (lost.empty()) out += "  no lost blocks\n";
  for (size_t i = 0; i < lost.size() && i < static_cast<size_t>(kLeaksShown); ++i) {
    out += LeakLine(*lost[i], i + 1);
    const json* stack = Find(*lost[i], "stack");
    AppendStack(stack ? *stack : json(), "      ", &out);
  }
  if (lost.size() > static_cast<size_t>(kLeaksShown)) {
    out += fmt::format("  ... {} more lost stacks\n",
                       Thousands(static_cast<int64_t>(lost.size()) - kLeaksShown));
  }
  out += StillReachableLine(report, reachable);
  return out;
}

// The program's live logical blocks by reachability class; nothing for a report written before
// the scan existed.
std::string ReachabilitySection(const json& report) {
  const json* reachability = Find(report, "reachability");
  if (reachability == nullptr || !reachability->is_object()) return "";
  std::string out = Heading("REACHABILITY (live logical blocks at exit, classified as memcheck does)");
  if (!Bool(*reachability, "scanned").value_or(false)) {
    std::optional<std::string> why = String(*reachability, "not_scanned_why");
    return out + fmt::format("  not scanned{}\n", why ? ": " + OneLine(*why) : "");
  }
  auto figure = [&](std::string_view kind) {
    return BlocksAndBytes(ReachabilityBlocks(report, "reachability", kind),
                          ReachabilityBytes(report, "reachability", kind));
  };
  std::optional<int64_t> lost_bytes;
  if (auto d = ReachabilityBytes(report, "reachability", "definitely_lost"),
      i = ReachabilityBytes(report, "reachability", "indirectly_lost");
      d && i) {
    lost_bytes = *d + *i;
  }
  out += fmt::format("  lost (definitely + indirectly): {}; definitely {}, indirectly {}\n",
                     BlocksAndBytes(LostBlocks(report), lost_bytes), figure("definitely_lost"),
                     figure("indirectly_lost"));
  out += fmt::format("  possibly lost {}, still reachable {}\n", figure("possibly_lost"),
                     figure("still_reachable"));
  out += fmt::format("  scanned {} of roots and {} of blocks in {} ms; threads stopped {}, not "
                     "stopped {}\n",
                     Bytes(Count(*reachability, "roots_bytes")),
                     Bytes(Count(*reachability, "heap_bytes_scanned")),
                     Thousands(Count(*reachability, "scan_ms")),
                     Thousands(Count(*reachability, "threads_stopped")),
                     Thousands(Count(*reachability, "threads_not_stopped")));
  return out;
}

std::string ErrorsSection(const json& report) {
  std::string out = Heading("ERRORS");
  out += fmt::format("  invalid frees {}, double frees {}\n",
                     Thousands(Count(report, "errors.invalid_frees")),
                     Thousands(Count(report, "errors.double_frees")));
  const json* cases = Find(report, "errors.cases");
  if (cases == nullptr || !cases->is_array()) return out;
  int shown = 0;
  for (const json& error_case : *cases) {
    if (++shown > kLeaksShown) {
      out += fmt::format("  ... {} more\n", Thousands(static_cast<int64_t>(cases->size()) -
                                                       kLeaksShown));
      break;
    }
    std::string kind = OneLine(String(error_case, "kind").value_or("error"));
    std::optional<int64_t> count = Count(error_case, "count");
    std::optional<std::string> address = String(error_case, "address");
    out += fmt::format("  {}{}{}\n", kind, address ? " of " + OneLine(*address) : "",
                       count ? fmt::format(" ({} time{})", Thousands(count), *count == 1 ? "" : "s") : "");
    const json* stack = Find(error_case, "stack");
    AppendStack(stack ? *stack : json(), "      ", &out);
  }
  return out;
}

// The call sites that allocate most, as a table, each with its site frame (stack_frames.h) below it.
std::string SitesSection(const json& report) {
  const json* sites = Find(report, "sites");
  size_t total = sites != nullptr && sites->is_array() ? sites->size() : 0;
  std::vector<SiteRow> rows = TopSites(report, kSitesShown);
  std::string out = Heading(fmt::format("CALL SITES (top {} of {} by logical allocations; pooled = "
                                        "served from pools)",
                                        rows.size(), total));
  if (rows.empty()) return out + "  none recorded\n";
  std::vector<std::array<std::string, 6>> cells = {
      {"#", "logical", "pooled", "real", "bytes", "live at exit"}};
  for (size_t i = 0; i < rows.size(); ++i) {
    const SiteRow& row = rows[i];
    cells.push_back({fmt::format("#{}", i + 1), Thousands(row.logical_allocs),
                     Thousands(row.pool_hits), Thousands(row.real_allocs), Bytes(row.bytes),
                     BlocksAndBytes(row.live_blocks, row.live_bytes)});
  }
  std::array<size_t, 6> width{};
  for (const auto& line : cells) {
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  }
  for (size_t r = 0; r < cells.size(); ++r) {
    const auto& line = cells[r];
    out += fmt::format("  {:>{}}  {:>{}}  {:>{}}  {:>{}}  {:>{}}  {:>{}}\n", line[0], width[0],
                       line[1], width[1], line[2], width[2], line[3], width[3], line[4], width[4],
                       line[5], width[5]);
    // Named by the code that asked for the block, glibc's frames between it and the allocator
    // left out (the function it called into libc is named after it).
    if (r != 0) out += "      " + SiteLine(rows[r - 1]) + "\n";
  }
  if (total > rows.size()) {
    out += fmt::format("  ... {} more sites\n", Thousands(static_cast<int64_t>(total - rows.size())));
  }
  return out;
}

std::string FoldedFrame(const json& frame) {
  std::string name = FrameFunction(frame);
  // flamegraph.pl splits frames on ';' and the count on the last space.
  std::replace(name.begin(), name.end(), ';', ':');
  return name;
}

}  // namespace

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? INT64_MAX : INT64_MIN;
  return sum;
}

std::string SiteLine(const SiteRow& row) {
  if (row.stack == nullptr || !row.stack->is_array() || row.stack->empty()) return "(no stack recorded)";
  const json& frame = row.stack->at(SiteFrame(*row.stack));
  const std::string where = FrameWhere(frame);
  const std::string via = SiteVia(*row.stack);
  return FrameFunction(frame) + (where.empty() ? "" : "  " + where) + (via.empty() ? "" : "  (via " + via + ")");
}

std::vector<SiteRow> TopSites(const json& report, size_t limit) {
  std::vector<SiteRow> rows;
  const json* sites = Find(report, "sites");
  if (sites == nullptr || !sites->is_array()) return rows;
  const json* leaks = Find(report, "leaks");
  for (const json& site : *sites) {
    SiteRow row;
    row.stack = Find(site, "stack");
    row.logical_allocs = Count(site, "logical_allocs").value_or(0);
    row.pool_hits = Count(site, "pool_hits").value_or(0);
    row.real_allocs = Count(site, "real_allocs").value_or(0);
    row.bytes = Count(site, "bytes").value_or(0);
    row.pools_pinned = Count(site, "pools_pinned").value_or(0);
    row.pinned_bytes = Count(site, "pinned_bytes").value_or(0);
    // (A report without peak figures: the exit's stand for them.)
    row.peak_pools_pinned = Count(site, "peak_pools_pinned").value_or(row.pools_pinned);
    row.peak_pinned_bytes = Count(site, "peak_pinned_bytes").value_or(row.pinned_bytes);
    if (row.stack != nullptr && leaks != nullptr && leaks->is_array()) {
      for (const json& leak : *leaks) {
        const json* stack = Find(leak, "stack");
        if (stack != nullptr && *stack == *row.stack) {
          row.live_blocks = SaturatingAdd(row.live_blocks, Count(leak, "blocks").value_or(0));
          row.live_bytes = SaturatingAdd(row.live_bytes, Count(leak, "bytes").value_or(0));
        }
      }
    }
    rows.push_back(row);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const SiteRow& a, const SiteRow& b) {
    if (a.logical_allocs != b.logical_allocs) return a.logical_allocs > b.logical_allocs;
    return a.bytes > b.bytes;
  });
  if (rows.size() > limit) rows.resize(limit);
  return rows;
}

std::string TextReport(const json& report, const std::string& path) {
  std::string page = ProcessSection(report, path) + TotalsSection(report) +
                     LedgersSection(report) + PoolSection(report) +
                     ReachabilitySection(report) + ReconciliationSection(report) +
                     SitesSection(report) + PinningTextSection(report) + LeaksSection(report) + ErrorsSection(report);
  // Drop the spaces that column padding leaves at the ends of lines.
  std::string out;
  size_t start = 0;
  while (start < page.size()) {
    size_t end = page.find('\n', start);
    if (end == std::string::npos) end = page.size();
    std::string line = page.substr(start, end - start);
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
    start = end + 1;
  }
  return out;
}

std::string FoldedStacks(const json& report) {
  std::string out;
  const json* leaks = Find(report, "leaks");
  if (leaks == nullptr || !leaks->is_array()) return out;
  for (const json& leak : *leaks) {
    std::string line;
    const json* stack = Find(leak, "stack");
    if (stack != nullptr && stack->is_array()) {
      // The report lists the innermost frame first; flamegraph.pl wants the outermost first.
      for (auto it = stack->rbegin(); it != stack->rend(); ++it) {
        line += (line.empty() ? "" : ";") + FoldedFrame(*it);
      }
    }
    if (line.empty()) line = "[no stack]";
    out += fmt::format("{} {}\n", line, Count(leak, "bytes").value_or(0));
  }
  return out;
}

std::string PrettyJson(const json& report) {
  return report.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace poolscope::report
