// File: report/html_report.cc
//
// See html_report.h. The charts are in html_charts.cc, the comparison page in html_compare.cc.
// The report page, top to bottom: what the program loses (the reachability classes), what
// detectors below poolscope see, the two ledgers, request sizes, memory over time, the flame graph,
// the leak table, the call sites, the pool, errors. Each figure appears in one place.
#include "report/html_report.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/html_charts.h"
#include "report/html_page.h"
#include "report/ledger_table.h"
#include "report/report_model.h"
#include "report/site_pinning.h"
#include "report/stack_frames.h"
#include "report/text_report.h"

namespace poolscope::report {
namespace {

using nlohmann::json;

// The two ledgers, once: each row a measure with the logical and the real figure and the two as
// bars to the row's own scale; the calls by entry point below.
std::string LedgerTableHtml(const json& report) {
  std::string rows;
  auto add = [&](const std::string& label_html, std::optional<int64_t> logical, std::optional<int64_t> real) {
    rows += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>\n",
                        label_html, E(Thousands(logical)), E(Thousands(real)), LedgerBars(logical, real));
  };
  auto row = [&](const std::string& label, std::string_view field) {
    add(E(label), Count(report, fmt::format("logical.{}", field)), Count(report, fmt::format("real.{}", field)));
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
    add("&nbsp;&nbsp;calls to <code>" + E(key) + "</code>", l, r);
  }
  return fmt::format(
      "<table class=\"ledgers\"><tr><th></th><th class=\"n\">logical (program)</th>"
      "<th class=\"n\">real (allocator below)</th><th><span class=\"key\" style=\"background: {}\">"
      "</span>logical <span class=\"key\" style=\"background: {}\"></span>real (bars to each row's "
      "scale)</th></tr>\n{}</table>\n",
      kLogicalColor, kRealColor, rows);
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
                     ? FrameFunction(stack->at(SiteFrame(*stack)))
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

// Where pooling serves the program badly and where well (PinningSites): the sites that pin most pools
// at exit or at the peak of real live bytes, and the one pooling saves most calls at. Nothing when no
// site pins a pool. The peak's column shows only where a site's peak figure differs from its exit one.
std::string PinningSection(const json& report) {
  const SitePinning p = PinningSites(report, 5);
  if (p.pinning.empty()) return "";
  const std::string moment = PeakMoment(report);
  const bool peak = !moment.empty() && std::any_of(p.pinning.begin(), p.pinning.end(), PeakDiffers);
  std::string out =
      "<section id=\"pinning\">\n<h2>Pools pinned at exit</h2>\n<p>The sites whose live blocks keep "
      "most pools alive at exit (a pool holding blocks of several sites counts for each): what pooling "
      "costs the program's memory, and where.";
  if (peak) out += " Beside them, where it differs, what they kept alive at " + E(moment) + ".";
  out += "</p>\n<table class=\"sites\"><tr><th class=\"n\">#</th><th class=\"n\">pools pinned</th>"
         "<th class=\"n\">their bytes</th>";
  if (peak) out += "<th class=\"n\">at the peak</th>";
  out += "<th class=\"n\">pooled</th><th class=\"n\">logical allocations</th><th>call site</th></tr>\n";
  for (size_t i = 0; i < p.pinning.size(); ++i) {
    const SiteRow& row = p.pinning[i];
    std::string at_peak;
    if (peak) {
      at_peak = "<td class=\"n\">" +
                (PeakDiffers(row) ? E(Thousands(row.peak_pools_pinned) + " (" + Bytes(row.peak_pinned_bytes) + ")")
                                  : std::string()) +
                "</td>";
    }
    out += fmt::format(
        "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>{}<td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"stack\">{}</td></tr>\n",
        i + 1, E(Thousands(row.pools_pinned)), E(Bytes(row.pinned_bytes)), at_peak, E(Thousands(row.pool_hits)),
        E(Thousands(row.logical_allocs)), E(SiteLine(row)));
  }
  out += "</table>\n";
  if (p.saver) {
    out += fmt::format("<p class=\"saver\">Pooling saves most at <code>{}</code>: {} real allocations "
                       "avoided, {} pools pinned.</p>\n",
                       E(SiteLine(*p.saver)), E(Thousands(p.saver->pool_hits)), E(Thousands(p.saver->pools_pinned)));
  }
  return out + "</section>\n";
}

constexpr const char* kKinds[] = {"definitely_lost", "indirectly_lost", "possibly_lost",
                                  "still_reachable"};

// "definitely lost" for "definitely_lost".
std::string Words(std::string kind) {
  std::replace(kind.begin(), kind.end(), '_', ' ');
  return kind;
}

// The headline: what the program loses at exit, its live logical blocks in memcheck's four classes
// (blocks and bytes), which pooling does not change; or, without a scan, that it is not known.
std::string LossSection(const json& report) {
  std::string out = "<section id=\"loss\" class=\"headline\">\n<h2>What the program loses at exit</h2>\n";
  const json* reachability = Find(report, "reachability");
  if (reachability == nullptr || !reachability->is_object() ||
      !Bool(*reachability, "scanned").value_or(false)) {
    std::optional<std::string> why =
        reachability != nullptr ? String(*reachability, "not_scanned_why") : std::nullopt;
    if (!why && reachability == nullptr) why = "the report has no reachability scan";
    std::optional<int64_t> live = Count(report, "logical.live_blocks");
    return out + fmt::format(
                     "<p class=\"unknown\">Reachability was not computed for this run{}, so what the "
                     "program loses is not known: {} logical block{} ({}) were live at exit, listed "
                     "below without a class.</p>\n</section>\n",
                     why ? " (" + E(*why) + ")" : std::string(), E(Thousands(live)),
                     live == 1 ? "" : "s", E(Bytes(Count(report, "logical.live_bytes"))));
  }
  auto blocks = [&](const char* kind) { return ReachabilityBlocks(report, "reachability", kind); };
  auto bytes = [&](const char* kind) { return ReachabilityBytes(report, "reachability", kind); };
  std::optional<int64_t> lost = LostBlocks(report);
  std::optional<int64_t> lost_bytes;
  if (auto d = bytes("definitely_lost"), i = bytes("indirectly_lost"); d && i) lost_bytes = *d + *i;
  out += fmt::format("<p class=\"lead\">The program loses <b>{} block{} ({})</b> at exit, definitely "
                     "or indirectly lost, classified as memcheck classifies them.</p>\n",
                     E(Thousands(lost)), lost == 1 ? "" : "s", E(Bytes(lost_bytes)));
  out += "<div class=\"cards loss\">\n";
  for (const char* kind : kKinds) {
    std::optional<int64_t> n = blocks(kind);
    out += fmt::format("<div class=\"card {}\"><div class=\"l\">{}</div><div class=\"n\">{} block{}</div>"
                       "<div class=\"b\">{}</div></div>\n",
                       kind, E(Words(kind)), E(Thousands(n)), n == 1 ? "" : "s", E(Bytes(bytes(kind))));
  }
  return out + "</div>\n</section>\n";
}

// What detectors below poolscope see at exit: the real blocks. A malloc/free-counting detector's
// unfreed blocks (outside pools, pool blocks) with its verdict and the reconciliation of the real
// blocks live at exit; then memcheck's and LeakSanitizer's predicted reports, with their verdict.
std::string DetectorSection(const json& report) {
  constexpr std::string_view kView = "reconciliation.detector_view";
  auto view = [&](std::string_view field) { return Count(report, fmt::format("{}.{}", kView, field)); };
  std::string out = "<section id=\"detector\">\n<h2>What detectors below poolscope see</h2>\n";
  out += "<div class=\"cards detector\">\n";
  out += Card(Thousands(view("program_leak_blocks")),
              "unfreed blocks outside pools (a malloc/free-counting detector below poolscope)");
  out += Card(Thousands(view("pool_blocks")), "unfreed pool blocks (poolscope's pools, not the program's)");
  if (view("internal_blocks").value_or(0) != 0) {
    out += Card(Thousands(view("internal_blocks")), "unfreed blocks of poolscope's own");
  }
  out += "</div>\n";
  out += fmt::format("<div class=\"verdict\">{}</div>\n", E(Verdict(json::object(), report)));
  std::optional<bool> balanced = Bool(report, "reconciliation.balanced");
  out += "<h3>Real blocks live at exit, by kind</h3>\n" + LiveChart(report);
  out += fmt::format(
      "<p>{} real live = {} unpooled live + {} pools cached + {} pools in use: {}</p>\n",
      E(Thousands(Count(report, "reconciliation.real_live_blocks"))),
      E(Thousands(Count(report, "reconciliation.unpooled_live_blocks"))),
      E(Thousands(Count(report, "reconciliation.pools_cached"))),
      E(Thousands(Count(report, "reconciliation.pools_in_use"))),
      !balanced ? "n/a"
                : *balanced ? "<span class=\"ok\">balanced</span>"
                            : "<span class=\"bad\">NOT balanced</span>");
  // memcheck's and LeakSanitizer's predicted reports: their verdict in view, their figures one
  // click away.
  constexpr std::string_view kMemcheck = "reconciliation.detector_view.reachability";
  std::string figures;
  if (Bool(report, fmt::format("{}.scanned", kMemcheck)).value_or(false)) {
    figures += "<p>memcheck below poolscope, the real blocks by reachability:</p>\n"
               "<table><tr><th></th><th class=\"n\">blocks</th><th class=\"n\">bytes</th></tr>\n";
    for (const char* kind : kKinds) {
      figures += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
                             E(Words(kind)), E(Thousands(ReachabilityBlocks(report, kMemcheck, kind))),
                             E(Bytes(ReachabilityBytes(report, kMemcheck, kind))));
    }
    figures += "</table>\n";
    figures += fmt::format(
        "<p>Of the program's lost blocks, {} ({}) sit in pools, where memcheck below poolscope "
        "cannot see them.</p>\n",
        E(Thousands(view("hidden_in_pools.blocks"))), E(Bytes(view("hidden_in_pools.bytes"))));
  }
  auto lsan_count = [&](std::string_view what, std::string_view unit) {
    return view(fmt::format("lsan.{}.{}", what, unit));
  };
  if (Bool(report, "reconciliation.detector_view.lsan.scanned").value_or(false)) {
    figures += fmt::format(
        "<p>LeakSanitizer below poolscope reports {} leaked blocks ({}): {} direct, {} indirect. Of the "
        "blocks it would report without poolscope, {} ({}) sit in pools.</p>\n",
        E(Thousands(lsan_count("leaked", "blocks"))), E(Bytes(lsan_count("leaked", "bytes"))),
        E(Thousands(lsan_count("direct", "blocks"))), E(Thousands(lsan_count("indirect", "blocks"))),
        E(Thousands(lsan_count("hidden_in_pools", "blocks"))), E(Bytes(lsan_count("hidden_in_pools", "bytes"))));
  } else if (std::optional<std::string> why = String(report, "reconciliation.detector_view.lsan.not_scanned_why")) {
    figures += "<p>LeakSanitizer below poolscope: not predicted (" + E(*why) + ").</p>\n";
  }
  if (std::optional<std::string> sentence =
          String(report, "reconciliation.detector_view.reachability_verdict")) {
    out += "<div class=\"verdict\">" + E(*sentence) + "</div>\n";
  }
  if (!figures.empty()) {
    out += "<details class=\"detectors\"><summary>memcheck&#39;s and LeakSanitizer&#39;s figures below "
           "poolscope</summary>\n" + figures + "</details>\n";
  }
  return out + "</section>\n";
}

// The flame graph of the lost bytes, and of every byte live at exit, one shown at a time: two radio
// buttons and CSS pick the view (no script). Without a scan, only the live bytes, and why.
std::string FlameSection(const json& report) {
  std::string out = "<section id=\"flame\">\n<h2>Bytes at exit by allocation stack (flame graph)</h2>\n"
                    "<p>Each box is a frame, as wide as the bytes below it; callers under their callees, "
                    "the outermost at the bottom. Hover a box for its figures.</p>\n";
  if (!Bool(report, "reachability.scanned").value_or(false)) {
    return out + "<p>Reachability was not computed for this run, so the lost bytes are not known: the "
                 "graph shows every byte live at exit.</p>\n" +
           FlameGraph(report, FlameBytes::kAllLive) + "</section>\n";
  }
  std::optional<int64_t> lost_bytes = 0, live_bytes = 0;
  for (const char* kind : kKinds) {
    std::optional<int64_t> b = ReachabilityBytes(report, "reachability", kind);
    live_bytes = live_bytes && b ? std::optional<int64_t>(SaturatingAdd(*live_bytes, *b)) : std::nullopt;
    if (std::string_view(kind) != "still_reachable") {
      lost_bytes = lost_bytes && b ? std::optional<int64_t>(SaturatingAdd(*lost_bytes, *b)) : std::nullopt;
    }
  }
  out += "<input type=\"radio\" name=\"flame-view\" id=\"flame-lost\" class=\"flame-lost\" checked>"
         "<label class=\"flame-choice\" for=\"flame-lost\">lost bytes (definitely, indirectly and "
         "possibly lost): " + E(Bytes(lost_bytes)) + "</label>\n"
         "<input type=\"radio\" name=\"flame-view\" id=\"flame-all\" class=\"flame-all\">"
         "<label class=\"flame-choice\" for=\"flame-all\">all bytes live at exit: " + E(Bytes(live_bytes)) +
         "</label>\n";
  out += "<div class=\"flame-view flame-lost\">\n" + FlameGraph(report, FlameBytes::kLost) + "</div>\n";
  out += "<div class=\"flame-view flame-all\">\n" + FlameGraph(report, FlameBytes::kAllLive) + "</div>\n";
  return out + "</section>\n";
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
  std::string page = PageStart("poolscope report: " + exe);
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
  page += LossSection(report);
  page += DetectorSection(report);
  page += "<section id=\"ledgers\">\n<h2>The two ledgers</h2>\n<p>Logical: the calls as the program "
          "made them; real: as they reached the allocator below poolscope.</p>\n" +
          LedgerTableHtml(report) + "</section>\n";
  page += "<section id=\"sizes\">\n<h2>Request sizes</h2>\n" + SizeChart(report) + "</section>\n";
  if (std::string timeline = TimelineChart({{&report, ""}}); !timeline.empty()) {
    page += "<section id=\"timeline\">\n<h2>Memory over time</h2>\n" + timeline + "</section>\n";
  }
  page += FlameSection(report);
  page += "<section id=\"leaks\">\n<h2>Leaks (live logical blocks at exit, lost first)</h2>\n" +
          LeakTable(report) + "</section>\n";
  page += "<section id=\"sites\">\n<h2>Call sites (top " + std::to_string(kSitesShown) +
          " by logical allocations)</h2>\n" + SitesTable(report) + "</section>\n";
  page += PinningSection(report);
  page += fmt::format(
      "<section id=\"pool\">\n<h2>Pool</h2>\n<p>pool size {}, {} pools per thread; hits {} ({} of the "
      "logical allocations); pools created {}, reused {}, released {}; at exit {} cached, {} in "
      "use.</p>\n</section>\n",
      E(Bytes(Count(report, "pool.pool_size"))), E(Thousands(Count(report, "pool.pools_per_thread"))),
      E(Thousands(hits)), E(Percent(hits, logical)), E(Thousands(Count(report, "pool.pools_created"))),
      E(Thousands(Count(report, "pool.pools_reused"))),
      E(Thousands(Count(report, "pool.pools_released"))),
      E(Thousands(Count(report, "pool.pools_cached_at_exit"))),
      E(Thousands(Count(report, "pool.pools_in_use_at_exit"))));
  page += fmt::format("<section id=\"errors\">\n<h2>Errors</h2>\n<p>invalid frees {}, double frees {}.</p>\n"
                      "</section>\n",
                      E(Thousands(Count(report, "errors.invalid_frees"))),
                      E(Thousands(Count(report, "errors.double_frees"))));
  return page + PageEnd();
}

std::string HtmlCellTable(const CellTable& table) {
  std::string out;
  if (!table.caption.empty()) out += fmt::format("<p>{}</p>\n", E(table.caption));
  out += "<table class=\"processes\">\n";
  for (size_t r = 0; r < table.rows.size(); ++r) {
    out += "<tr>";
    for (size_t c = 0; c < table.rows[r].size(); ++c) {
      const char* tag = r == 0 ? "th" : "td";
      out += fmt::format("<{}{}>{}</{}>", tag, c == table.text_column ? "" : " class=\"n\"", E(table.rows[r][c]), tag);
    }
    out += "</tr>\n";
  }
  out += "</table>\n";
  if (!table.after.empty()) out += fmt::format("<pre>{}</pre>\n", E(table.after));
  return out;
}

std::string HtmlTreeReport(const std::string& title, const std::string& summary, const CellTable& processes_table,
                           const std::vector<std::pair<const nlohmann::json*, std::string>>& processes) {
  std::string page = PageStart("poolscope report: " + title);
  page += fmt::format("<h1>poolscope report: {}</h1>\n", E(title));
  page += "<section id=\"tree\">\n";
  for (size_t at = 0; at < summary.size();) {
    size_t end = summary.find('\n', at);
    if (end == std::string::npos) end = summary.size();
    if (end > at) page += fmt::format("<p>{}</p>\n", E(summary.substr(at, end - at)));
    at = end + 1;
  }
  page += HtmlCellTable(processes_table) + "</section>\n";
  for (const auto& [report, path] : processes) {
    // Each process's own page, its element ids prefixed with its pid so that they stay unique, and
    // so the labels' targets and the radio buttons' group names (each process's flame graph
    // switches on its own). Text from the report is escaped, so an attribute's `="` is markup.
    std::string one = HtmlReport(*report, path);
    size_t begin = one.find("<main>\n"), end = one.rfind("</main>");
    if (begin == std::string::npos || end == std::string::npos) continue;
    std::string prefixed = one.substr(begin + 7, end - begin - 7);
    std::string pid = Thousands(Count(*report, "process.pid"));
    pid.erase(std::remove(pid.begin(), pid.end(), ','), pid.end());
    for (const std::string attribute : {" id=\"", " for=\"", " name=\""}) {
      std::string body = std::move(prefixed);
      prefixed.clear();
      for (size_t at = 0;;) {
        size_t next = body.find(attribute, at);
        if (next == std::string::npos) {
          prefixed += body.substr(at);
          break;
        }
        prefixed += body.substr(at, next + attribute.size() - at) + "p" + pid + "-";
        at = next + attribute.size();
      }
    }
    // Its headings one level down.
    for (const char* tag : {"h3", "h2", "h1"}) {
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
  return page + PageEnd();
}

}  // namespace poolscope::report
