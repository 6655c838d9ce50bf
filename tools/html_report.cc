// File: tools/html_report.cc
//
// See html_report.h. The charts are drawn by hand as SVG with fixed sizes (a page 1100 px wide);
// the scales are linear and every bar carries its figure, so a bar too short to see still reads.
#include "tools/html_report.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "tools/format_util.h"
#include "tools/ledger_table.h"
#include "tools/report_model.h"
#include "tools/text_report.h"

namespace poolscope::tools {
namespace {

using nlohmann::json;

constexpr const char* kLogicalColor = "#3b6fb6";
constexpr const char* kRealColor = "#e07b28";
constexpr const char* kLeakColor = "#c0392b";
constexpr const char* kCachedColor = "#2e8b57";
constexpr const char* kInUseColor = "#8fbc8f";

constexpr const char* kStyle = R"css(
body { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; color: #1d2330;
       background: #ffffff; margin: 0; }
main { max-width: 1100px; margin: 0 auto; padding: 20px 24px 40px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #d5d9e0; padding-bottom: 4px; }
p.meta { color: #555f70; margin: 2px 0; font-size: 13px; word-break: break-all; }
.verdict { background: #f3f6fb; border-left: 4px solid #3b6fb6; padding: 10px 14px; margin: 14px 0;
           font-size: 15px; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; margin: 12px 0; }
.card { border: 1px solid #d5d9e0; border-radius: 6px; padding: 8px 14px; flex: 1 1 0; }
.card .n { font-size: 22px; font-weight: bold; }
.card .l { font-size: 12px; color: #555f70; }
.cards.detector .card { background: #f7f8fa; }
.cards.detector .n { font-size: 18px; color: #555f70; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #e6e9ee; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
td.stack { font-family: "DejaVu Sans Mono", monospace; font-size: 12px; }
td.stack span.where { color: #6b7486; }
.ok { color: #2e7d32; font-weight: bold; }
.bad { color: #c0392b; font-weight: bold; }
svg text { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; font-size: 12px;
           fill: #1d2330; }
.charts { display: flex; gap: 24px; flex-wrap: wrap; }
)css";

std::string E(const std::string& text) { return HtmlEscape(text); }

// A bucket bound in few characters: "64", "2K", "1M".
std::string ShortSize(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{}K", bytes >> 10);
  return std::to_string(bytes);
}

std::string Card(const std::string& number, const std::string& label) {
  return fmt::format("<div class=\"card\"><div class=\"n\">{}</div><div class=\"l\">{}</div></div>\n",
                     E(number), E(label));
}

// Grouped horizontal bars: for each measure, a logical and a real bar.
std::string LedgerChart(const json& report) {
  struct Measure {
    const char* label;
    std::optional<int64_t> logical;
    std::optional<int64_t> real;
  };
  std::vector<Measure> measures = {
      {"allocations", Count(report, "logical.allocs"), Count(report, "real.allocs")},
      {"frees", Count(report, "logical.frees"), Count(report, "real.frees")},
      {"live blocks at exit", Count(report, "logical.live_blocks"),
       Count(report, "real.live_blocks")},
  };
  int64_t max_value = 1;
  for (const Measure& m : measures) {
    max_value = std::max({max_value, m.logical.value_or(0), m.real.value_or(0)});
  }
  const int width = 520, left = 140, bar_width = 290, bar_height = 18, group_height = 58, top = 30;
  int height = top + group_height * static_cast<int>(measures.size()) + 10;
  std::string svg = fmt::format(
      "<svg width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "role=\"img\" aria-label=\"logical and real ledgers\">\n",
      width, height);
  svg += fmt::format("<rect x=\"{}\" y=\"6\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                     "<text x=\"{}\" y=\"16\">logical (program)</text>\n",
                     left, kLogicalColor, left + 16);
  svg += fmt::format("<rect x=\"{}\" y=\"6\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                     "<text x=\"{}\" y=\"16\">real (allocator below)</text>\n",
                     left + 150, kRealColor, left + 166);
  int y = top;
  for (const Measure& m : measures) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 8,
                       y + bar_height + 4, E(m.label));
    int row = 0;
    for (auto [value, color] : {std::pair{m.logical, kLogicalColor}, std::pair{m.real, kRealColor}}) {
      int by = y + row * (bar_height + 4);
      double w = value ? static_cast<double>(bar_width) * static_cast<double>(*value) /
                             static_cast<double>(max_value)
                       : 0;
      if (value && *value > 0) w = std::max(w, 1.5);
      svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>"
                         "<text x=\"{:.1f}\" y=\"{}\">{}</text>\n",
                         left, by, w, bar_height, color, left + w + 6, by + 13,
                         E(Thousands(value)));
      ++row;
    }
    y += group_height;
  }
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#8a93a3\"/>\n", left,
                     top - 4, height - 8);
  return svg + "</svg>\n";
}

// Vertical bars per size bucket, with a dashed line at the pool size.
std::string SizeChart(const json& report) {
  const json* buckets = Find(report, "sizes.buckets");
  std::vector<std::pair<int64_t, int64_t>> bars;  // (le, count)
  if (buckets != nullptr && buckets->is_array()) {
    for (const json& bucket : *buckets) {
      std::optional<int64_t> le = Count(bucket, "le");
      if (le) bars.emplace_back(*le, Count(bucket, "count").value_or(0));
    }
  }
  std::sort(bars.begin(), bars.end());
  const int width = 540, height = 262, left = 70, bottom = 200, top = 30, plot_width = 450;
  std::string svg = fmt::format(
      "<svg width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "role=\"img\" aria-label=\"request sizes\">\n",
      width, height);
  if (bars.empty()) {
    return svg + "<text x=\"20\" y=\"40\">This report has no size histogram.</text>\n</svg>\n";
  }
  int64_t max_count = 1;
  for (const auto& bar : bars) max_count = std::max(max_count, bar.second);
  double slot = static_cast<double>(plot_width) / static_cast<double>(bars.size());
  double bar_w = std::max(2.0, slot * 0.75);
  for (size_t i = 0; i < bars.size(); ++i) {
    double h = static_cast<double>(bottom - top) * static_cast<double>(bars[i].second) /
               static_cast<double>(max_count);
    if (bars[i].second > 0) h = std::max(h, 1.5);
    double x = left + slot * static_cast<double>(i) + (slot - bar_w) / 2;
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
                       "fill=\"{}\"><title>&lt;= {} B: {}</title></rect>\n",
                       x, bottom - h, bar_w, h, kLogicalColor, bars[i].first,
                       E(Thousands(bars[i].second)));
    if (bars.size() <= 24) {
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" "
                         "font-size=\"10\">{}</text>\n",
                         x + bar_w / 2, bottom + 14, E(ShortSize(bars[i].first)));
    }
  }
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#8a93a3\"/>\n", left,
                     bottom, left + plot_width);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 6, top + 4,
                     E(Thousands(max_count)));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text>\n", left - 6, bottom);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">request size in bytes "
                     "(bucket upper bound)</text>\n",
                     left + plot_width / 2, bottom + 32);
  std::optional<int64_t> pool_size = Count(report, "sizes.pool_size");
  if (!pool_size) pool_size = Count(report, "pool.pool_size");
  if (pool_size && *pool_size > 0) {
    // The marker sits at the right edge of the bucket that ends at the pool size, or between
    // the two buckets around it.
    double x = left + plot_width;
    int64_t previous = 0;
    for (size_t i = 0; i < bars.size(); ++i) {
      if (bars[i].first >= *pool_size) {
        double fraction = static_cast<double>(*pool_size - previous) /
                          static_cast<double>(std::max<int64_t>(1, bars[i].first - previous));
        x = left + slot * (static_cast<double>(i) + fraction);
        break;
      }
      previous = bars[i].first;
    }
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"{3}\" "
                       "stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n",
                       x, top - 14, bottom, kLeakColor);
    bool right_side = x < left + plot_width * 0.6;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"{}\" fill=\"{}\">pool size {}"
                       "</text>\n",
                       x + (right_side ? 6 : -6), top - 4, right_side ? "start" : "end", kLeakColor,
                       E(Bytes(pool_size)));
  }
  if (std::optional<double> share = Number(report, "sizes.share_at_or_below_pool_size")) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{:.1f}% of requests at or below the pool size</text>\n",
                       left, height - 4, *share * 100);
  }
  return svg + "</svg>\n";
}

// One stacked bar: program leaks, pools cached, pools in use.
std::string LiveChart(const json& report) {
  struct Part {
    const char* label;
    int64_t value;
    const char* color;
  };
  std::vector<Part> parts = {
      {"program leaks",
       Count(report, "reconciliation.detector_view.program_leak_blocks")
           .value_or(Count(report, "reconciliation.unpooled_live_blocks").value_or(0)),
       kLeakColor},
      {"pools cached", Count(report, "reconciliation.pools_cached").value_or(0), kCachedColor},
      {"pools in use", Count(report, "reconciliation.pools_in_use").value_or(0), kInUseColor},
  };
  int64_t total = 0;
  for (const Part& p : parts) total += std::max<int64_t>(0, p.value);
  const int width = 1050, height = 90, left = 10, bar_width = 1000;
  std::string svg = fmt::format(
      "<svg width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "role=\"img\" aria-label=\"real blocks live at exit by kind\">\n",
      width, height);
  double x = left;
  if (total == 0) {
    svg += fmt::format("<rect x=\"{}\" y=\"10\" width=\"{}\" height=\"30\" fill=\"#eef0f4\"/>"
                       "<text x=\"{}\" y=\"30\">no real blocks live at exit</text>\n",
                       left, bar_width, left + 10);
  }
  for (const Part& p : parts) {
    if (total == 0 || p.value <= 0) continue;
    double w = static_cast<double>(bar_width) * static_cast<double>(p.value) /
               static_cast<double>(total);
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"10\" width=\"{:.1f}\" height=\"30\" fill=\"{}\">"
                       "<title>{}: {}</title></rect>\n",
                       x, w, p.color, E(p.label), E(Thousands(p.value)));
    x += w;
  }
  int lx = left;
  for (const Part& p : parts) {
    svg += fmt::format("<rect x=\"{}\" y=\"56\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                       "<text x=\"{}\" y=\"66\">{}: {}</text>\n",
                       lx, p.color, lx + 16, E(p.label), E(Thousands(p.value)));
    lx += 260;
  }
  return svg + "</svg>\n";
}

std::string LedgerTableHtml(const json& report) {
  std::string rows;
  auto row = [&](const std::string& label, std::string_view field) {
    rows += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
                        E(label), E(Thousands(Count(report, fmt::format("logical.{}", field)))),
                        E(Thousands(Count(report, fmt::format("real.{}", field)))));
  };
  row("allocations", "allocs");
  row("frees", "frees");
  row("reallocs", "reallocs");
  row("bytes requested", "bytes_requested");
  row("live blocks at exit", "live_blocks");
  row("live bytes at exit", "live_bytes");
  const json* logical_api = Find(report, "logical.by_api");
  const json* real_api = Find(report, "real.by_api");
  for (const std::string& key : ApiKeys(report)) {
    std::optional<int64_t> l =
        logical_api && logical_api->is_object() && logical_api->contains(key)
            ? Count(logical_api->at(key), "")
            : std::nullopt;
    std::optional<int64_t> r = real_api && real_api->is_object() && real_api->contains(key)
                                   ? Count(real_api->at(key), "")
                                   : std::nullopt;
    if (l.value_or(0) == 0 && r.value_or(0) == 0) continue;
    rows += fmt::format(
        "<tr><td>&nbsp;&nbsp;calls to <code>{}</code></td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td></tr>\n",
        E(key), E(Thousands(l)), E(Thousands(r)));
  }
  return "<table><tr><th></th><th class=\"n\">logical</th><th class=\"n\">real</th></tr>\n" + rows +
         "</table>\n";
}

// A leak group's reachability class as words ("definitely lost"), or "" when none is recorded.
std::string KindName(const json& leak) {
  std::string kind = String(leak, "kind").value_or("");
  std::replace(kind.begin(), kind.end(), '_', ' ');
  return kind;
}

// Definitely, indirectly, possibly lost, no class recorded; still reachable is not listed.
int KindRank(const json& leak) {
  std::string kind = String(leak, "kind").value_or("");
  if (kind == "definitely_lost") return 0;
  if (kind == "indirectly_lost") return 1;
  if (kind == "possibly_lost") return 2;
  return 3;
}

std::string StackCell(const json& leak) {
  std::string stack;
  const json* frames = Find(leak, "stack");
  if (frames != nullptr && frames->is_array()) {
    for (const json& frame : *frames) {
      std::string where = FrameWhere(frame);
      stack += E(FrameFunction(frame));
      if (!where.empty()) stack += " <span class=\"where\">" + E(where) + "</span>";
      stack += "<br>\n";
    }
  }
  return stack.empty() ? "(no stack recorded)" : stack;
}

// The lost groups (definitely and indirectly lost first, then possibly lost, each by bytes; in a
// report without a scan, every group by bytes), then still reachable in one line.
std::string LeakTable(const json& report) {
  const json* leaks = Find(report, "leaks");
  if (leaks == nullptr || !leaks->is_array() || leaks->empty()) {
    return "<p>No live logical blocks at exit.</p>\n";
  }
  std::vector<const json*> sorted, reachable;
  for (const json& leak : *leaks) {
    (String(leak, "kind").value_or("") == "still_reachable" ? reachable : sorted).push_back(&leak);
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const json* a, const json* b) {
    int rank_a = KindRank(*a), rank_b = KindRank(*b);
    if (rank_a != rank_b) return rank_a < rank_b;
    return Count(*a, "bytes").value_or(0) > Count(*b, "bytes").value_or(0);
  });
  std::string out;
  if (sorted.empty()) {
    out += "<p>No lost blocks.</p>\n";
  } else {
    out += "<table><tr><th class=\"n\">#</th><th>kind</th><th class=\"n\">bytes</th>"
           "<th class=\"n\">blocks</th><th class=\"n\">in pools</th>"
           "<th>allocation stack (innermost first)</th></tr>\n";
  }
  for (size_t i = 0; i < sorted.size() && i < static_cast<size_t>(kLeaksShown); ++i) {
    const json& leak = *sorted[i];
    std::optional<int64_t> pooled = Count(leak, "pooled_blocks");
    out += fmt::format("<tr><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td>"
                       "<td class=\"n\">{}</td><td class=\"n\">{}</td>"
                       "<td class=\"stack\">{}</td></tr>\n",
                       i + 1, E(KindName(leak)), E(Thousands(Count(leak, "bytes"))),
                       E(Thousands(Count(leak, "blocks"))),
                       pooled ? E(Thousands(pooled)) : std::string(), StackCell(leak));
  }
  if (!sorted.empty()) out += "</table>\n";
  if (sorted.size() > static_cast<size_t>(kLeaksShown)) {
    out += fmt::format("<p>{} more stacks not shown.</p>\n",
                       sorted.size() - static_cast<size_t>(kLeaksShown));
  }
  if (!reachable.empty()) {
    std::optional<int64_t> blocks = ReachabilityBlocks(report, "reachability", "still_reachable");
    std::optional<int64_t> bytes = ReachabilityBytes(report, "reachability", "still_reachable");
    std::stable_sort(reachable.begin(), reachable.end(), [](const json* a, const json* b) {
      return Count(*a, "bytes").value_or(0) > Count(*b, "bytes").value_or(0);
    });
    std::string names;
    for (size_t i = 0; i < reachable.size() && i < 3; ++i) {
      const json* stack = Find(*reachable[i], "stack");
      names += (names.empty() ? "" : ", ") + std::string("<code>") +
               E(stack != nullptr && stack->is_array() && !stack->empty()
                     ? FrameFunction(stack->front())
                     : std::string("(no stack)")) +
               "</code>";
    }
    out += fmt::format("<p class=\"reachable\">Still reachable: {} blocks ({}) in {} stacks; "
                       "largest: {}.</p>\n",
                       E(Thousands(blocks)), E(Bytes(bytes)), reachable.size(), names);
  }
  return out;
}

// The program's live logical blocks by reachability class, and what a detector below poolscope
// reports of them.
std::string ReachabilityHtml(const json& report) {
  const json* reachability = Find(report, "reachability");
  if (reachability == nullptr || !reachability->is_object()) return "";
  std::string out = "<h2>Reachability of the live logical blocks at exit</h2>\n";
  if (!Bool(*reachability, "scanned").value_or(false)) {
    std::optional<std::string> why = String(*reachability, "not_scanned_why");
    return out + "<p>Not scanned" + (why ? ": " + E(*why) : std::string()) + ".</p>\n";
  }
  constexpr std::string_view kDetector = "reconciliation.detector_view.reachability";
  const char* kinds[] = {"definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"};
  out += "<table><tr><th></th><th class=\"n\">program (blocks)</th><th class=\"n\">program "
         "(bytes)</th><th class=\"n\">detector below poolscope (blocks)</th>"
         "<th class=\"n\">detector below poolscope (bytes)</th></tr>\n";
  for (const char* kind : kinds) {
    std::string name = kind;
    std::replace(name.begin(), name.end(), '_', ' ');
    out += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                       "<td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
                       E(name), E(Thousands(ReachabilityBlocks(report, "reachability", kind))),
                       E(Bytes(ReachabilityBytes(report, "reachability", kind))),
                       E(Thousands(ReachabilityBlocks(report, kDetector, kind))),
                       E(Bytes(ReachabilityBytes(report, kDetector, kind))));
  }
  out += "</table>\n";
  out += fmt::format(
      "<p>Of the program's lost blocks, {} ({}) sit in pools, where a detector below poolscope "
      "cannot see them.</p>\n",
      E(Thousands(Count(report, "reconciliation.detector_view.hidden_in_pools.blocks"))),
      E(Bytes(Count(report, "reconciliation.detector_view.hidden_in_pools.bytes"))));
  if (std::optional<std::string> sentence =
          String(report, "reconciliation.detector_view.reachability_verdict")) {
    out += "<div class=\"verdict\">" + E(*sentence) + "</div>\n";
  }
  return out;
}

}  // namespace

std::string HtmlReport(const json& report, const std::string& path) {
  std::string exe = String(report, "process.exe").value_or("(exe unknown)");
  std::string argv;
  if (const json* args = Find(report, "process.argv"); args != nullptr && args->is_array()) {
    for (const json& arg : *args) {
      argv += (argv.empty() ? "" : " ") + (arg.is_string() ? arg.get<std::string>() : arg.dump());
    }
  }
  std::optional<int64_t> logical = Count(report, "logical.allocs");
  std::optional<int64_t> hits = Count(report, "pool.hits");
  std::optional<bool> balanced = Bool(report, "reconciliation.balanced");
  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += fmt::format("<title>poolscope report: {}</title>\n", E(exe));
  page += "<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n<main>\n";
  // The heading names the program; its full path follows in the line below, wrapped.
  std::string program = exe.substr(exe.find_last_of('/') == std::string::npos ? 0 : exe.find_last_of('/') + 1);
  page += fmt::format("<h1>poolscope report: {}</h1>\n", E(program));
  page += fmt::format("<p class=\"meta\">{}</p>\n", E(exe));
  page += fmt::format("<p class=\"meta\">pid {} &middot; ppid {} &middot; ran {} &middot; written at "
                      "{} &middot; {}</p>\n",
                      E(Thousands(Count(report, "process.pid"))),
                      E(Thousands(Count(report, "process.ppid"))), E(Seconds(WallSeconds(report))),
                      E(String(report, "process.reason").value_or("unknown")), E(path));
  if (!argv.empty()) page += fmt::format("<p class=\"meta\">argv: <code>{}</code></p>\n", E(argv));
  page += fmt::format("<div class=\"verdict\">{}</div>\n", E(Verdict(json::object(), report)));
  page += "<div class=\"cards\">\n";
  // The headline: the program's own lost blocks, which pooling does not change.
  if (Find(report, "reachability") != nullptr) {
    page += Card(Thousands(LostBlocks(report)), "the program's lost blocks (definitely + indirectly)");
  }
  page += Card(Thousands(logical), "logical allocations (program)");
  page += Card(Thousands(Count(report, "real.allocs")), "real allocations (allocator below)");
  page += Card(Percent(hits, logical), "served from pools");
  page += "</div>\n";
  page += "<div class=\"cards detector\">\n";
  if (Find(report, "reconciliation.detector_view.reachability") != nullptr) {
    page += Card(Thousands(DetectorLostBlocks(report)),
                 "detector view: lost blocks a reachability checker below poolscope reports");
  }
  page += Card(Thousands(Count(report, "reconciliation.detector_view.unfreed_blocks")),
               "detector view: unfreed blocks a leak detector below poolscope sees");
  page += Card(Thousands(Count(report, "reconciliation.detector_view.program_leak_blocks")),
               "detector view: of which the program's own blocks");
  page += "</div>\n";
  page += "<div class=\"charts\">\n<div>\n<h2>The two ledgers</h2>\n" + LedgerChart(report) +
          "</div>\n<div>\n<h2>Request sizes</h2>\n" + SizeChart(report) + "</div>\n</div>\n";
  page += "<h2>Real blocks live at exit, by kind</h2>\n" + LiveChart(report);
  page += fmt::format(
      "<p>{} real live = {} unpooled live + {} pools cached + {} pools in use: {}</p>\n",
      E(Thousands(Count(report, "reconciliation.real_live_blocks"))),
      E(Thousands(Count(report, "reconciliation.unpooled_live_blocks"))),
      E(Thousands(Count(report, "reconciliation.pools_cached"))),
      E(Thousands(Count(report, "reconciliation.pools_in_use"))),
      !balanced ? "n/a"
                : *balanced ? "<span class=\"ok\">balanced</span>"
                            : "<span class=\"bad\">NOT balanced</span>");
  page += ReachabilityHtml(report);
  page += "<h2>Leaks (live logical blocks at exit, lost first)</h2>\n" + LeakTable(report);
  page += "<h2>Ledgers</h2>\n" + LedgerTableHtml(report);
  page += fmt::format(
      "<h2>Pool</h2>\n<p>pool size {}, {} pools per thread; hits {}; pools created {}, reused {}, "
      "released {}; at exit {} cached, {} in use.</p>\n",
      E(Bytes(Count(report, "pool.pool_size"))), E(Thousands(Count(report, "pool.pools_per_thread"))),
      E(Thousands(hits)), E(Thousands(Count(report, "pool.pools_created"))),
      E(Thousands(Count(report, "pool.pools_reused"))),
      E(Thousands(Count(report, "pool.pools_released"))),
      E(Thousands(Count(report, "pool.pools_cached_at_exit"))),
      E(Thousands(Count(report, "pool.pools_in_use_at_exit"))));
  page += fmt::format("<h2>Errors</h2>\n<p>invalid frees {}, double frees {}.</p>\n",
                      E(Thousands(Count(report, "errors.invalid_frees"))),
                      E(Thousands(Count(report, "errors.double_frees"))));
  page += "</main>\n</body>\n</html>\n";
  return page;
}

}  // namespace poolscope::tools
