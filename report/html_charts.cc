// File: report/html_charts.cc
//
// See html_charts.h.
#include "report/html_charts.h"

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/report_model.h"
#include "report/text_report.h"

namespace poolscope::report {
namespace {

using nlohmann::json;

constexpr const char* kLeakColor = "#c0392b";
constexpr const char* kCachedColor = "#2e8b57";
constexpr const char* kInUseColor = "#8fbc8f";

std::string E(const std::string& text) { return HtmlEscape(text); }

// A bucket bound in few characters: "64", "2K", "1M".
std::string ShortSize(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{}K", bytes >> 10);
  return std::to_string(bytes);
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
               const char* what, std::string* svg) {
  double w = static_cast<double>(kFlameWidth) * static_cast<double>(node.bytes) /
             static_cast<double>(total);
  int y = (levels - 1 - level) * kFlameRow;
  // Warm colours from the name, so that a frame keeps its colour wherever it appears.
  size_t hash = std::hash<std::string>{}(node.name);
  std::string color = level == 0 ? "#c8ccd4"
                                 : fmt::format("rgb({},{},{})", 205 + hash % 50,
                                               90 + (hash >> 8) % 120, 40 + (hash >> 16) % 50);
  *svg += fmt::format(
      "<g class=\"frame\"><title>{}: {} ({:.1f}% of {})</title>"
      "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\" "
      "stroke=\"#ffffff\" stroke-width=\"0.5\"/>",
      E(node.name), E(Bytes(node.bytes)),
      100.0 * static_cast<double>(node.bytes) / static_cast<double>(total), what, x, y, w,
      kFlameRow - 1, color);
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
    DrawFlame(*child, x, level + 1, levels, total, what, svg);
    x += static_cast<double>(kFlameWidth) * static_cast<double>(child->bytes) /
         static_cast<double>(total);
  }
}

// The marker of a timeline's measure.
enum class Marker { kCircle = 0, kSquare = 1, kTriangle = 2 };

// A marker centred at (x, y), filled with the line's colour and edged in white.
std::string MarkerShape(Marker marker, double x, double y, const std::string& color) {
  switch (marker) {
    case Marker::kCircle:
      return fmt::format("<circle class=\"marker circle\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" "
                         "fill=\"{}\" stroke=\"#ffffff\"/>",
                         x, y, color);
    case Marker::kSquare:
      return fmt::format("<rect class=\"marker square\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"7\" "
                         "height=\"7\" fill=\"{}\" stroke=\"#ffffff\"/>",
                         x - 3.5, y - 3.5, color);
    case Marker::kTriangle:
      return fmt::format("<path class=\"marker triangle\" d=\"M{:.1f},{:.1f} L{:.1f},{:.1f} L{:.1f},{:.1f} Z\" "
                         "fill=\"{}\" stroke=\"#ffffff\"/>",
                         x, y - 4.5, x + 4.5, y + 3.5, x - 4.5, y + 3.5, color);
  }
  return "";
}

std::string DashAttribute(const char* dash) {
  return *dash == '\0' ? std::string() : fmt::format(" stroke-dasharray=\"{}\"", dash);
}

}  // namespace

std::string LedgerBars(std::optional<int64_t> logical, std::optional<int64_t> real) {
  constexpr int kWidth = 200, kBar = 190, kHeight = 22;
  const int64_t most = std::max<int64_t>({1, logical.value_or(0), real.value_or(0)});
  std::string svg = fmt::format(
      "<svg class=\"bars\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" "
      "aria-label=\"logical {2}, real {3}\">",
      kWidth, kHeight, E(Thousands(logical)), E(Thousands(real)));
  int y = 2;
  for (auto [value, color, name] : {std::tuple{logical, kLogicalColor, "logical"},
                                    std::tuple{real, kRealColor, "real"}}) {
    double w = value ? static_cast<double>(kBar) * static_cast<double>(std::max<int64_t>(0, *value)) /
                           static_cast<double>(most)
                     : 0;
    if (value && *value > 0) w = std::max(w, 1.5);
    svg += fmt::format("<rect class=\"{}\" x=\"0\" y=\"{}\" width=\"{:.1f}\" height=\"8\" fill=\"{}\">"
                       "<title>{}: {}</title></rect>",
                       name, y, w, color, name, E(Thousands(value)));
    y += 10;
  }
  return svg + "</svg>";
}

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

std::string LiveChart(const json& report) {
  struct Part {
    const char* label;
    int64_t value;
    const char* color;
  };
  std::vector<Part> parts = {
      {"outside pools",
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

namespace {

// A leak group the reachability scan found lost: definitely, indirectly or possibly.
bool IsLost(const json& leak) {
  const std::string kind = String(leak, "kind").value_or("");
  return kind == "definitely_lost" || kind == "indirectly_lost" || kind == "possibly_lost";
}

}  // namespace

std::string FlameGraph(const json& report, FlameBytes which) {
  const bool lost_only = which == FlameBytes::kLost;
  const char* const what = lost_only ? "lost bytes" : "live bytes";
  FlameNode root{lost_only ? "all lost bytes" : "all live bytes", 0, {}};
  const json* leaks = Find(report, "leaks");
  if (leaks != nullptr && leaks->is_array()) {
    for (const json& leak : *leaks) {
      int64_t bytes = Count(leak, "bytes").value_or(0);
      if (bytes <= 0 || (lost_only && !IsLost(leak))) continue;
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
  if (root.bytes == 0) {
    return lost_only ? "<p>No bytes lost at exit.</p>\n" : "<p>No bytes live at exit.</p>\n";
  }
  int levels = Depth(root);
  int height = levels * kFlameRow;
  std::string svg = fmt::format(
      "<svg class=\"flame\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" "
      "aria-label=\"flame graph of {2} at exit\">\n",
      kFlameLeft * 2 + kFlameWidth, height, what);
  DrawFlame(root, kFlameLeft, 0, levels, root.bytes, what, &svg);
  return svg + "</svg>\n";
}

std::string TimelineChart(const std::vector<std::pair<const json*, std::string>>& runs) {
  struct Series {
    std::string label;
    std::string color;
    const char* dash;  // the run's dash pattern, "" for a solid line
    Marker marker;     // the measure's marker
    bool right;        // on the resident-set axis
    std::vector<std::pair<int64_t, int64_t>> xy;
  };
  // Per run, logical, real and resident set, each line its own colour; a run's lines share a dash
  // pattern (the first solid) and a measure's lines a marker, so six lines stay apart in print and
  // for a reader who does not tell the colours apart.
  static const char* const kColors[2][3] = {{kLogicalColor, kRealColor, kCachedColor},
                                            {"#7b3fa0", "#c0392b", "#4b5563"}};
  static const char* const kDashes[2] = {"", "7 4"};
  static const Marker kMarkers[3] = {Marker::kCircle, Marker::kSquare, Marker::kTriangle};
  auto points_of = [](const json& report) -> const json* {
    const json* points = Find(report, "timeline.points");
    return points != nullptr && points->is_array() && points->size() >= 2 ? points : nullptr;
  };
  // Live bytes (track=1) when every run drawn has them at two points or more, so that one left axis
  // serves every line; live blocks otherwise.
  bool bytes = false;
  for (const auto& run : runs) {
    const json* points = points_of(*run.first);
    if (points == nullptr) continue;
    size_t with_bytes = 0;
    for (const json& p : *points) with_bytes += Count(p, "real_live_bytes").has_value() ? 1 : 0;
    bytes = with_bytes >= 2;
    if (!bytes) break;
  }
  std::vector<Series> series;
  int64_t max_t = 1, max_left = 1, max_rss = 1;
  for (size_t r = 0; r < runs.size(); ++r) {
    const json* points = points_of(*runs[r].first);
    if (points == nullptr) continue;
    const std::string prefix = runs[r].second.empty() ? "" : runs[r].second + ": ";
    const char* const* colors = kColors[r % 2];
    const char* dash = kDashes[r % 2];
    const std::pair<const char*, const char*> keys[] = {
        bytes ? std::make_pair("logical_live_bytes", "logical live bytes")
              : std::make_pair("logical_live_blocks", "logical live blocks"),
        bytes ? std::make_pair("real_live_bytes", "real live bytes")
              : std::make_pair("real_live_blocks", "real live blocks"),
        {"rss_kib", "resident set (right axis)"}};
    for (int k = 0; k < 3; ++k) {
      Series s{prefix + keys[k].second, colors[k], dash, kMarkers[k], k == 2, {}};
      for (const json& p : *points) {
        std::optional<int64_t> t = Count(p, "t_ms"), v = Count(p, keys[k].first);
        if (!t || !v) continue;  // (a null: the point is left out of that line)
        s.xy.emplace_back(*t, *v);
        max_t = std::max(max_t, *t);
        (s.right ? max_rss : max_left) = std::max(s.right ? max_rss : max_left, *v);
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
  // The legend: per line a sample of it (colour, dash pattern, marker) and its name.
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const int lx = left + 310 * static_cast<int>(i % 3), ly = 6 + 18 * static_cast<int>(i / 3);
    svg += fmt::format("<g class=\"legend-entry\"><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" "
                       "stroke=\"{}\" stroke-width=\"2\"{}/>{}<text x=\"{}\" y=\"{}\">{}</text></g>\n",
                       lx, ly + 6, lx + 30, ly + 6, s.color, DashAttribute(s.dash),
                       MarkerShape(s.marker, lx + 15, ly + 6, s.color), lx + 36, ly + 10,
                       E(s.label));
  }
  for (const Series& s : series) {
    if (s.xy.size() < 2) continue;
    std::string line;
    for (const auto& [t, v] : s.xy) {
      line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "" : " ", x_of(t),
                          y_of(v, s.right ? max_rss : max_left));
    }
    svg += fmt::format("<polyline class=\"series\" fill=\"none\" stroke=\"{}\" "
                       "stroke-width=\"2\"{} points=\"{}\"><title>{}</title></polyline>\n",
                       s.color, DashAttribute(s.dash), line, E(s.label));
    // Markers at eight points spread along the line, each measure's a little apart from the
    // others' so that lines that coincide still show every marker.
    const size_t n = s.xy.size();
    const size_t shift = static_cast<size_t>(s.marker);
    std::string marks;
    for (size_t j = 0; j < 8 && j < n; ++j) {
      size_t at = std::min(n - 1, ((6 * j + 1 + 2 * shift) * (n - 1)) / 48);
      marks += MarkerShape(s.marker, x_of(s.xy[at].first),
                           y_of(s.xy[at].second, s.right ? max_rss : max_left), s.color);
    }
    svg += fmt::format("<g class=\"markers\">{}</g>\n", marks);
  }
  // Axes: time below, live bytes or blocks left, resident set right.
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#8a93a3\"/>\n", left,
                     bottom, left + plot_width);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#8a93a3\"/>\n", left,
                     top, bottom);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#8a93a3\"/>\n",
                     left + plot_width, top, bottom);
  svg += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 6,
                     top + 4, E(bytes ? Bytes(max_left) : Thousands(max_left)));
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
                     "time since the library started (seconds)</text>\n",
                     left + plot_width / 2, bottom + 40);
  svg += fmt::format("<text class=\"axis-title\" x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" "
                     "transform=\"rotate(-90 {0} {1})\">{2}</text>\n",
                     left - 60, (top + bottom) / 2, bytes ? "live bytes" : "live blocks (count)");
  svg += fmt::format("<text class=\"axis-title\" x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" "
                     "transform=\"rotate(90 {0} {1})\">resident set (bytes)</text>\n",
                     left + plot_width + 64, (top + bottom) / 2);
  return svg + "</svg>\n";
}

}  // namespace poolscope::report
