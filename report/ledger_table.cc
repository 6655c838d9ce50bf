// File: report/ledger_table.cc
//
// See ledger_table.h. The row list is the contract of `compare` (docs/cli.md): logical allocations,
// real allocations and frees, real blocks live at exit, the program's lost and possibly lost blocks
// (from `reachability`), the detector view (its lost blocks, its unfreed blocks and their split),
// pool figures, wall time and peak RSS. A figure a report lacks prints "n/a".
#include "report/ledger_table.h"

#include <algorithm>
#include <vector>

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/report_model.h"

namespace poolscope::report {
namespace {

using nlohmann::json;

using Row = LedgerRow;

Row CountRow(const std::string& label, const json& before, const json& after,
             std::string_view path) {
  std::optional<int64_t> a = Count(before, path);
  std::optional<int64_t> b = Count(after, path);
  return {label, Thousands(a), Thousands(b), Change(a, b)};
}

std::optional<double> WallOf(const json& report, const RunFacts& facts) {
  return facts.wall_seconds ? facts.wall_seconds : WallSeconds(report);
}

std::optional<int64_t> RssOf(const json& report, const RunFacts& facts) {
  if (facts.peak_rss_kib) return facts.peak_rss_kib;
  // Not part of schema 1; read it when a report carries it.
  return Count(report, "process.max_rss_kib");
}

std::string Rss(std::optional<int64_t> kib) {
  return kib ? Bytes(*kib * 1024) : std::string("n/a");
}

std::string RssChange(std::optional<int64_t> before, std::optional<int64_t> after) {
  if (!before || !after) return "n/a";
  int64_t delta = (*after - *before) * 1024;
  std::string out = (delta > 0 ? "+" : "") + Bytes(delta);
  if (*before > 0) {
    out += fmt::format(" ({}{:.1f}%)", delta > 0 ? "+" : "",
                       100.0 * static_cast<double>(*after - *before) / static_cast<double>(*before));
  }
  return out;
}

}  // namespace

std::optional<int64_t> ProgramLeakBlocks(const json& report) {
  return Count(report, "reconciliation.detector_view.program_leak_blocks");
}

namespace {

std::optional<int64_t> ReachabilityFigure(const json& report, std::string_view object_path,
                                          std::string_view kind, std::string_view unit) {
  const json* object = Find(report, object_path);
  if (object == nullptr || !object->is_object()) return std::nullopt;
  if (!Bool(*object, "scanned").value_or(false)) return std::nullopt;
  const json* figures = Find(*object, kind);
  if (figures == nullptr) return std::nullopt;
  return Count(*figures, unit);
}

std::optional<int64_t> Sum(std::optional<int64_t> a, std::optional<int64_t> b) {
  if (!a || !b) return std::nullopt;
  return *a + *b;
}

}  // namespace

std::optional<int64_t> ReachabilityBlocks(const json& report, std::string_view object_path,
                                          std::string_view kind) {
  return ReachabilityFigure(report, object_path, kind, "blocks");
}

std::optional<int64_t> ReachabilityBytes(const json& report, std::string_view object_path,
                                         std::string_view kind) {
  return ReachabilityFigure(report, object_path, kind, "bytes");
}

std::optional<int64_t> LostBlocks(const json& report) {
  return Sum(ReachabilityBlocks(report, "reachability", "definitely_lost"),
             ReachabilityBlocks(report, "reachability", "indirectly_lost"));
}

std::optional<int64_t> DetectorLostBlocks(const json& report) {
  constexpr std::string_view kDetector = "reconciliation.detector_view.reachability";
  return Sum(ReachabilityBlocks(report, kDetector, "definitely_lost"),
             ReachabilityBlocks(report, kDetector, "indirectly_lost"));
}

std::string Verdict(const json& before, const json& after) {
  std::optional<std::string> given = String(after, "reconciliation.detector_view.verdict");
  if (given && !given->empty()) return OneLine(*given);
  std::optional<int64_t> unfreed = Count(after, "reconciliation.detector_view.unfreed_blocks");
  std::optional<int64_t> leaks = ProgramLeakBlocks(after);
  std::optional<int64_t> pools = Count(after, "reconciliation.detector_view.pool_blocks");
  std::optional<int64_t> leaks_before = ProgramLeakBlocks(before);
  if (!unfreed || !leaks || !pools) {
    return "The report carries no detector view, so poolscope cannot say what a leak detector "
           "would see.";
  }
  (void)leaks_before;
  if (*pools == 0) {
    return fmt::format(
        "A malloc/free-counting leak detector would see {} unfreed blocks, all of them outside "
        "pools: poolscope holds no pool at exit.",
        Thousands(unfreed));
  }
  // As a single run's verdict says it: the pools are not leaks, and what the program leaves unfreed
  // is what it would leave without pooling (the blocks outside pools fall only because the pools
  // hold the rest).
  std::optional<int64_t> pooled = Count(after, "reconciliation.pooled_live_blocks");
  std::optional<int64_t> live = Count(after, "logical.live_blocks");
  const std::string hold =
      pooled && live
          ? fmt::format(", which are not leaks themselves but hold {} more of the program's blocks, so "
                        "the program leaves {} blocks unfreed, as it would without pooling",
                        Thousands(pooled), Thousands(live))
          : std::string(", which are not leaks themselves");
  return fmt::format(
      "A malloc/free-counting leak detector would see {} unfreed blocks: {} outside pools and {} "
      "poolscope pools (cached or in use at exit){}.",
      Thousands(unfreed), Thousands(leaks), Thousands(pools), hold);
}

std::vector<LedgerRow> LedgerRows(const json& before, const RunFacts& before_facts, const json& after,
                                  const RunFacts& after_facts) {
  auto figure_row = [](const std::string& label, std::optional<int64_t> a,
                       std::optional<int64_t> b) {
    return Row{label, Thousands(a), Thousands(b), Change(a, b)};
  };
  std::vector<Row> rows = {
      CountRow("logical allocations", before, after, "logical.allocs"),
      CountRow("real allocations", before, after, "real.allocs"),
      CountRow("real frees", before, after, "real.frees"),
      CountRow("real blocks live at exit", before, after, "real.live_blocks"),
      // The program's own lost blocks: the headline, which pooling does not change.
      figure_row("lost blocks (definitely + indirectly)", LostBlocks(before), LostBlocks(after)),
      figure_row("possibly lost blocks",
                 ReachabilityBlocks(before, "reachability", "possibly_lost"),
                 ReachabilityBlocks(after, "reachability", "possibly_lost")),
      figure_row("detector view: lost blocks (below poolscope)", DetectorLostBlocks(before),
                 DetectorLostBlocks(after)),
      CountRow("detector view: unfreed blocks", before, after,
               "reconciliation.detector_view.unfreed_blocks"),
      CountRow("  of which outside pools", before, after,
               "reconciliation.detector_view.program_leak_blocks"),
      CountRow("  of which pool blocks", before, after,
               "reconciliation.detector_view.pool_blocks"),
      CountRow("pool hits", before, after, "pool.hits"),
      CountRow("pools created", before, after, "pool.pools_created"),
      CountRow("pools reused", before, after, "pool.pools_reused"),
      CountRow("pools cached at exit", before, after, "pool.pools_cached_at_exit"),
  };
  std::optional<double> wall_a = WallOf(before, before_facts);
  std::optional<double> wall_b = WallOf(after, after_facts);
  rows.push_back({"wall time", Seconds(wall_a), Seconds(wall_b), SecondsChange(wall_a, wall_b)});
  // What of it is poolscope's own bookkeeping (its mappings' resident pages, peak sampled), so that a
  // reader can subtract it from pooling's effect.
  auto kib = [](const json& report, std::string_view path) -> std::optional<int64_t> {
    std::optional<int64_t> bytes = Count(report, path);
    if (!bytes) return std::nullopt;
    return *bytes / 1024;
  };
  auto rss_rows = [&](const std::string& label, std::optional<int64_t> rss_a, std::optional<int64_t> rss_b,
                      std::string_view own_path, const std::string& own_label) {
    rows.push_back({label, Rss(rss_a), Rss(rss_b), RssChange(rss_a, rss_b)});
    std::optional<int64_t> own_a = kib(before, own_path), own_b = kib(after, own_path);
    rows.push_back({own_label, Rss(own_a), Rss(own_b), RssChange(own_a, own_b)});
  };
  if (Find(before, "tree") != nullptr && Find(after, "tree") != nullptr) {
    // A tree: its largest process, and the sum over its processes, each with its own memory of the
    // same scope.
    rss_rows("peak RSS (largest process)", Count(before, "tree.largest_max_rss_kib"),
             Count(after, "tree.largest_max_rss_kib"), "tree.largest_peak_resident_bytes",
             "  of which poolscope's own memory (peak)");
    rss_rows("peak RSS (sum over processes)", Count(before, "tree.sum_max_rss_kib"),
             Count(after, "tree.sum_max_rss_kib"), "internal.peak_resident_bytes",
             "  of which poolscope's own memory (sum)");
  } else {
    rss_rows("peak RSS", RssOf(before, before_facts), RssOf(after, after_facts), "internal.peak_resident_bytes",
             "  of which poolscope's own memory (peak)");
  }

  return rows;
}

std::string LedgerTable(const json& before, const RunFacts& before_facts, const json& after,
                        const RunFacts& after_facts, const std::string& before_label,
                        const std::string& after_label) {
  const std::vector<LedgerRow> rows = LedgerRows(before, before_facts, after, after_facts);
  size_t w0 = 0, w1 = before_label.size(), w2 = after_label.size(), w3 = 6;
  for (const Row& row : rows) {
    w0 = std::max(w0, row.label.size());
    w1 = std::max(w1, row.before.size());
    w2 = std::max(w2, row.after.size());
    w3 = std::max(w3, row.change.size());
  }
  std::string out;
  out += fmt::format("{:<{}}  {:>{}}  {:>{}}  {}\n", "", w0, before_label, w1, after_label, w2,
                     "change");
  out += fmt::format("{}  {}  {}  {}\n", std::string(w0, '-'), std::string(w1, '-'),
                     std::string(w2, '-'), std::string(w3, '-'));
  for (const Row& row : rows) {
    out += fmt::format("{:<{}}  {:>{}}  {:>{}}  {}\n", row.label, w0, row.before, w1, row.after,
                       w2, row.change);
  }
  out += "\n";
  out += Verdict(before, after);
  out += "\n";
  return out;
}

}  // namespace poolscope::report
