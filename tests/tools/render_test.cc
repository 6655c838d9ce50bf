// File: tests/tools/render_test.cc
//
// The text renderers over recorded reports: text page, folded stacks, the diff table and the
// suppression files against reviewed goldens in tests/testdata; the JSON re-emission; and the
// formatting helpers. The HTML pages are tested in html_render_test.cc (the same test target).
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "report/format_util.h"
#include "report/html_report.h"
#include "report/leak_diff.h"
#include "report/ledger_table.h"
#include "report/report_model.h"
#include "report/suppressions.h"
#include "report/text_report.h"
#include "tests/tools/render_test_util.h"

namespace poolscope::report {
namespace {

using testdata::Golden;
using testdata::LoadData;
using testdata::SitesReport;

TEST(TextReportTest, MatchesGolden) {
  EXPECT_EQ(TextReport(LoadData("report_on.json"), "report_on.json"), Golden("report_on.txt"));
}

TEST(TextReportTest, MinimalReportPrintsUnknowns) {
  std::string text = TextReport(LoadData("minimal.json"), "minimal.json");
  EXPECT_NE(text.find("3 logical allocations became 3 real allocations"), std::string::npos);
  EXPECT_NE(text.find("n/a unfreed blocks"), std::string::npos);
  EXPECT_NE(text.find("LARGEST LEAKS (live logical blocks at exit; 0 of 0 stacks, by bytes)\n  none"),
            std::string::npos);
}

// The leak_shapes list report (see LedgerTableTest below): 1 block of 32 B definitely lost and
// 9 of 32 B indirectly lost, all in pools, and still reachable stdout's buffer (4096 B),
// libstdc++'s emergency pool and the program's 200-byte block kept in a global.
TEST(TextReportTest, ReachabilitySectionAndDetectorView) {
  std::string text = TextReport(LoadData("reach_list_on.json"), "reach_list_on.json");
  EXPECT_NE(text.find("\nREACHABILITY (live logical blocks at exit, classified as memcheck does)\n"
                      "  lost (definitely + indirectly): 10 blocks (320 B); definitely 1 block "
                      "(32 B), indirectly 9 blocks (288 B)\n"
                      "  possibly lost 0 blocks (0 B), still reachable 3 blocks (75.2 KiB)\n"),
            std::string::npos)
      << text;
  // The detector's figures are labelled as the detector's and come after the program's.
  size_t detector = text.find(
      "  memcheck below poolscope reports 0 lost blocks (definitely + indirectly)\n"
      "    definitely 0 blocks (0 B), indirectly 0 blocks (0 B), "
      "possibly 5 blocks (600 B), still reachable 3 blocks (75.2 KiB)\n"
      "    the program's lost blocks it cannot see, in pools: 10 blocks (320 B)\n"
      "  reachability verdict: The program loses 10 blocks");
  EXPECT_NE(detector, std::string::npos) << text;
  EXPECT_LT(text.find("REACHABILITY"), detector);
  // A report from before LeakSanitizer's view says nothing of it.
  EXPECT_EQ(text.find("LeakSanitizer below poolscope"), std::string::npos) << text;
}

// LeakSanitizer's view, when the report has it, gets its own lines after memcheck's; when it was
// not computed, the reason.
TEST(TextReportTest, LeakSanitizerViewNamedApart) {
  nlohmann::json report = LoadData("reach_list_on.json");
  nlohmann::json& view = report["reconciliation"]["detector_view"];
  view["lsan"] = nlohmann::json::parse(R"({"scanned": true, "leaked": {"blocks": 7, "bytes": 840},
      "direct": {"blocks": 5, "bytes": 600}, "indirect": {"blocks": 2, "bytes": 240},
      "hidden_in_pools": {"blocks": 10, "bytes": 320}})");
  std::string text = TextReport(report, "r.json");
  size_t lsan = text.find(
      "  LeakSanitizer below poolscope reports 7 blocks (840 B) leaked\n"
      "    direct 5 blocks (600 B), indirect 2 blocks (240 B)\n"
      "    the program's leaked blocks it cannot see, in pools: 10 blocks (320 B)\n");
  EXPECT_NE(lsan, std::string::npos) << text;
  EXPECT_LT(text.find("  memcheck below poolscope reports"), lsan);
  std::string html = HtmlReport(report, "r.json");
  EXPECT_NE(html.find("<p>LeakSanitizer below poolscope reports 7 leaked blocks (840 B): 5 direct, 2 "
                      "indirect. Of the blocks it would report without poolscope, 10 (320 B) sit in pools.</p>"),
            std::string::npos)
      << html;

  view["lsan"] = nlohmann::json::parse(R"({"scanned": false, "not_scanned_why": "not computed for a signal's report"})");
  text = TextReport(report, "r.json");
  EXPECT_NE(text.find("  LeakSanitizer below poolscope: not predicted (not computed for a signal's report)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(HtmlReport(report, "r.json").find("<p>LeakSanitizer below poolscope: not predicted (not computed for "
                                              "a signal&#39;s report).</p>"),
            std::string::npos);
}

TEST(TextReportTest, LostFirstMarkedInPoolsAndStillReachableInOneLine) {
  std::string text = TextReport(LoadData("reach_list_on.json"), "reach_list_on.json");
  size_t leaks = text.find("\nLEAKS (live logical blocks at exit by reachability; 2 of 2 lost "
                           "stacks, definitely and indirectly lost first)\n");
  ASSERT_NE(leaks, std::string::npos) << text;
  size_t definitely = text.find("\n  #1  definitely lost  32 B in 1 block, all in pools\n"
                                "      make_list  tests/programs/leak_shapes.c:50\n");
  size_t indirectly = text.find("\n  #2  indirectly lost  288 B in 9 blocks, all in pools\n"
                                "      make_list  tests/programs/leak_shapes.c:50\n");
  // Each still-reachable stack named by its site frame: stdout's buffer by main, which called printf.
  size_t reachable = text.find(
      "\n  still reachable: 3 blocks (75.2 KiB) in 3 stacks; largest: "
      "libstdc++.so.6.0.30+0xa57b9, main, make_list\n");
  EXPECT_LT(leaks, definitely) << text;
  EXPECT_LT(definitely, indirectly) << text;
  EXPECT_LT(indirectly, reachable) << text;
  EXPECT_NE(reachable, std::string::npos) << text;
  // Still reachable stacks are not listed frame by frame (the call-site table above may name
  // their sites).
  EXPECT_EQ(text.find("leak_shapes.c:57", leaks), std::string::npos) << text;
  EXPECT_EQ(text.find("_IO_doallocbuf", leaks), std::string::npos) << text;
  EXPECT_EQ(text.find("LARGEST LEAKS"), std::string::npos) << text;
}

TEST(TextReportTest, KindOrderBeatsSize) {
  nlohmann::json doc = LoadData("minimal.json");
  auto group = [](const char* kind, int blocks, int bytes, int pooled, const char* function) {
    return nlohmann::json{{"kind", kind},
                          {"blocks", blocks},
                          {"bytes", bytes},
                          {"pooled_blocks", pooled},
                          {"stack", {{{"function", function}}}}};
  };
  doc["leaks"] = {group("still_reachable", 1, 9000, 0, "big_reachable"),
                  group("possibly_lost", 1, 5000, 0, "possibly"),
                  group("indirectly_lost", 4, 400, 0, "indirectly"),
                  group("definitely_lost", 2, 20, 1, "definitely_small"),
                  group("definitely_lost", 3, 30, 0, "definitely_large"),
                  group("still_reachable", 2, 100, 0, "small_reachable")};
  std::string text = TextReport(doc, "x.json");
  size_t order[] = {
      text.find("  #1  definitely lost  30 B in 3 blocks\n      definitely_large\n"),
      text.find("  #2  definitely lost  20 B in 2 blocks, 1 in pools\n      definitely_small\n"),
      text.find("  #3  indirectly lost  400 B in 4 blocks\n      indirectly\n"),
      text.find("  #4  possibly lost  4.9 KiB in 1 block\n      possibly\n"),
      text.find("  still reachable: 3 blocks (8.9 KiB) in 2 stacks; largest: big_reachable, "
                "small_reachable\n"),
  };
  for (size_t i = 0; i < std::size(order); ++i) {
    EXPECT_NE(order[i], std::string::npos) << i << "\n" << text;
    if (i > 0) {
      EXPECT_LT(order[i - 1], order[i]) << i << "\n" << text;
    }
  }
  EXPECT_EQ(text.find("#5"), std::string::npos) << text;
  // What exists only because poolscope is loaded is named at the end of the line, in the HTML too.
  doc["reachability"]["loaded_by_poolscope"] = {{"blocks", 1}, {"bytes", 9000}, {"objects", {"libstdc++.so.6"}}};
  const std::string clause = "; 1 block (8.8 KiB) of them only because poolscope loaded libstdc++.so.6";
  text = TextReport(doc, "x.json");
  EXPECT_NE(text.find("largest: big_reachable, small_reachable" + clause + "\n"), std::string::npos) << text;
  std::string html = HtmlReport(doc, "x.json");
  EXPECT_NE(html.find(clause + ".</p>"), std::string::npos) << html;
}

// The text and HTML leak tables list groups in this order.
TEST(KindRankTest, LostKindsFirstThenUnknown) {
  EXPECT_EQ(KindRank({{"kind", "definitely_lost"}}), 0);
  EXPECT_EQ(KindRank({{"kind", "indirectly_lost"}}), 1);
  EXPECT_EQ(KindRank({{"kind", "possibly_lost"}}), 2);
  EXPECT_EQ(KindRank({{"kind", "still_reachable"}}), 3);
  EXPECT_EQ(KindRank({{"kind", nullptr}}), 3);
  EXPECT_EQ(KindRank(nlohmann::json::object()), 3);
}

TEST(TextReportTest, NotScannedSaysWhy) {
  nlohmann::json doc = LoadData("minimal.json");
  doc["reachability"] = {{"scanned", false}, {"not_scanned_why", "track=0"}};
  std::string text = TextReport(doc, "x.json");
  EXPECT_NE(text.find("\nREACHABILITY (live logical blocks at exit, classified as memcheck does)\n"
                      "  not scanned: track=0\n"),
            std::string::npos)
      << text;
  // A report older than the scan has no such section.
  EXPECT_EQ(TextReport(LoadData("report_on.json"), "r").find("REACHABILITY"), std::string::npos);
}

TEST(FoldedTest, MatchesGolden) {
  EXPECT_EQ(FoldedStacks(LoadData("report_on.json")), Golden("report_on.folded"));
}

TEST(FoldedTest, OutermostFirstAndSemicolonsReplaced) {
  nlohmann::json doc = nlohmann::json::parse(R"({"leaks": [
      {"blocks": 1, "bytes": 10, "stack": [{"function": "inner;x"}, {"function": "outer"}]},
      {"blocks": 1, "bytes": 5}]})");
  EXPECT_EQ(FoldedStacks(doc), "outer;inner:x 10\n[no stack] 5\n");
}

TEST(JsonTest, ReEmitsTheSameDocument) {
  nlohmann::json doc = LoadData("report_on.json");
  std::string pretty = PrettyJson(doc);
  EXPECT_EQ(nlohmann::json::parse(pretty), doc);
  EXPECT_EQ(pretty.back(), '\n');
  EXPECT_NE(pretty.find("\n  \"schema\": \"poolscope.report/1\""), std::string::npos);
}

TEST(LedgerTableTest, DiffMatchesGolden) {
  // The golden is `poolscope diff report_off.json report_on.json`: a title line, then the table.
  std::string golden = Golden("diff_off_on.txt");
  std::string table = LedgerTable(LoadData("report_off.json"), {}, LoadData("report_on.json"), {},
                                  "A (pooling off)", "B (pooling on)");
  EXPECT_EQ(golden.substr(golden.find("\n\n") + 2), table);
}

// The same program built under another name: its leaks still match stack for stack (the frames in
// the executable are the executable's, whatever it is called), while frames of two different
// libraries of one name still differ only by that name.
TEST(LeakDiffTest, LeaksMatchAcrossARenamedExecutable) {
  nlohmann::json a = LoadData("report_on.json");
  nlohmann::json b = a;
  const std::string exe = a["process"]["exe"].get<std::string>();
  const std::string renamed = exe + "_v2";
  b["process"]["exe"] = renamed;
  size_t frames = 0;
  for (nlohmann::json& group : b["leaks"]) {
    for (nlohmann::json& frame : group["stack"]) {
      if (frame.value("object", "") == exe) {
        frame["object"] = renamed;
        ++frames;
      }
    }
  }
  ASSERT_GT(frames, 0u);
  const std::vector<report::StackChange> changes = report::LeakChanges(a, b);
  ASSERT_FALSE(changes.empty());
  for (const report::StackChange& c : changes) {
    EXPECT_STREQ(c.Change(), "same") << c.key;
  }
}

// The cells of the table row that starts with `label` (columns are separated by two or more
// spaces); empty when there is no such row.
std::vector<std::string> RowCells(const std::string& table, const std::string& label) {
  std::istringstream lines(table);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(label + "  ", 0) != 0) continue;
    std::vector<std::string> cells;
    size_t start = 0;
    while (start < line.size()) {
      size_t gap = line.find("  ", start);
      std::string cell = line.substr(start, gap == std::string::npos ? gap : gap - start);
      if (!cell.empty()) cells.push_back(cell);
      if (gap == std::string::npos) break;
      start = line.find_first_not_of(' ', gap);
      if (start == std::string::npos) break;
    }
    return cells;
  }
  return {};
}

TEST(LedgerTableTest, RunFactsWinOverReportTimes) {
  RunFacts off{1.0, 2048}, on{0.5, 1024};
  std::string table = LedgerTable(LoadData("report_off.json"), off, LoadData("report_on.json"), on,
                                  "pooling off", "pooling on");
  EXPECT_EQ(RowCells(table, "wall time"),
            (std::vector<std::string>{"wall time", "1.000 s", "0.500 s", "-0.500 s (-50.0%)"}))
      << table;
  EXPECT_EQ(RowCells(table, "peak RSS"),
            (std::vector<std::string>{"peak RSS", "2.0 MiB", "1.0 MiB", "-1.0 MiB (-50.0%)"}))
      << table;
}

TEST(LedgerTableTest, PoolscopesOwnMemoryUnderPeakRss) {
  nlohmann::json off = LoadData("report_off.json"), on = LoadData("report_on.json");
  off["internal"]["peak_resident_bytes"] = 3 * 1024 * 1024;
  on["internal"]["peak_resident_bytes"] = 4 * 1024 * 1024;
  std::string table = LedgerTable(off, {}, on, {}, "pooling off", "pooling on");
  EXPECT_EQ(RowCells(table, "  of which poolscope's own memory (peak)"),
            (std::vector<std::string>{"of which poolscope's own memory (peak)", "3.0 MiB", "4.0 MiB",
                                      "+1.0 MiB (+33.3%)"}))
      << table;
}

// leak_shapes list (tests/programs/leak_shapes.c) loses a 10-node list, 1 definitely and 9
// indirectly lost, whatever pooling does; with pooling on its 32-byte nodes sit in pools, so a
// detector below poolscope sees none of them lost.
TEST(LedgerTableTest, LostBlocksFromReachabilityAndDetectorViewApart) {
  std::string table = LedgerTable(LoadData("reach_list_off.json"), {},
                                  LoadData("reach_list_on.json"), {}, "pooling off", "pooling on");
  EXPECT_EQ(RowCells(table, "lost blocks (definitely + indirectly)"),
            (std::vector<std::string>{"lost blocks (definitely + indirectly)", "10", "10", "0"}))
      << table;
  EXPECT_EQ(RowCells(table, "possibly lost blocks"),
            (std::vector<std::string>{"possibly lost blocks", "0", "0", "0"}))
      << table;
  EXPECT_EQ(RowCells(table, "detector view: lost blocks (below poolscope)"),
            (std::vector<std::string>{"detector view: lost blocks (below poolscope)", "10", "0",
                                      "-10 (-100.0%)"}))
      << table;
  // The program's figure comes before the detector's.
  EXPECT_LT(table.find("\nlost blocks (definitely + indirectly)"),
            table.find("\ndetector view: lost blocks"));
  EXPECT_EQ(LostBlocks(LoadData("reach_list_on.json")), 10);
  EXPECT_EQ(DetectorLostBlocks(LoadData("reach_list_on.json")), 0);
}

TEST(LedgerTableTest, NoScanReadsAsUnknown) {
  nlohmann::json scanned = LoadData("reach_list_on.json");
  nlohmann::json not_scanned = scanned;
  not_scanned["reachability"] = {{"scanned", false}, {"not_scanned_why", "track=0"}};
  not_scanned["reconciliation"]["detector_view"].erase("reachability");
  std::string table = LedgerTable(not_scanned, {}, scanned, {}, "A", "B");
  EXPECT_EQ(RowCells(table, "lost blocks (definitely + indirectly)"),
            (std::vector<std::string>{"lost blocks (definitely + indirectly)", "n/a", "10", "n/a"}))
      << table;
  EXPECT_EQ(RowCells(table, "detector view: lost blocks (below poolscope)"),
            (std::vector<std::string>{"detector view: lost blocks (below poolscope)", "n/a", "0",
                                      "n/a"}))
      << table;
  EXPECT_EQ(LostBlocks(LoadData("report_on.json")), std::nullopt);
}

TEST(VerdictTest, DerivedWhenTheReportHasNone) {
  nlohmann::json off = LoadData("report_off.json");
  nlohmann::json on = LoadData("report_on.json");
  on["reconciliation"]["detector_view"].erase("verdict");
  // Worded as a single run's: the blocks outside pools are not called the program's leaks, nor
  // compared with pooling off's (pooling moves blocks into pools; it removes no leak).
  EXPECT_EQ(Verdict(off, on),
            "A malloc/free-counting leak detector would see 4 unfreed blocks: 2 outside pools and 2 "
            "poolscope pools (cached or in use at exit), which are not leaks themselves.");
  on["reconciliation"]["pooled_live_blocks"] = 4;
  EXPECT_EQ(Verdict(off, on),
            "A malloc/free-counting leak detector would see 4 unfreed blocks: 2 outside pools and 2 "
            "poolscope pools (cached or in use at exit), which are not leaks themselves but hold 4 more "
            "of the program's blocks, so the program leaves 6 blocks unfreed, as it would without "
            "pooling.");
  EXPECT_EQ(ProgramLeakBlocks(on), 2);
}

// The timeline's peaks in the text report's totals; nothing without a timeline.
TEST(TextReportTest, TimelinePeaksInTheTotals) {
  using nlohmann::json;
  json doc = LoadData("report_on.json");
  EXPECT_EQ(TextReport(doc, "r.json").find("over time"), std::string::npos);
  json points = json::array();
  const int logical[] = {10, 5000, 120000, 7000};
  const int real[] = {10, 900, 800, 30000};
  const int rss[] = {1024, 4096, 3072, 2048};
  for (int i = 0; i < 4; ++i) {
    points.push_back({{"t_ms", 1500 * i},
                      {"logical_live_blocks", logical[i]},
                      {"real_live_blocks", real[i]},
                      {"pools", 0},
                      {"rss_kib", rss[i]}});
  }
  doc["timeline"] = {{"interval_ms", 5}, {"points", points}};
  std::string text = TextReport(doc, "r.json");
  EXPECT_NE(text.find("  over time (4 points): logical live peak 120,000 blocks at 3.000 s, real live peak "
                      "30,000 at 4.500 s\n  resident set peak 4.0 MiB at 1.500 s\n"),
            std::string::npos)
      << text;
}

TEST(SitesTest, TextTableByLogicalAllocationsWithLiveAtExit) {
  std::string text = TextReport(SitesReport(), "sites.json");
  EXPECT_NE(text.find("\nCALL SITES (top 3 of 3 by logical allocations; pooled = served from pools)\n"
                      "   #  logical  pooled  real  bytes     live at exit\n"
                      "  #1       50      50     0  800 B   0 blocks (0 B)\n"
                      "      beta  /bin/p\n"
                      "  #2       10       0    10  960 B   0 blocks (0 B)\n"
                      "      gamma  /bin/p\n"
                      "  #3       10       8     2  640 B  3 blocks (96 B)\n"
                      "      alpha  /bin/p\n"),
            std::string::npos)
      << text;
}

TEST(SitesTest, TopTwentyOnly) {
  nlohmann::json doc = nlohmann::json::object();
  doc["sites"] = nlohmann::json::array();
  for (int i = 1; i <= 25; ++i) {
    doc["sites"].push_back({{"logical_allocs", i}, {"pool_hits", 0}, {"real_allocs", i},
                            {"bytes", 8 * i},
                            {"stack", {{{"function", "site" + std::to_string(i)}}}}});
  }
  std::string text = TextReport(doc, "many.json");
  EXPECT_NE(text.find("CALL SITES (top 20 of 25 by logical allocations"), std::string::npos);
  EXPECT_NE(text.find("  ... 5 more sites\n"), std::string::npos);
  EXPECT_NE(text.find("      site25\n"), std::string::npos);
  EXPECT_NE(text.find("      site6\n"), std::string::npos);
  EXPECT_EQ(text.find("      site5\n"), std::string::npos);
  std::string html = HtmlReport(doc, "many.json");
  size_t table = html.find("<table class=\"sites\">");
  ASSERT_NE(table, std::string::npos);
  std::string rows = html.substr(table, html.find("</table>", table) - table);
  size_t count = 0;
  for (size_t at = rows.find("<tr>"); at != std::string::npos; at = rows.find("<tr>", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 21u);  // the header and 20 sites
}

// A site whose block glibc allocates for it is named by the program's frame that called into glibc,
// with the function it called: strdup's copy by the code that called strdup, stdout's buffer by
// the code that called printf (glibc's frames, like the allocator's, are not the program's site).
TEST(SitesTest, TextNamesTheCallerOfGlibc) {
  nlohmann::json doc = nlohmann::json::parse(R"({"sites": [
      {"logical_allocs": 2, "stack": [{"function": "malloc", "object": "/lib/x86_64-linux-gnu/libc.so.6"},
                                      {"function": "__strdup", "object": "/lib/x86_64-linux-gnu/libc.so.6"},
                                      {"function": "copy_name", "object": "/bin/p", "file": "p.c", "line": 7},
                                      {"function": "main", "object": "/bin/p"}]},
      {"logical_allocs": 1, "stack": [{"function": "_IO_file_doallocate", "object": "/lib/x86_64-linux-gnu/libc.so.6"},
                                      {"function": "printf", "object": "/lib/x86_64-linux-gnu/libc.so.6"},
                                      {"function": "greet", "object": "/bin/p", "file": "p.c", "line": 12}]}]})");
  std::string text = TextReport(doc, "glibc.json");
  EXPECT_NE(text.find("\n      copy_name  p.c:7  (via __strdup)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n      greet  p.c:12  (via printf)\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("      __strdup"), std::string::npos) << text;
  EXPECT_EQ(text.find("      _IO_file_doallocate"), std::string::npos) << text;
}

TEST(SuppressionsTest, MatchGoldens) {
  nlohmann::json doc = LoadData("report_on.json");
  EXPECT_EQ(Suppressions(doc, "report_on.json", SuppressionFormat::kLsan),
            Golden("report_on.lsan"));
  EXPECT_EQ(Suppressions(doc, "report_on.json", SuppressionFormat::kValgrind),
            Golden("report_on.valgrind"));
  EXPECT_EQ(Suppressions(doc, "report_on.json", SuppressionFormat::kHeaptrack),
            Golden("report_on.heaptrack"));
  SuppressionFormat format;
  EXPECT_TRUE(ParseSuppressionFormat("valgrind", &format));
  EXPECT_EQ(format, SuppressionFormat::kValgrind);
  EXPECT_FALSE(ParseSuppressionFormat("asan", &format));
}

TEST(FormatTest, Helpers) {
  EXPECT_EQ(Thousands(0), "0");
  EXPECT_EQ(Thousands(999), "999");
  EXPECT_EQ(Thousands(1234567), "1,234,567");
  EXPECT_EQ(Thousands(-1000), "-1,000");
  EXPECT_EQ(Thousands(std::nullopt), "n/a");
  EXPECT_EQ(Bytes(512), "512 B");
  EXPECT_EQ(Bytes(1536), "1.5 KiB");
  EXPECT_EQ(Seconds(0.25), "0.250 s");
  EXPECT_EQ(Seconds(0.0123), "0.012 s");
  EXPECT_EQ(Percent(1, 4), "25.0%");
  EXPECT_EQ(Percent(1, 0), "n/a");
  EXPECT_EQ(Change(100, 25), "-75 (-75.0%)");
  EXPECT_EQ(Change(0, 6), "+6");
  EXPECT_EQ(Change(5, 5), "0");
  EXPECT_EQ(HtmlEscape("<a href='x'>&\"</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
  EXPECT_EQ(HtmlEscape("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(OneLine("a\nb\tc\x1b[2J"), "a b c [2J");
}

}  // namespace
}  // namespace poolscope::report
