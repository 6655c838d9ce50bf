// File: report/html_report.cc
//
// See html_report.h. The charts are in html_charts.cc.
#include "report/html_report.h"

#include <utility>
#include <vector>

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/html_charts.h"
#include "report/ledger_table.h"
#include "report/report_model.h"
#include "report/stack_frames.h"
#include "report/text_report.h"

namespace poolscope::report {
namespace {

using nlohmann::json;

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
details.stack span.via { color: #6b7486; font-size: 11px; font-style: italic; }
details.stack div.frame { padding-left: 16px; }
details.stack div.skipped { color: #8a93a3; }
svg.flame text { font-size: 11px; pointer-events: none; }
)css";

std::string E(const std::string& text) { return HtmlEscape(text); }

std::string Card(const std::string& number, const std::string& label) {
  return fmt::format("<div class=\"card\"><div class=\"n\">{}</div><div class=\"l\">{}</div></div>\n",
                     E(number), E(label));
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

std::string FrameLine(const json& frame) {
  std::string where = FrameWhere(frame);
  std::string line = E(FrameFunction(frame));
  if (!where.empty()) line += " <span class=\"where\">" + E(where) + "</span>";
  return line;
}

// The stack folded to its site frame (stack_frames.h: the code that asked for the block, not
// glibc's frames under it), with the function it called into libc when that is not the allocator;
// the whole stack opens below it, the frames under the site greyed.
std::string StackCell(const json& leak) {
  const json* frames = Find(leak, "stack");
  if (frames == nullptr || !frames->is_array() || frames->empty()) return "(no stack recorded)";
  size_t site = SiteFrame(*frames);
  std::string out = "<details class=\"stack\"><summary><span class=\"site\">" +
                    FrameLine(frames->at(site)) + "</span>";
  if (std::string via = SiteVia(*frames); !via.empty()) {
    out += " <span class=\"via\">via " + E(via) + "</span>";
  }
  out += fmt::format(" <span class=\"more\">({} frame{})</span></summary>\n", frames->size(),
                     frames->size() == 1 ? "" : "s");
  for (size_t i = 0; i < frames->size(); ++i) {
    out += fmt::format("<div class=\"frame{}\">{}</div>\n", i < site ? " skipped" : "",
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

// The call sites that allocate most, each folded to its site frame.
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
         "<th>call site (innermost frame outside libc and poolscope)</th></tr>\n";
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
         "(bytes)</th><th class=\"n\">memcheck below poolscope (blocks)</th>"
         "<th class=\"n\">memcheck below poolscope (bytes)</th></tr>\n";
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
      "<p>Of the program's lost blocks, {} ({}) sit in pools, where memcheck below poolscope "
      "cannot see them.</p>\n",
      E(Thousands(Count(report, "reconciliation.detector_view.hidden_in_pools.blocks"))),
      E(Bytes(Count(report, "reconciliation.detector_view.hidden_in_pools.bytes"))));
  constexpr std::string_view kLsan = "reconciliation.detector_view.lsan";
  auto lsan_count = [&](std::string_view what, std::string_view unit) {
    return Count(report, fmt::format("{}.{}.{}", kLsan, what, unit));
  };
  if (Bool(report, "reconciliation.detector_view.lsan.scanned").value_or(false)) {
    out += fmt::format(
        "<p>LeakSanitizer below poolscope reports {} leaked blocks ({}): {} direct, {} indirect. Of the "
        "blocks it would report without poolscope, {} ({}) sit in pools.</p>\n",
        E(Thousands(lsan_count("leaked", "blocks"))), E(Bytes(lsan_count("leaked", "bytes"))),
        E(Thousands(lsan_count("direct", "blocks"))), E(Thousands(lsan_count("indirect", "blocks"))),
        E(Thousands(lsan_count("hidden_in_pools", "blocks"))), E(Bytes(lsan_count("hidden_in_pools", "bytes"))));
  } else if (std::optional<std::string> why = String(report, "reconciliation.detector_view.lsan.not_scanned_why")) {
    out += "<p>LeakSanitizer below poolscope: not predicted (" + E(*why) + ").</p>\n";
  }
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
                 "detector view: lost blocks memcheck below poolscope reports");
  }
  if (Bool(report, "reconciliation.detector_view.lsan.scanned").value_or(false)) {
    page += Card(Thousands(Count(report, "reconciliation.detector_view.lsan.leaked.blocks")),
                 "detector view: leaked blocks LeakSanitizer below poolscope reports");
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
