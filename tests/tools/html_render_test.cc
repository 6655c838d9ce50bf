// File: tests/tools/html_render_test.cc
//
// The HTML pages (report/html_report.h) and their charts (report/html_charts.h) over recorded and
// hand-written reports, part of render_test: self-contained and escaped; what the program loses
// leads the page, from the reachability scan, and what a malloc/free-counting detector sees
// follows, named as such; each ledger once; the flame graph of the lost bytes with its switch to
// all bytes live at exit; call sites named by the code that called into glibc; the timeline; the
// comparison page's table as a <table> and its six timeline lines told apart. Expected figures come
// from the report documents the tests build or load, never from an earlier output.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "report/format_util.h"
#include "report/html_charts.h"
#include "report/html_report.h"
#include "report/leak_diff.h"
#include "report/ledger_table.h"
#include "report/stack_frames.h"
#include "report/text_report.h"
#include "tests/tools/render_test_util.h"

namespace poolscope::report {
namespace {

using nlohmann::json;
using testdata::LoadData;
using testdata::SitesReport;

constexpr size_t npos = std::string::npos;

// How many times `needle` occurs in `text`.
size_t Occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// "definitely lost" for "definitely_lost".
std::string Words(std::string kind) {
  std::replace(kind.begin(), kind.end(), '_', ' ');
  return kind;
}

// The element with `open` (an opening tag's text) up to `close`, from `text`; "" when absent.
std::string Between(const std::string& text, const std::string& open, const std::string& close) {
  size_t at = text.find(open);
  if (at == std::string::npos) return "";
  size_t end = text.find(close, at);
  return text.substr(at, end == std::string::npos ? std::string::npos : end + close.size() - at);
}

// The value of attribute `name` in the first tag of `element`, "" when it has none.
std::string Attribute(const std::string& element, const std::string& name) {
  size_t tag_end = element.find('>');
  size_t at = element.find(" " + name + "=\"");
  if (at == std::string::npos || at > tag_end) return "";
  at += name.size() + 3;
  return element.substr(at, element.find('"', at) - at);
}

TEST(HtmlReportTest, SelfContainedEscapedAndComplete) {
  std::string html = HtmlReport(LoadData("report_on.json"), "report_on.json");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http:"), std::string::npos);
  EXPECT_EQ(html.find("https:"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("<style>"), std::string::npos);
  // The charts, the flame graph, the leak table and the call-site table.
  EXPECT_NE(html.find("<table class=\"ledgers\">"), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"request sizes\""), std::string::npos);
  EXPECT_NE(html.find(">pool size 64 B</text>"), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"real blocks live at exit by kind\""), std::string::npos);
  EXPECT_NE(html.find("leak_config_table()"), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"flame\""), std::string::npos);
  EXPECT_NE(html.find("<table class=\"sites\">"), std::string::npos);
  EXPECT_NE(html.find(">requests</text>"), std::string::npos);
  EXPECT_NE(html.find(">request size in bytes (bucket upper bound)</text>"), std::string::npos);
  // Strings from the report are escaped.
  EXPECT_NE(html.find("Registry&lt;&quot;a&amp;b&quot;&gt;::Init()"), std::string::npos);
  EXPECT_NE(html.find("std::vector&lt;Session*, std::allocator&lt;Session*&gt; &gt;::reserve"),
            std::string::npos);
  EXPECT_EQ(html.find("Registry<"), std::string::npos);
}

// Memory over time: a section with the two ledgers' live blocks and the resident set, each a line
// through its points; none for a report without a timeline (or with one point).
TEST(HtmlReportTest, TimelineDrawnWhenTheReportHasOne) {
  using nlohmann::json;
  json doc = LoadData("report_on.json");
  EXPECT_EQ(HtmlReport(doc, "r.json").find("id=\"timeline\""), std::string::npos);
  json points = json::array();
  for (int i = 0; i <= 4; ++i) {
    points.push_back({{"t_ms", 250 * i},
                      {"logical_live_blocks", 1000 * i},
                      {"real_live_blocks", 500 * i},
                      {"pools", 10 * i},
                      {"rss_kib", 2048 + 1024 * i}});
  }
  doc["timeline"] = {{"interval_ms", 5}, {"points", json::array({points[0]})}};
  EXPECT_EQ(HtmlReport(doc, "r.json").find("id=\"timeline\""), std::string::npos);
  doc["timeline"]["points"] = points;
  std::string html = HtmlReport(doc, "r.json");
  size_t at = html.find("<section id=\"timeline\">");
  ASSERT_NE(at, std::string::npos);
  std::string section = html.substr(at, html.find("</section>", at) - at);
  EXPECT_NE(section.find("aria-label=\"memory over time\""), std::string::npos);
  size_t lines = 0;
  for (size_t p = section.find("<polyline"); p != std::string::npos; p = section.find("<polyline", p + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 3u) << section;
  // The plot is 870 wide from x=90, 186 high down to y=220: the last point of the logical line
  // (4000 blocks, the most) is at the top right; its first at the bottom left.
  EXPECT_NE(section.find("points=\"90.0,220.0 "), std::string::npos) << section;
  EXPECT_NE(section.find(" 960.0,34.0\"><title>logical live blocks</title>"), std::string::npos)
      << section;
  EXPECT_NE(section.find(">4,000</text>"), std::string::npos);  // the blocks axis
  EXPECT_NE(section.find(">6.0 MiB</text>"), std::string::npos) << section;  // the resident-set axis
  EXPECT_NE(section.find(">time since the library started (seconds)</text>"), std::string::npos);
  EXPECT_NE(section.find(">live blocks (count)</text>"), std::string::npos);
  // With live bytes at every point (track=1) the two ledgers' lines are bytes, on a bytes axis.
  for (json& p : points) {
    p["logical_live_bytes"] = 1024 * p["logical_live_blocks"].get<int64_t>();
    p["real_live_bytes"] = 1024 * p["real_live_blocks"].get<int64_t>();
  }
  doc["timeline"]["points"] = points;
  html = HtmlReport(doc, "r.json");
  at = html.find("<section id=\"timeline\">");
  ASSERT_NE(at, std::string::npos);
  section = html.substr(at, html.find("</section>", at) - at);
  EXPECT_NE(section.find(" 960.0,34.0\"><title>logical live bytes</title>"), std::string::npos) << section;
  EXPECT_NE(section.find("<title>real live bytes</title>"), std::string::npos) << section;
  EXPECT_EQ(section.find("live blocks"), std::string::npos) << section;
  EXPECT_NE(section.find(">3.9 MiB</text>"), std::string::npos) << section;  // 4,000 KiB, the most
  EXPECT_NE(section.find(">live bytes</text>"), std::string::npos) << section;
}

TEST(HtmlReportTest, HostileStringsCannotBreakOut) {
  nlohmann::json doc = LoadData("minimal.json");
  doc["process"]["exe"] = "</title><script>alert(1)</script>\xff";
  std::string html = HtmlReport(doc, "x\"><b>");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("x\"><b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;/title&gt;&lt;script&gt;"), std::string::npos);
  EXPECT_NE(html.find("\xEF\xBF\xBD"), std::string::npos);  // the invalid byte, replaced
}

TEST(SitesTest, HtmlTableFoldsEachStackToItsSiteFrame) {
  std::string html = HtmlReport(SitesReport(), "sites.json");
  size_t beta = html.find(
      "<tr><td class=\"n\">1</td><td class=\"n\">50</td><td class=\"n\">50</td><td class=\"n\">0"
      "</td><td class=\"n\">800 B</td><td class=\"n\">0 (0 B)</td><td class=\"stack\"><details "
      "class=\"stack\"><summary><span class=\"site\">beta <span class=\"where\">/bin/p</span></span>");
  size_t gamma = html.find(
      "<tr><td class=\"n\">2</td><td class=\"n\">10</td><td class=\"n\">0</td><td class=\"n\">10"
      "</td><td class=\"n\">960 B</td><td class=\"n\">0 (0 B)</td><td class=\"stack\"><details "
      "class=\"stack\"><summary><span class=\"site\">gamma <span class=\"where\">/bin/p</span></span> "
      "<span class=\"more\">"
      "(2 frames)</span></summary>\n<div class=\"frame skipped\">poolscope_arena_alloc");
  size_t alpha = html.find(
      "<tr><td class=\"n\">3</td><td class=\"n\">10</td><td class=\"n\">8</td><td class=\"n\">2"
      "</td><td class=\"n\">640 B</td><td class=\"n\">3 (96 B)</td><td class=\"stack\"><details "
      "class=\"stack\"><summary><span class=\"site\">alpha <span class=\"where\">/bin/p</span></span> "
      "<span class=\"more\">"
      "(3 frames)</span></summary>\n<div class=\"frame skipped\">malloc");
  EXPECT_NE(beta, std::string::npos) << html;
  EXPECT_NE(gamma, std::string::npos);
  EXPECT_NE(alpha, std::string::npos);
  EXPECT_LT(beta, gamma);
  EXPECT_LT(gamma, alpha);
  EXPECT_NE(html.find("<section id=\"sites\">"), std::string::npos);
}

// Two stacks under main: f <- g <- main holds 300 B, malloc <- h <- main 100 B. The graph has
// four rows (all, main, g and h, f) of 18 px, the outermost at the bottom; of 1000 px, main takes
// all, g 300/400 = 750 px from x 10, h the remaining 250 px from x 760, and malloc is left out.
TEST(FlameGraphTest, WidthsFromBytesByStack) {
  nlohmann::json doc = nlohmann::json::parse(R"({"leaks": [
      {"blocks": 3, "bytes": 300,
       "stack": [{"function": "f", "object": "/bin/p"}, {"function": "g", "object": "/bin/p"},
                 {"function": "main", "object": "/bin/p"}]},
      {"blocks": 1, "bytes": 100,
       "stack": [{"function": "malloc", "object": "/lib/libc.so.6"},
                 {"function": "h", "object": "/bin/p"}, {"function": "main", "object": "/bin/p"}]}]})");
  std::string svg = FlameGraph(doc, FlameBytes::kAllLive);
  EXPECT_EQ(svg.rfind("<svg class=\"flame\" width=\"1020\" height=\"72\"", 0), 0u) << svg;
  auto frame = [&](const std::string& title, const std::string& geometry) {
    return svg.find("<g class=\"frame\"><title>" + title + "</title><rect " + geometry);
  };
  EXPECT_NE(frame("all live bytes: 400 B (100.0% of live bytes)",
                  "x=\"10.0\" y=\"54\" width=\"1000.0\" height=\"17\""),
            std::string::npos)
      << svg;
  EXPECT_NE(frame("main: 400 B (100.0% of live bytes)",
                  "x=\"10.0\" y=\"36\" width=\"1000.0\" height=\"17\""),
            std::string::npos);
  EXPECT_NE(frame("g: 300 B (75.0% of live bytes)",
                  "x=\"10.0\" y=\"18\" width=\"750.0\" height=\"17\""),
            std::string::npos);
  EXPECT_NE(frame("h: 100 B (25.0% of live bytes)",
                  "x=\"760.0\" y=\"18\" width=\"250.0\" height=\"17\""),
            std::string::npos);
  EXPECT_NE(frame("f: 300 B (75.0% of live bytes)",
                  "x=\"10.0\" y=\"0\" width=\"750.0\" height=\"17\""),
            std::string::npos);
  EXPECT_EQ(svg.find("malloc"), std::string::npos);
  // main is one box, shared by both stacks.
  EXPECT_EQ(svg.find("<title>main:"), svg.rfind("<title>main:"));
  EXPECT_EQ(FlameGraph(nlohmann::json::object(), FlameBytes::kAllLive), "<p>No bytes live at exit.</p>\n");
  std::string html = HtmlReport(doc, "flame.json");
  EXPECT_NE(html.find("<section id=\"flame\">"), std::string::npos);
  EXPECT_NE(html.find("<title>g: 300 B (75.0% of live bytes)</title>"), std::string::npos);
}

// Untrusted figures: byte counts that would overflow when summed and a stack of 1,000 frames.
// The sums stay at INT64_MAX (each box of the one path is then the whole width) and the graph
// keeps the outermost 128 frames: 129 rows of 18 px with the root.
TEST(FlameGraphTest, HugeFiguresAndDeepStacksAreBounded) {
  nlohmann::json frames = nlohmann::json::array();
  for (int i = 0; i < 1000; ++i) frames.push_back({{"function", "fn" + std::to_string(i)}});
  nlohmann::json doc = {{"leaks",
                         {{{"blocks", 1}, {"bytes", INT64_MAX}, {"stack", frames}},
                          {{"blocks", 1}, {"bytes", INT64_MAX}, {"stack", frames}}}}};
  std::string svg = FlameGraph(doc, FlameBytes::kAllLive);
  EXPECT_EQ(svg.rfind("<svg class=\"flame\" width=\"1020\" height=\"2322\"", 0), 0u)
      << svg.substr(0, 200);
  EXPECT_NE(svg.find("<title>fn999: "), std::string::npos);
  EXPECT_NE(svg.find("<title>fn872: "), std::string::npos);
  EXPECT_EQ(svg.find("<title>fn871: "), std::string::npos);
  EXPECT_NE(svg.find("<title>fn872: 8589934592.00 GiB (100.0% of live bytes)"), std::string::npos);
  doc["sites"] = {{{"logical_allocs", 1}, {"stack", frames}}};
  EXPECT_NE(TextReport(doc, "huge.json").find("#1"), std::string::npos);
}

// The call site is the first frame outside libc, the dynamic loader and libpoolscope.so: the code
// that called strdup, printf, fputs or pthread_create, with what it called; a stack entirely
// inside them keeps its innermost frame that is not the allocator.
TEST(SiteFrameTest, FirstFrameOutsideLibcTheLoaderAndPoolscope) {
  const char* const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  const char* const loader = "/usr/lib64/ld-linux-x86-64.so.2";
  auto frame = [](const char* function, const char* object) {
    return json{{"function", function}, {"object", object}};
  };
  const json strdup_stack = {frame("malloc", "/opt/lib/libpoolscope.so"), frame("__strdup", libc),
                             frame("copy_name", "/bin/p"), frame("main", "/bin/p")};
  const json tls_stack = {frame("allocate_dtv", loader), frame("_dl_allocate_tls", loader),
                          frame("pthread_create@GLIBC_2.2.5", libc), frame("start_workers", "/bin/p")};
  const json libc_only = {frame("malloc", libc), frame("__libc_alloc_buffer_allocate", libc),
                          frame("__res_context_send", libc)};
  const json new_stack = {frame("operator new(unsigned long)", "/usr/lib/libstdc++.so.6"),
                          frame("Grow()", "/bin/p")};
  EXPECT_EQ(SiteFrame(strdup_stack), 2u);
  EXPECT_EQ(SiteVia(strdup_stack), "__strdup");
  EXPECT_EQ(SiteFrame(tls_stack), 3u);
  EXPECT_EQ(SiteVia(tls_stack), "pthread_create@GLIBC_2.2.5");
  EXPECT_EQ(SiteFrame(libc_only), 1u);
  EXPECT_EQ(SiteVia(libc_only), "");
  EXPECT_EQ(SiteFrame(new_stack), 1u);
  EXPECT_EQ(SiteVia(new_stack), "");
}

// In the page's call-site table: two sites whose blocks stdio allocated (both innermost in
// `_IO_file_doallocate`) are told apart by their callers, and strdup's copy is the caller's.
TEST(SitesTest, HtmlNamesTheCallerOfGlibc) {
  const json doc = json::parse(R"({"sites": [
      {"logical_allocs": 3, "stack": [{"function": "__strdup", "object": "/lib/libc.so.6"},
                                      {"function": "copy_name", "object": "/bin/p"}]},
      {"logical_allocs": 2, "stack": [{"function": "_IO_file_doallocate", "object": "/lib/libc.so.6"},
                                      {"function": "_IO_doallocbuf", "object": "/lib/libc.so.6"},
                                      {"function": "printf", "object": "/lib/libc.so.6"},
                                      {"function": "greet", "object": "/bin/p"}]},
      {"logical_allocs": 1, "stack": [{"function": "_IO_file_doallocate", "object": "/lib/libc.so.6"},
                                      {"function": "fputs", "object": "/lib/libc.so.6"},
                                      {"function": "log_line", "object": "/bin/p"}]}]})");
  const std::string sites = Between(HtmlReport(doc, "glibc.json"), "<table class=\"sites\">", "</table>");
  const std::pair<const char*, const char*> expected[] = {
      {"copy_name", "__strdup"}, {"greet", "printf"}, {"log_line", "fputs"}};
  size_t at = 0;
  for (const auto& [site, via] : expected) {
    const std::string summary = std::string("<summary><span class=\"site\">") + site +
                                " <span class=\"where\">/bin/p</span></span> <span class=\"via\">via " + via +
                                "</span>";
    const size_t found = sites.find(summary, at);
    EXPECT_NE(found, npos) << summary << "\n" << sites;
    at = found == npos ? at : found;
  }
  EXPECT_EQ(sites.find("<span class=\"site\">_IO_file_doallocate"), npos);
  EXPECT_EQ(sites.find("<span class=\"site\">__strdup"), npos);
  EXPECT_NE(sites.find("<div class=\"frame skipped\">_IO_file_doallocate"), npos);
}

// What the program loses leads the page: the reachability scan's four classes, blocks and bytes,
// each as the report's `reachability` gives it. What a malloc/free-counting detector sees follows,
// as unfreed blocks outside pools and pool blocks, never called leaks, and the counting detector's
// verdict only there.
TEST(HtmlHeadlineTest, WhatTheProgramLosesLeadsThePage) {
  const json doc = LoadData("reach_list_on.json");
  const std::string html = HtmlReport(doc, "reach_list_on.json");
  const size_t body = html.find("<main>");
  const size_t loss = html.find("<section id=\"loss\" class=\"headline\">");
  ASSERT_NE(loss, npos) << html;
  // Before it only the title lines: no other section, no card, no verdict.
  const std::string before = html.substr(body, loss - body);
  EXPECT_EQ(before.find("<section"), npos) << before;
  EXPECT_EQ(before.find("class=\"card"), npos) << before;
  EXPECT_EQ(before.find("verdict"), npos) << before;
  const std::string section = Between(html, "<section id=\"loss\"", "</section>");
  const json& r = doc["reachability"];
  for (const char* kind : {"definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"}) {
    const int64_t blocks = r[kind]["blocks"].get<int64_t>();
    const std::string card = "<div class=\"card " + std::string(kind) + "\"><div class=\"l\">" + Words(kind) +
                             "</div><div class=\"n\">" + Thousands(blocks) + (blocks == 1 ? " block" : " blocks") +
                             "</div><div class=\"b\">" + Bytes(r[kind]["bytes"].get<int64_t>()) + "</div></div>";
    EXPECT_NE(section.find(card), npos) << card << "\n" << section;
  }
  const int64_t lost = r["definitely_lost"]["blocks"].get<int64_t>() + r["indirectly_lost"]["blocks"].get<int64_t>();
  const int64_t lost_bytes = r["definitely_lost"]["bytes"].get<int64_t>() + r["indirectly_lost"]["bytes"].get<int64_t>();
  EXPECT_NE(section.find("The program loses <b>" + Thousands(lost) + " blocks (" + Bytes(lost_bytes) + ")</b> at exit"),
            npos)
      << section;
  // The detector's view after it, its figures named for what they are.
  const size_t detector_at = html.find("<section id=\"detector\">");
  ASSERT_NE(detector_at, npos);
  EXPECT_GT(detector_at, loss);
  const std::string detector = Between(html, "<section id=\"detector\">", "</section>");
  const json& view = doc["reconciliation"]["detector_view"];
  EXPECT_NE(detector.find("<div class=\"n\">" + Thousands(view["program_leak_blocks"].get<int64_t>()) +
                          "</div><div class=\"l\">unfreed blocks outside pools (a malloc/free-counting detector"),
            npos)
      << detector;
  EXPECT_NE(detector.find("<div class=\"n\">" + Thousands(view["pool_blocks"].get<int64_t>()) +
                          "</div><div class=\"l\">unfreed pool blocks"),
            npos)
      << detector;
  for (size_t at = detector.find("<div class=\"l\">"); at != npos; at = detector.find("<div class=\"l\">", at + 1)) {
    const std::string label = detector.substr(at, detector.find("</div>", at) - at);
    EXPECT_EQ(label.find("leak"), npos) << label;
  }
  const std::string verdict = HtmlEscape(view["verdict"].get<std::string>());
  EXPECT_EQ(section.find(verdict), npos);
  EXPECT_NE(detector.find(verdict), npos);
  EXPECT_EQ(html.find(verdict), html.rfind(verdict));
}

// Without a scan the headline says that what the program loses is not known, and why.
TEST(HtmlHeadlineTest, NoScanSaidPlainly) {
  json doc = LoadData("report_on.json");  // written before the scan existed: no `reachability`
  std::string section = Between(HtmlReport(doc, "r.json"), "<section id=\"loss\"", "</section>");
  EXPECT_NE(section.find("<p class=\"unknown\">Reachability was not computed for this run (the report has no "
                         "reachability scan), so what the program loses is not known: " +
                         Thousands(doc["logical"]["live_blocks"].get<int64_t>()) + " logical blocks"),
            npos)
      << section;
  EXPECT_EQ(section.find("class=\"card"), npos) << section;
  doc["reachability"] = {{"scanned", false}, {"not_scanned_why", "track=0"}};
  const std::string html = HtmlReport(doc, "r.json");
  section = Between(html, "<section id=\"loss\"", "</section>");
  EXPECT_NE(section.find("Reachability was not computed for this run (track=0), so what the program loses is not "
                         "known"),
            npos)
      << section;
  // The flame graph then draws every live byte, says why, and has no switch.
  const std::string flame = Between(html, "<section id=\"flame\">", "</section>");
  EXPECT_NE(flame.find("Reachability was not computed for this run, so the lost bytes are not known"), npos) << flame;
  EXPECT_NE(flame.find("aria-label=\"flame graph of live bytes at exit\""), npos) << flame;
  EXPECT_EQ(flame.find("type=\"radio\""), npos) << flame;
}

// Each ledger appears once on the page: one table holds both, a bar pair per row to that row's
// scale (the larger figure 190 px); no chart, card or second table repeats their figures.
TEST(HtmlLedgersTest, EachLedgerOnce) {
  const json doc = LoadData("demo_on.json");
  const std::string html = HtmlReport(doc, "demo_on.json");
  EXPECT_EQ(Occurrences(html, "<table class=\"ledgers\">"), 1u);
  EXPECT_EQ(Occurrences(html, "<h2>The two ledgers</h2>"), 1u);
  EXPECT_EQ(html.find("<h2>Ledgers</h2>"), npos);
  for (const char* ledger : {"logical", "real"}) {
    for (const char* field : {"allocs", "frees"}) {
      const std::string figure = ">" + Thousands(doc[ledger][field].get<int64_t>()) + "<";
      EXPECT_EQ(Occurrences(html, figure), 1u) << ledger << "." << field << " " << figure;
    }
  }
  const int64_t logical = doc["logical"]["allocs"].get<int64_t>(), real = doc["real"]["allocs"].get<int64_t>();
  ASSERT_GT(logical, real);
  const std::string row = Between(html, "<tr><td>allocations</td>", "</tr>");
  EXPECT_NE(row.find("<td class=\"n\">" + Thousands(logical) + "</td><td class=\"n\">" + Thousands(real) + "</td>"),
            npos)
      << row;
  EXPECT_NE(row.find("<rect class=\"logical\" x=\"0\" y=\"2\" width=\"190.0\""), npos) << row;
  char real_width[32];
  std::snprintf(real_width, sizeof real_width, "%.1f", 190.0 * static_cast<double>(real) / static_cast<double>(logical));
  EXPECT_NE(row.find("<rect class=\"real\" x=\"0\" y=\"12\" width=\"" + std::string(real_width) + "\""), npos) << row;
}

// The lost bytes by default: the flame graph of the definitely, indirectly and possibly lost groups;
// all bytes live at exit behind a radio button (CSS shows the checked one's graph, no script).
TEST(FlameGraphTest, LostBytesByDefaultAllLiveBehindASwitch) {
  json doc = json::parse(R"({
    "reachability": {"scanned": true, "definitely_lost": {"blocks": 1, "bytes": 100},
                     "indirectly_lost": {"blocks": 2, "bytes": 50}, "possibly_lost": {"blocks": 1, "bytes": 30},
                     "still_reachable": {"blocks": 1, "bytes": 4096}},
    "leaks": [
      {"kind": "still_reachable", "blocks": 1, "bytes": 4096,
       "stack": [{"function": "_IO_file_doallocate", "object": "/lib/libc.so.6"},
                 {"function": "printf", "object": "/lib/libc.so.6"}, {"function": "main", "object": "/bin/p"}]},
      {"kind": "definitely_lost", "blocks": 1, "bytes": 100,
       "stack": [{"function": "lose_head", "object": "/bin/p"}, {"function": "main", "object": "/bin/p"}]},
      {"kind": "indirectly_lost", "blocks": 2, "bytes": 50,
       "stack": [{"function": "lose_tail", "object": "/bin/p"}, {"function": "main", "object": "/bin/p"}]},
      {"kind": "possibly_lost", "blocks": 1, "bytes": 30,
       "stack": [{"function": "keep_inside", "object": "/bin/p"}, {"function": "main", "object": "/bin/p"}]}]})");
  const json& r = doc["reachability"];
  const int64_t lost = r["definitely_lost"]["bytes"].get<int64_t>() + r["indirectly_lost"]["bytes"].get<int64_t>() +
                       r["possibly_lost"]["bytes"].get<int64_t>();
  const int64_t live = lost + r["still_reachable"]["bytes"].get<int64_t>();
  const std::string lost_svg = FlameGraph(doc, FlameBytes::kLost);
  EXPECT_NE(lost_svg.find("<title>all lost bytes: " + Bytes(lost) + " (100.0% of lost bytes)</title>"), npos)
      << lost_svg;
  for (const char* frame : {"lose_head", "lose_tail", "keep_inside"}) {
    EXPECT_NE(lost_svg.find(std::string("<title>") + frame + ": "), npos) << frame;
  }
  EXPECT_EQ(lost_svg.find("printf"), npos) << lost_svg;
  const std::string all_svg = FlameGraph(doc, FlameBytes::kAllLive);
  EXPECT_NE(all_svg.find("<title>all live bytes: " + Bytes(live) + " (100.0% of live bytes)</title>"), npos)
      << all_svg;
  EXPECT_NE(all_svg.find("<title>printf: "), npos);

  const std::string html = HtmlReport(doc, "flame.json");
  const std::string flame = Between(html, "<section id=\"flame\">", "</section>");
  const size_t lost_radio = flame.find(
      "<input type=\"radio\" name=\"flame-view\" id=\"flame-lost\" class=\"flame-lost\" checked>");
  const size_t all_radio =
      flame.find("<input type=\"radio\" name=\"flame-view\" id=\"flame-all\" class=\"flame-all\">");
  const size_t lost_view = flame.find("<div class=\"flame-view flame-lost\">\n" + lost_svg + "</div>");
  const size_t all_view = flame.find("<div class=\"flame-view flame-all\">\n" + all_svg + "</div>");
  EXPECT_NE(lost_radio, npos) << flame;
  EXPECT_NE(all_radio, npos) << flame;
  EXPECT_NE(lost_view, npos) << flame;
  EXPECT_NE(all_view, npos) << flame;
  // The radio buttons come before the views, their siblings, which the style sheet hides unless
  // the matching button is checked.
  EXPECT_LT(std::max(lost_radio, all_radio), std::min(lost_view, all_view));
  EXPECT_NE(flame.find("<label class=\"flame-choice\" for=\"flame-lost\">lost bytes (definitely, indirectly and "
                       "possibly lost): " + Bytes(lost) + "</label>"),
            npos);
  EXPECT_NE(flame.find("<label class=\"flame-choice\" for=\"flame-all\">all bytes live at exit: " + Bytes(live) +
                       "</label>"),
            npos);
  EXPECT_NE(html.find("div.flame-view { display: none; }"), npos);
  EXPECT_NE(html.find("input.flame-lost:checked ~ div.flame-lost, input.flame-all:checked ~ div.flame-all { "
                      "display: block; }"),
            npos);
  EXPECT_EQ(Occurrences(html, " checked"), 1u);
}

// A tree's page: each process's flame graph switches on its own (its radio buttons' ids, labels'
// targets and group name carry its pid), and its headings are one level down.
TEST(HtmlTreeReportTest, EachProcessHasItsOwnFlameSwitch) {
  json a = LoadData("reach_list_on.json"), b = a;
  a["process"]["pid"] = 100;
  b["process"]["pid"] = 200;
  const std::string html = HtmlTreeReport("tree", "summary", CellTable{}, {{&a, "a.json"}, {&b, "b.json"}});
  for (const char* pid : {"100", "200"}) {
    const std::string p = std::string("p") + pid + "-";
    EXPECT_NE(html.find("<input type=\"radio\" name=\"" + p + "flame-view\" id=\"" + p + "flame-lost\""), npos) << pid;
    EXPECT_NE(html.find("for=\"" + p + "flame-lost\""), npos) << pid;
    EXPECT_NE(html.find("for=\"" + p + "flame-all\""), npos) << pid;
  }
  EXPECT_EQ(html.find("name=\"flame-view\""), npos);
  EXPECT_EQ(html.find("for=\"flame-"), npos);
  EXPECT_EQ(html.find("<h2>What the program loses"), npos);
  EXPECT_EQ(Occurrences(html, "<h3>What the program loses at exit</h3>"), 2u);
  EXPECT_EQ(Occurrences(html, "<h4>Real blocks live at exit, by kind</h4>"), 2u);
}

// The still-reachable line names each of the largest stacks by its site frame, not by glibc's
// innermost one: stdout's buffer by main (which called printf), not _IO_file_doallocate.
TEST(HtmlHeadlineTest, StillReachableNamedBySiteFrames) {
  const std::string html = HtmlReport(LoadData("reach_list_on.json"), "r.json");
  EXPECT_NE(html.find("largest: <code>libstdc++.so.6.0.30+0xa57b9</code>, <code>main</code>, "
                      "<code>make_list</code>"),
            npos)
      << Between(html, "<p class=\"reachable\">", "</p>");
  EXPECT_EQ(html.find("<code>_IO_file_doallocate</code>"), npos);
}

// A process tree's per-process table, on the tree's page and on a comparison page, is an HTML table:
// its caption, a heading row and a row per process with the same cells, figures right-aligned, and
// the lines of processes without a report after it; the summary lines are paragraphs, not
// preformatted text.
TEST(HtmlTreeReportTest, TheProcessTableIsATable) {
  CellTable table;
  table.caption = "processes: 2 with a report, by logical allocations";
  table.rows = {{"pid", "parent", "executable", "logical allocs"}, {"100", "-", "sh", "1,200"}, {"200", "100", "cc1 <x>", "900"}};
  table.text_column = 2;
  table.after = "without a report:\n  300 (exited)\n";
  auto check = [&](const std::string& html, const std::string& what) {
    const std::string cells = Between(html, "<table class=\"processes\">", "</table>");
    ASSERT_FALSE(cells.empty()) << what << html;
    EXPECT_EQ(Occurrences(cells, "<tr>"), table.rows.size()) << what;
    EXPECT_NE(cells.find("<tr><th class=\"n\">pid</th><th class=\"n\">parent</th><th>executable</th>"
                         "<th class=\"n\">logical allocs</th></tr>"), npos) << what << cells;
    EXPECT_NE(cells.find("<tr><td class=\"n\">200</td><td class=\"n\">100</td><td>cc1 &lt;x&gt;</td>"
                         "<td class=\"n\">900</td></tr>"), npos) << what << cells;
    EXPECT_NE(html.find("<p>" + table.caption + "</p>"), npos) << what;
    EXPECT_NE(html.find("<pre>without a report:\n  300 (exited)\n</pre>"), npos) << what;
  };
  const json a = LoadData("reach_list_on.json");
  const std::string tree = HtmlTreeReport("tree", "process tree: 3 processes\ntotals: 2,100 logical", table, {{&a, "a.json"}});
  check(tree, "tree page: ");
  EXPECT_NE(tree.find("<p>totals: 2,100 logical</p>"), npos);
  EXPECT_EQ(Occurrences(tree, "<pre>"), 1u) << "only the lines after the table are preformatted";
  const json off = LoadData("report_off.json"), on = LoadData("report_on.json");
  check(HtmlComparePage("compare sh", {&off, {}, "off", &off, "off"}, {&on, {}, "on", &on, "on"}, &table, false),
        "compare page: ");
}

// The comparison page's ledger is an HTML table: a row for each row of the text table, with the
// same cells, the change in its own column, the "of which" rows marked as parts; no preformatted
// text without a tree's process table.
TEST(HtmlComparePageTest, TheTableIsATable) {
  const json off = LoadData("report_off.json"), on = LoadData("report_on.json");
  const RunFacts off_facts{1.0, 2048}, on_facts{0.5, 1024};
  const std::string html = HtmlComparePage("compare p", {&off, off_facts, "pooling off", &off, "pooling off"},
                                           {&on, on_facts, "pooling on", &on, "pooling on"}, nullptr, false);
  EXPECT_EQ(html.find("<pre"), npos) << html;
  const std::string table = Between(html, "<table class=\"compare\">", "</table>");
  ASSERT_FALSE(table.empty()) << html;
  EXPECT_NE(table.find("<tr><th></th><th class=\"n\">pooling off</th><th class=\"n\">pooling on</th>"
                       "<th class=\"n\">change</th></tr>"),
            npos);
  const std::vector<LedgerRow> rows = LedgerRows(off, off_facts, on, on_facts);
  EXPECT_EQ(Occurrences(table, "<tr>"), rows.size() + 1);
  for (const LedgerRow& row : rows) {
    const bool part = row.label.rfind("  ", 0) == 0;
    const std::string tr = std::string("<tr><td class=\"label") + (part ? " sub" : "") + "\">" +
                           HtmlEscape(part ? row.label.substr(2) : row.label) + "</td><td class=\"n\">" +
                           HtmlEscape(row.before) + "</td><td class=\"n\">" + HtmlEscape(row.after) +
                           "</td><td class=\"n\">" + HtmlEscape(row.change) + "</td></tr>";
    EXPECT_NE(table.find(tr), npos) << tr;
  }
  // One figure checked against the reports themselves.
  EXPECT_NE(table.find("<td class=\"label\">logical allocations</td><td class=\"n\">" +
                       Thousands(off["logical"]["allocs"].get<int64_t>()) + "</td><td class=\"n\">" +
                       Thousands(on["logical"]["allocs"].get<int64_t>()) + "</td>"),
            npos);
  EXPECT_LT(html.find("</table>"), html.find("<div class=\"verdict\">"));
  // diff's page adds the leaks matched by stack, as a table.
  const std::string diff = HtmlComparePage("diff", {&off, {}, "A", &off, "A"}, {&on, {}, "B", &on, "B"}, nullptr, true);
  const std::string leaks = Between(diff, "<section id=\"leak-diff\">", "</section>");
  size_t changed = 0;
  for (const StackChange& change : LeakChanges(off, on)) changed += std::string(change.Change()) != "same";
  ASSERT_GT(changed, 0u);
  EXPECT_EQ(Occurrences(leaks, "<tr>"), std::min<size_t>(changed, 20) + 1) << leaks;
  EXPECT_EQ(diff.find("<pre"), npos);
}

// A line of the chart: its colour, dash pattern, name, and the shapes of the markers after it.
struct ChartLine {
  std::string stroke, dash, title;
  std::multiset<std::string> markers;  // "circle", "square", "triangle" with their fill
};

// The comparison chart's six lines (two runs, three measures) are told apart: six colours, the
// second run dashed, a marker shape per measure, and a legend entry per line drawn the same way.
TEST(HtmlComparePageTest, SixTimelineLinesToldApart) {
  json a = LoadData("report_on.json"), b = a;
  for (json* doc : {&a, &b}) {
    json points = json::array();
    for (int i = 0; i <= 20; ++i) {
      const int64_t k = doc == &a ? i : 20 - i;
      points.push_back({{"t_ms", 10 * i}, {"logical_live_blocks", 100 * k}, {"real_live_blocks", 50 * k},
                        {"pools", k}, {"rss_kib", 2048 + 64 * k}, {"logical_live_bytes", 6400 * k},
                        {"real_live_bytes", 4000 * k}});
    }
    (*doc)["timeline"] = {{"interval_ms", 10}, {"points", points}};
  }
  const std::string html = HtmlComparePage("t", {&a, {}, "A", &a, "A"}, {&b, {}, "B", &b, "B"}, nullptr, false);
  const std::string chart = Between(html, "<section id=\"timeline\">", "</section>");
  std::vector<ChartLine> lines;
  for (size_t at = chart.find("<polyline"); at != npos; at = chart.find("<polyline", at + 1)) {
    const std::string element = chart.substr(at, chart.find("</polyline>", at) - at);
    ChartLine line{Attribute(element, "stroke"), Attribute(element, "stroke-dasharray"),
                   Between(element, "<title>", "</title>"), {}};
    const std::string markers = Between(chart.substr(at), "<g class=\"markers\">", "</g>");
    for (size_t m = markers.find("class=\"marker "); m != npos; m = markers.find("class=\"marker ", m + 1)) {
      const std::string shape = markers.substr(m + 14, markers.find('"', m + 14) - m - 14);
      const std::string mark = markers.substr(markers.rfind('<', m));
      line.markers.insert(shape + " " + Attribute(mark, "fill"));
    }
    lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), 6u) << chart;
  std::set<std::string> colours;
  std::map<std::string, std::set<std::string>> dash_by_run, shape_by_measure;
  for (const ChartLine& line : lines) {
    colours.insert(line.stroke);
    const std::string title = line.title.substr(7, line.title.size() - 15);  // "<title>A: logical live bytes</title>"
    dash_by_run[title.substr(0, 1)].insert(line.dash);
    EXPECT_EQ(line.markers.size(), 8u) << title;
    ASSERT_FALSE(line.markers.empty());
    const std::string shape = line.markers.begin()->substr(0, line.markers.begin()->find(' '));
    EXPECT_EQ(line.markers.count(shape + " " + line.stroke), line.markers.size()) << title;
    shape_by_measure[title.substr(3)].insert(shape);
    // Its legend entry: a sample line of the same colour and dash, with its marker, and its name.
    const std::string name = title;
    size_t entry = chart.find(">" + name + "</text></g>");
    ASSERT_NE(entry, npos) << name;
    const std::string legend = chart.substr(chart.rfind("<g class=\"legend-entry\">", entry));
    const std::string sample = legend.substr(legend.find("<line"));
    EXPECT_EQ(Attribute(sample, "stroke"), line.stroke) << name;
    EXPECT_EQ(Attribute(sample, "stroke-dasharray"), line.dash) << name;
    EXPECT_NE(legend.substr(0, legend.find("</g>")).find("class=\"marker " + shape + "\""), npos) << name;
  }
  EXPECT_EQ(colours.size(), 6u);
  ASSERT_EQ(dash_by_run.size(), 2u);
  EXPECT_EQ(dash_by_run["A"], std::set<std::string>{""});
  ASSERT_EQ(dash_by_run["B"].size(), 1u);
  EXPECT_NE(*dash_by_run["B"].begin(), "");
  ASSERT_EQ(shape_by_measure.size(), 3u);
  std::set<std::string> shapes;
  for (const auto& [measure, shape] : shape_by_measure) {
    EXPECT_EQ(shape.size(), 1u) << measure;
    shapes.insert(*shape.begin());
  }
  EXPECT_EQ(shapes.size(), 3u);
}

}  // namespace
}  // namespace poolscope::report
