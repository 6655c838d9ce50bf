// File: report/html_report.cc
//
// See html_report.h. The charts are drawn by hand as SVG with fixed sizes (a page 1100 px wide);
// the scales are linear and every bar carries its figure, so a bar too short to see still reads.
#include "report/html_report.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/ledger_table.h"
#include "report/report_model.h"
#include "report/text_report.h"

namespace poolscope::report {
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
svg text.axis-title { font-weight: bold; fill: #555f70; }
details.stack summary { cursor: pointer; }
details.stack span.more { color: #6b7486; font-size: 11px; }
details.stack div.frame { padding-left: 16px; }
details.stack div.skipped { color: #8a93a3; }
svg.flame text { font-size: 11px; pointer-events: none; }
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
  int height = top + group_height * static_cast<int>(measures.size()) + 34;
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
                     top - 4, height - 30);
  svg += fmt::format("<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">"
                     "calls or blocks (bar length to scale, figure at its end)</text>\n",
                     left + bar_width / 2, height - 8);
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
  const int width = 540, height = 300, left = 70, bottom = 200, top = 30, plot_width = 450;
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
    // Labels are rotated so that neighbours never run into each other; with many buckets only
    // every second or third is labelled (each bar still names its bound in its tooltip).
    size_t step = (bars.size() + 23) / 24;
    if (i % step == 0) {
      double lx = x + bar_w / 2;
      svg += fmt::format("<text class=\"tick\" x=\"{0:.1f}\" y=\"{1}\" text-anchor=\"end\" "
                         "font-size=\"10\" transform=\"rotate(-45 {0:.1f} {1})\">{2}</text>\n",
                         lx, bottom + 12, E(ShortSize(bars[i].first)));
    }
  }
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#8a93a3\"/>\n", left,
                     bottom, left + plot_width);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 6, top + 4,
                     E(Thousands(max_count)));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text>\n", left - 6, bottom);
  svg += fmt::format("<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">"
                     "request size in bytes (bucket upper bound)</text>\n",
                     left + plot_width / 2, bottom + 62);
  svg += fmt::format("<text class=\"axis-title\" x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" "
                     "transform=\"rotate(-90 {0} {1})\">requests</text>\n",
                     left - 44, (top + bottom) / 2);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#8a93a3\"/>\n",
                     left, top, bottom);
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

std::string FrameLine(const json& frame) {
  std::string where = FrameWhere(frame);
  std::string line = E(FrameFunction(frame));
  if (!where.empty()) line += " <span class=\"where\">" + E(where) + "</span>";
  return line;
}

// The stack folded to its first program frame; the whole stack opens below it.
std::string StackCell(const json& leak) {
  const json* frames = Find(leak, "stack");
  if (frames == nullptr || !frames->is_array() || frames->empty()) return "(no stack recorded)";
  size_t first = FirstProgramFrame(*frames);
  std::string out = "<details class=\"stack\"><summary>" + FrameLine(frames->at(first));
  out += fmt::format(" <span class=\"more\">({} frame{})</span></summary>\n", frames->size(),
                     frames->size() == 1 ? "" : "s");
  for (size_t i = 0; i < frames->size(); ++i) {
    out += fmt::format("<div class=\"frame{}\">{}</div>\n", i < first ? " skipped" : "",
                       FrameLine(frames->at(i)));
  }
  return out + "</details>";
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
                       "largest: {}{}.</p>\n",
                       E(Thousands(blocks)), E(Bytes(bytes)), reachable.size(), names,
                       E(LoadedByPoolscopeClause(report)));
  }
  return out;
}

// The call sites that allocate most, each folded to its first program frame.
std::string SitesTable(const json& report) {
  const json* sites = Find(report, "sites");
  size_t total = sites != nullptr && sites->is_array() ? sites->size() : 0;
  std::vector<SiteRow> rows = TopSites(report, kSitesShown);
  if (rows.empty()) return "<p>No call sites recorded.</p>\n";
  std::string out = fmt::format(
      "<p>The {} of {} sites with most logical allocations. Pooled: served from a pool; real: "
      "calls into the allocator below; live at exit: the site's blocks still allocated.</p>\n",
      rows.size(), total);
  out += "<table class=\"sites\"><tr><th class=\"n\">#</th><th class=\"n\">logical allocations"
         "</th><th class=\"n\">pooled</th><th class=\"n\">real allocations</th>"
         "<th class=\"n\">bytes</th><th class=\"n\">live at exit</th>"
         "<th>call site (innermost program frame)</th></tr>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const SiteRow& row = rows[i];
    json holder = json::object();
    if (row.stack != nullptr) holder["stack"] = *row.stack;
    out += fmt::format(
        "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{} ({})</td>"
        "<td class=\"stack\">{}</td></tr>\n",
        i + 1, E(Thousands(row.logical_allocs)), E(Thousands(row.pool_hits)),
        E(Thousands(row.real_allocs)), E(Bytes(row.bytes)), E(Thousands(row.live_blocks)),
        E(Bytes(row.live_bytes)), StackCell(holder));
  }
  return out + "</table>\n";
}

// A node of the flame graph: bytes live at exit under one frame, reached by one path from the
// root (outermost frame first).
struct FlameNode {
  std::string name;
  int64_t bytes = 0;
  std::vector<FlameNode> children;
};

FlameNode& Child(FlameNode& node, const std::string& name) {
  for (FlameNode& child : node.children) {
    if (child.name == name) return child;
  }
  node.children.push_back(FlameNode{name, 0, {}});
  return node.children.back();
}

int Depth(const FlameNode& node) {
  int deepest = 0;
  for (const FlameNode& child : node.children) deepest = std::max(deepest, Depth(child));
  return deepest + 1;
}

constexpr int kFlameLeft = 10, kFlameWidth = 1000, kFlameRow = 18;
// The deepest path drawn (a report's stacks hold 16 frames by default, at most 64).
constexpr size_t kFlameLevels = 128;

void DrawFlame(const FlameNode& node, double x, int level, int levels, int64_t total,
               std::string* svg) {
  double w = static_cast<double>(kFlameWidth) * static_cast<double>(node.bytes) /
             static_cast<double>(total);
  int y = (levels - 1 - level) * kFlameRow;
  // Warm colours from the name, so that a frame keeps its colour wherever it appears.
  size_t hash = std::hash<std::string>{}(node.name);
  std::string color = level == 0 ? "#c8ccd4"
                                 : fmt::format("rgb({},{},{})", 205 + hash % 50,
                                               90 + (hash >> 8) % 120, 40 + (hash >> 16) % 50);
  *svg += fmt::format(
      "<g class=\"frame\"><title>{}: {} ({:.1f}% of live bytes)</title>"
      "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\" "
      "stroke=\"#ffffff\" stroke-width=\"0.5\"/>",
      E(node.name), E(Bytes(node.bytes)),
      100.0 * static_cast<double>(node.bytes) / static_cast<double>(total), x, y, w, kFlameRow - 1,
      color);
  size_t fits = w > 12 ? static_cast<size_t>((w - 6) / 6.5) : 0;
  if (fits >= 3) {
    std::string label = node.name.size() <= fits ? node.name : node.name.substr(0, fits - 2) + "..";
    *svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{}</text>", x + 3, y + 13, E(label));
  }
  *svg += "</g>\n";
  std::vector<const FlameNode*> children;
  for (const FlameNode& child : node.children) children.push_back(&child);
  std::stable_sort(children.begin(), children.end(), [](const FlameNode* a, const FlameNode* b) {
    if (a->bytes != b->bytes) return a->bytes > b->bytes;
    return a->name < b->name;
  });
  for (const FlameNode* child : children) {
    DrawFlame(*child, x, level + 1, levels, total, svg);
    x += static_cast<double>(kFlameWidth) * static_cast<double>(child->bytes) /
         static_cast<double>(total);
  }
}

}  // namespace

std::string FlameGraph(const json& report) {
  FlameNode root{"all live bytes", 0, {}};
  const json* leaks = Find(report, "leaks");
  if (leaks != nullptr && leaks->is_array()) {
    for (const json& leak : *leaks) {
      int64_t bytes = Count(leak, "bytes").value_or(0);
      if (bytes <= 0) continue;
      root.bytes = SaturatingAdd(root.bytes, bytes);
      FlameNode* node = &root;
      const json* stack = Find(leak, "stack");
      if (stack == nullptr || !stack->is_array() || stack->empty()) {
        node = &Child(*node, "[no stack]");
        node->bytes = SaturatingAdd(node->bytes, bytes);
        continue;
      }
      // Outermost first, down to the first program frame: the allocator's and poolscope's own
      // frames below it are left out. At most kFlameLevels frames, the outermost.
      size_t first = FirstProgramFrame(*stack);
      size_t shown = 0;
      for (size_t i = stack->size(); i-- > first && shown < kFlameLevels; ++shown) {
        node = &Child(*node, FrameFunction(stack->at(i)));
        node->bytes = SaturatingAdd(node->bytes, bytes);
      }
    }
  }
  if (root.bytes == 0) return "<p>No bytes live at exit.</p>\n";
  int levels = Depth(root);
  int height = levels * kFlameRow;
  std::string svg = fmt::format(
      "<svg class=\"flame\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" "
      "aria-label=\"flame graph of bytes live at exit\">\n",
      kFlameLeft * 2 + kFlameWidth, height);
  DrawFlame(root, kFlameLeft, 0, levels, root.bytes, &svg);
  return svg + "</svg>\n";
}

namespace {

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

// Memory over time (the reports' `timeline`s): live blocks of both ledgers against time, and the
// resident set on its own scale (right axis, dashed), for one run or for several on one chart (each
// run's lines in its own shade, named by its label). Empty when no run has two points or more.
std::string TimelineChart(const std::vector<std::pair<const json*, std::string>>& runs) {
  struct Series {
    std::string label;
    std::string color;
    bool right;  // on the resident-set axis
    std::vector<std::pair<int64_t, int64_t>> xy;
  };
  // Per run: logical, real, resident set. A second run's lines are darker shades of the first's.
  static const char* const kColors[2][3] = {{kLogicalColor, kRealColor, "#6b7280"},
                                            {"#16365e", "#8a3f0a", "#111827"}};
  std::vector<Series> series;
  int64_t max_t = 1, max_blocks = 1, max_rss = 1;
  for (size_t r = 0; r < runs.size(); ++r) {
    const json* points = Find(*runs[r].first, "timeline.points");
    if (points == nullptr || !points->is_array() || points->size() < 2) continue;
    const std::string prefix = runs[r].second.empty() ? "" : runs[r].second + ": ";
    const char* const* colors = kColors[r % 2];
    const std::pair<const char*, const char*> keys[] = {{"logical_live_blocks", "logical live blocks"},
                                                        {"real_live_blocks", "real live blocks"},
                                                        {"rss_kib", "resident set (right axis)"}};
    for (int k = 0; k < 3; ++k) {
      Series s{prefix + keys[k].second, colors[k], k == 2, {}};
      for (const json& p : *points) {
        std::optional<int64_t> t = Count(p, "t_ms"), v = Count(p, keys[k].first);
        if (!t || !v) continue;
        s.xy.emplace_back(*t, *v);
        max_t = std::max(max_t, *t);
        (s.right ? max_rss : max_blocks) = std::max(s.right ? max_rss : max_blocks, *v);
      }
      series.push_back(std::move(s));
    }
  }
  if (series.empty()) return std::string();
  const int legend_rows = static_cast<int>((series.size() + 2) / 3);
  const int width = 1050, left = 90, right = 90, top = 16 + 18 * legend_rows, bottom = top + 186;
  const int height = bottom + 60, plot_width = width - left - right;
  auto x_of = [&](int64_t t) {
    return left + plot_width * static_cast<double>(t) / static_cast<double>(max_t);
  };
  auto y_of = [&](int64_t v, int64_t max) {
    return bottom -
           (bottom - top) * static_cast<double>(std::max<int64_t>(0, v)) / static_cast<double>(max);
  };
  std::string svg = fmt::format(
      "<svg width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "role=\"img\" aria-label=\"memory over time\">\n",
      width, height);
  for (size_t i = 0; i < series.size(); ++i) {
    const int lx = left + 310 * static_cast<int>(i % 3), ly = 6 + 18 * static_cast<int>(i / 3);
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                       "<text x=\"{}\" y=\"{}\">{}</text>\n",
                       lx, ly, series[i].color, lx + 16, ly + 10, E(series[i].label));
  }
  for (const Series& s : series) {
    if (s.xy.size() < 2) continue;
    std::string line;
    for (const auto& [t, v] : s.xy) {
      line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "" : " ", x_of(t),
                          y_of(v, s.right ? max_rss : max_blocks));
    }
    svg += fmt::format("<polyline class=\"series\" fill=\"none\" stroke=\"{}\" "
                       "stroke-width=\"2\"{} points=\"{}\"><title>{}</title></polyline>\n",
                       s.color, s.right ? " stroke-dasharray=\"5 3\"" : "", line, E(s.label));
  }
  // Axes: time below, blocks left, resident set right.
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#8a93a3\"/>\n", left,
                     bottom, left + plot_width);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#8a93a3\"/>\n", left,
                     top, bottom);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#8a93a3\"/>\n",
                     left + plot_width, top, bottom);
  svg += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 6,
                     top + 4, E(Thousands(max_blocks)));
  svg += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text>\n", left - 6,
                     bottom);
  svg += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\">{}</text>\n", left + plot_width + 6, top + 4,
                     E(Bytes(max_rss * 1024)));
  svg += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\">0</text>\n", left + plot_width + 6, bottom);
  svg += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">0</text>\n", left,
                     bottom + 16);
  svg += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     left + plot_width, bottom + 16, E(Seconds(static_cast<double>(max_t) / 1000)));
  svg += fmt::format("<text class=\"axis-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">"
                     "time since the library started</text>\n",
                     left + plot_width / 2, bottom + 40);
  svg += fmt::format("<text class=\"axis-title\" x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" "
                     "transform=\"rotate(-90 {0} {1})\">live blocks</text>\n",
                     left - 60, (top + bottom) / 2);
  svg += fmt::format("<text class=\"axis-title\" x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" "
                     "transform=\"rotate(90 {0} {1})\">resident set</text>\n",
                     left + plot_width + 64, (top + bottom) / 2);
  return svg + "</svg>\n";
}

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
  page += "<div class=\"charts\">\n<div id=\"ledgers\">\n<h2>The two ledgers</h2>\n" +
          LedgerChart(report) + "</div>\n<div id=\"sizes\">\n<h2>Request sizes</h2>\n" +
          SizeChart(report) + "</div>\n</div>\n";
  if (std::string timeline = TimelineChart({{&report, ""}}); !timeline.empty()) {
    page += "<section id=\"timeline\">\n<h2>Memory over time</h2>\n" + timeline + "</section>\n";
  }
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
  page += "<section id=\"flame\">\n<h2>Bytes live at exit by stack (flame graph)</h2>\n"
          "<p>Each box is a frame, as wide as the bytes live at exit below it; callers under their "
          "callees, the outermost at the bottom. Hover a box for its figures.</p>\n" +
          FlameGraph(report) + "</section>\n";
  page += "<section id=\"leaks\">\n<h2>Leaks (live logical blocks at exit, lost first)</h2>\n" +
          LeakTable(report) + "</section>\n";
  page += "<section id=\"sites\">\n<h2>Call sites (top " + std::to_string(kSitesShown) +
          " by logical allocations)</h2>\n" + SitesTable(report) + "</section>\n";
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

}  // namespace poolscope::report

namespace poolscope::report {

std::string HtmlComparePage(const std::string& title, const std::string& table, const json& before,
                            const std::string& before_label, const json& after,
                            const std::string& after_label) {
  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += fmt::format("<title>poolscope: {}</title>\n", E(title));
  page += "<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n<main>\n";
  page += fmt::format("<h1>poolscope: {}</h1>\n", E(title));
  page += fmt::format("<section id=\"table\">\n<pre style=\"white-space: pre-wrap\">{}</pre>\n</section>\n",
                      E(table));
  std::string timeline = TimelineChart({{&before, before_label}, {&after, after_label}});
  page += "<section id=\"timeline\">\n<h2>Memory over time, both runs</h2>\n";
  page += timeline.empty() ? std::string("<p>Neither report has a timeline of two points or more.</p>\n")
                           : timeline;
  page += "</section>\n</main>\n</body>\n</html>\n";
  return page;
}

std::string HtmlTreeReport(const std::string& title, const std::string& summary,
                           const std::vector<std::pair<const nlohmann::json*, std::string>>& processes) {
  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += fmt::format("<title>poolscope report: {}</title>\n", E(title));
  page += "<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n<main>\n";
  page += fmt::format("<h1>poolscope report: {}</h1>\n", E(title));
  page += fmt::format("<pre>{}</pre>\n", E(summary));
  for (const auto& [report, path] : processes) {
    // Each process's own page, its element ids prefixed with its pid so that they stay unique.
    std::string one = HtmlReport(*report, path);
    size_t begin = one.find("<main>\n"), end = one.rfind("</main>");
    if (begin == std::string::npos || end == std::string::npos) continue;
    std::string body = one.substr(begin + 7, end - begin - 7);
    std::string pid = Thousands(Count(*report, "process.pid"));
    pid.erase(std::remove(pid.begin(), pid.end(), ','), pid.end());
    std::string prefixed;
    for (size_t at = 0;;) {
      size_t next = body.find("id=\"", at);
      if (next == std::string::npos) {
        prefixed += body.substr(at);
        break;
      }
      prefixed += body.substr(at, next + 4 - at) + "p" + pid + "-";
      at = next + 4;
    }
    // Its headings one level down.
    for (const char* tag : {"h2", "h1"}) {
      std::string from = std::string("<") + tag, to = std::string("<h") + char(tag[1] + 1);
      std::string from_end = std::string("</") + tag, to_end = std::string("</h") + char(tag[1] + 1);
      for (size_t at = 0; (at = prefixed.find(from, at)) != std::string::npos; at += to.size()) {
        prefixed.replace(at, from.size(), to);
      }
      for (size_t at = 0; (at = prefixed.find(from_end, at)) != std::string::npos; at += to_end.size()) {
        prefixed.replace(at, from_end.size(), to_end);
      }
    }
    page += fmt::format("<section id=\"process-{}\" class=\"process\">\n{}</section>\n", pid, prefixed);
  }
  page += "</main>\n</body>\n</html>\n";
  return page;
}

}  // namespace poolscope::report
