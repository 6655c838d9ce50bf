// File: tests/tools/render_test.cc
//
// The renderers over recorded reports: text page, folded stacks, the diff table and the
// suppression files against reviewed goldens in tests/testdata; the JSON re-emission; properties
// of the HTML page (self-contained, escaped, all four charts present); and the formatting helpers.
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tools/format_util.h"
#include "tools/html_report.h"
#include "tools/ledger_table.h"
#include "tools/report_model.h"
#include "tools/suppressions.h"
#include "tools/text_report.h"

namespace poolscope::tools {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

nlohmann::json LoadData(const std::string& name) {
  absl::StatusOr<Report> report = LoadReport("tests/testdata/" + name);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? report->doc : nlohmann::json();
}

std::string Golden(const std::string& name) {
  std::string text = ReadFile("tests/testdata/" + name);
  EXPECT_FALSE(text.empty()) << name;
  return text;
}

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

TEST(LedgerTableTest, RunFactsWinOverReportTimes) {
  RunFacts off{1.0, 2048}, on{0.5, 1024};
  std::string table = LedgerTable(LoadData("report_off.json"), off, LoadData("report_on.json"), on,
                                  "pooling off", "pooling on");
  EXPECT_NE(table.find("wall time                          1.000 s     0.500 s  -0.500 s (-50.0%)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("peak RSS                           2.0 MiB     1.0 MiB  -1.0 MiB (-50.0%)"),
            std::string::npos)
      << table;
}

TEST(VerdictTest, DerivedWhenTheReportHasNone) {
  nlohmann::json off = LoadData("report_off.json");
  nlohmann::json on = LoadData("report_on.json");
  on["reconciliation"]["detector_view"].erase("verdict");
  EXPECT_EQ(Verdict(off, on),
            "A malloc/free-counting leak detector would see 4 unfreed blocks: 2 are the "
            "program's own leaks (against 6 with pooling off) and 2 are poolscope pools still "
            "cached or in use at exit, which are expected.");
  EXPECT_EQ(ProgramLeakBlocks(on), 2);
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
  // The four charts and the leak table.
  EXPECT_NE(html.find("aria-label=\"logical and real ledgers\""), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"request sizes\""), std::string::npos);
  EXPECT_NE(html.find(">pool size 64 B</text>"), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"real blocks live at exit by kind\""), std::string::npos);
  EXPECT_NE(html.find("leak_config_table()"), std::string::npos);
  // Strings from the report are escaped.
  EXPECT_NE(html.find("Registry&lt;&quot;a&amp;b&quot;&gt;::Init()"), std::string::npos);
  EXPECT_NE(html.find("std::vector&lt;Session*, std::allocator&lt;Session*&gt; &gt;::reserve"),
            std::string::npos);
  EXPECT_EQ(html.find("Registry<"), std::string::npos);
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
}  // namespace poolscope::tools
