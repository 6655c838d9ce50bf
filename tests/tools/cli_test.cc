// File: tests/tools/cli_test.cc
//
// The command line in process (tools::Main with string streams): help on every level, every
// subcommand over the recorded reports, and every error path: exactly one line on stderr of the
// form "poolscope: SUBJECT: problem", nothing on stdout, exit status 2. `run` and `compare` with
// a real child are in run_test.sh.
#include "tools/commands.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace poolscope::tools {
namespace {

struct Outcome {
  int status;
  std::string out;
  std::string err;
};

Outcome Call(std::vector<std::string> args) {
  args.insert(args.begin(), "poolscope");
  std::ostringstream out, err;
  int status = Main(args, out, err);
  return {status, out.str(), err.str()};
}

const std::string kOn = "tests/testdata/report_on.json";
const std::string kOff = "tests/testdata/report_off.json";

nlohmann::json LoadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Writes `text` to a file of the test's temporary folder and returns its path.
std::string WriteTemp(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// One error line, exactly, with this text.
void ExpectUsageError(const std::vector<std::string>& args, const std::string& line) {
  Outcome outcome = Call(args);
  std::string joined;
  for (const std::string& arg : args) joined += arg + " ";
  EXPECT_EQ(outcome.status, 2) << joined;
  EXPECT_EQ(outcome.out, "") << joined;
  EXPECT_EQ(outcome.err, line + "\n") << joined;
}

TEST(HelpTest, EveryLevelPrintsUsageOnStdout) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"--help"}, {"-h"}, {"help"}, {"run", "--help"}, {"run", "-h"}, {"compare", "--help"},
           {"compare", "-h"}, {"diff", "--help"}, {"diff", "-h"}, {"report", "--help"},
           {"report", "-h"}, {"suppressions", "--help"}, {"suppressions", "-h"},
           {"help", "report"}, {"report", kOn, "--help"}}) {
    Outcome outcome = Call(args);
    EXPECT_EQ(outcome.status, 0) << args[0];
    EXPECT_EQ(outcome.out.rfind("usage: poolscope", 0), 0u) << args[0] << outcome.out;
    EXPECT_EQ(outcome.err, "");
  }
  EXPECT_NE(Call({"run", "--help"}).out.find("exit status: CMD's exit status"), std::string::npos);
  EXPECT_NE(Call({"compare", "--help"}).out.find("--fail-on-leak"), std::string::npos);
  EXPECT_EQ(Call({"--version"}).status, 0);
}

TEST(TopLevelTest, NoCommandAndUnknownCommand) {
  Outcome none = Call({});
  EXPECT_EQ(none.status, 2);
  EXPECT_EQ(none.err.rfind("usage: poolscope", 0), 0u);
  ExpectUsageError({"frobnicate"},
                   "poolscope: frobnicate: unknown command (run, attach, compare, diff, report, "
                   "suppressions, check; see poolscope --help)");
  ExpectUsageError({"--bogus=1"}, "poolscope: --bogus: unknown flag (see poolscope --help)");
}

TEST(ReportCommandTest, Formats) {
  Outcome text = Call({"report", kOn});
  EXPECT_EQ(text.status, 0);
  EXPECT_EQ(text.out.rfind("poolscope report " + kOn + "\n", 0), 0u);
  EXPECT_EQ(Call({"report", "--format=text", kOn}).out, text.out);
  EXPECT_EQ(Call({"report", kOn, "--format", "folded"}).out.substr(0, 23),
            "__libc_start_call_main;");
  EXPECT_EQ(Call({"report", "-f", "html", kOn}).out.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(Call({"report", "--format=json", kOn}).out.rfind("{\n  \"errors\"", 0), 0u);
}

TEST(ReportCommandTest, Errors) {
  ExpectUsageError({"report"}, "poolscope: report: missing operand R.json");
  ExpectUsageError({"report", "--format=pdf", kOn},
                   "poolscope: --format: expected text, html, folded or json, got 'pdf'");
  ExpectUsageError({"report", "--format"}, "poolscope: --format: needs a value");
  ExpectUsageError({"report", "--colour", kOn},
                   "poolscope: --colour: unknown flag (see poolscope report --help)");
  // Several files are one process tree; when none can be read, the first is named.
  ExpectUsageError({"report", "tests/testdata/truncated.json", "tests/testdata/nope.json"},
                   "poolscope: tests/testdata/truncated.json: truncated JSON (the document ends "
                   "early, at byte 1500) (and 1 more unreadable)");
  ExpectUsageError({"report", "--process=nothing*", kOn, kOff},
                   "poolscope: --process: no process of the tree matches nothing*");
  ExpectUsageError({"report", "tests/testdata/nope.json"},
                   "poolscope: tests/testdata/nope.json: no such file");
  ExpectUsageError({"report", "tests/testdata/truncated.json"},
                   "poolscope: tests/testdata/truncated.json: truncated JSON (the document ends "
                   "early, at byte 1500)");
  ExpectUsageError({"report", "tests/testdata/other_schema.json"},
                   "poolscope: tests/testdata/other_schema.json: unsupported schema "
                   "\"poolscope.report/2\" (this poolscope reads \"poolscope.report/1\")");
  for (const char* bad : {"not_json.json", "empty.json", "wrong_type.json"}) {
    Outcome outcome = Call({"report", std::string("tests/testdata/") + bad});
    EXPECT_EQ(outcome.status, 2) << bad;
    EXPECT_EQ(outcome.out, "");
    EXPECT_EQ(outcome.err.rfind(std::string("poolscope: tests/testdata/") + bad + ": ", 0), 0u);
    EXPECT_EQ(outcome.err.find('\n'), outcome.err.size() - 1) << outcome.err;
  }
}

TEST(DiffCommandTest, TableAndFailOnLeak) {
  Outcome diff = Call({"diff", kOff, kOn});
  EXPECT_EQ(diff.status, 0);
  EXPECT_EQ(diff.err, "");
  EXPECT_NE(diff.out.find("\nreal allocations                                        1,606  "
                          "           208  -1,398 (-87.0%)\n"),
            std::string::npos)
      << diff.out;
  // Reports without a reachability scan: the lost-block rows are there, unknown.
  EXPECT_NE(diff.out.find("\nlost blocks (definitely + indirectly)                     n/a  "
                          "           n/a  n/a\n"),
            std::string::npos)
      << diff.out;
  Outcome fail = Call({"diff", "--fail-on-leak", kOff, kOn});
  EXPECT_EQ(fail.status, 1);
  EXPECT_EQ(fail.out, diff.out);
  EXPECT_EQ(fail.err,
            "poolscope: --fail-on-leak: the program leaks (6 blocks before, 6 after: logical.live_blocks)\n");
}

// The program's own blocks in pools count: the detector view's program_leak_blocks (2 in report_on,
// against 6 in report_off) leaves them out, so --fail-on-leak must not judge by it.
TEST(DiffCommandTest, FailOnLeakCountsPooledBlocksAndPrefersLeakCheck) {
  nlohmann::json off = LoadJson(kOff), on = LoadJson(kOn);
  ASSERT_EQ(on["reconciliation"]["detector_view"]["program_leak_blocks"], 2);
  ASSERT_EQ(on["logical"]["live_blocks"], 6);
  // No live block in either: passes.
  for (nlohmann::json* r : {&off, &on}) (*r)["logical"]["live_blocks"] = 0;
  std::string a = WriteTemp("a.json", off.dump()), b = WriteTemp("b.json", on.dump());
  Outcome clean = Call({"diff", "--fail-on-leak", a, b});
  EXPECT_EQ(clean.status, 0) << clean.err;
  EXPECT_EQ(clean.err, "");
  // leak_check in both reports is what counts (here 0 and 3 of 6 and 6 live blocks).
  off["logical"]["live_blocks"] = 6;
  on["logical"]["live_blocks"] = 6;
  off["leak_check"] = {{"program_leak_blocks", 0}};
  on["leak_check"] = {{"program_leak_blocks", 3}};
  a = WriteTemp("a.json", off.dump());
  b = WriteTemp("b.json", on.dump());
  Outcome leak = Call({"diff", "--fail-on-leak", a, b});
  EXPECT_EQ(leak.status, 1);
  EXPECT_EQ(leak.err,
            "poolscope: --fail-on-leak: the program leaks (0 blocks before, 3 after: "
            "leak_check.program_leak_blocks)\n");
  on["leak_check"]["program_leak_blocks"] = 0;
  b = WriteTemp("b.json", on.dump());
  Outcome none = Call({"diff", "--fail-on-leak", a, b});
  EXPECT_EQ(none.status, 0) << none.err;
}

// With a reachability scan in both reports, only what the program lost counts: blocks it still
// points to (still reachable, possibly lost) never do, whatever leak_check says.
TEST(DiffCommandTest, FailOnLeakJudgesReachabilityWhenScanned) {
  nlohmann::json off = LoadJson("tests/testdata/reach_list_off.json");
  nlohmann::json on = LoadJson("tests/testdata/reach_list_on.json");
  ASSERT_TRUE(on["reachability"]["scanned"].get<bool>());
  std::string a = WriteTemp("a.json", off.dump()), b = WriteTemp("b.json", on.dump());
  Outcome leak = Call({"diff", "--fail-on-leak", a, b});
  EXPECT_EQ(leak.status, 1);
  EXPECT_EQ(leak.err,
            "poolscope: --fail-on-leak: the program leaks (10 blocks before, 10 after: "
            "reachability: definitely + indirectly lost)\n");
  for (nlohmann::json* r : {&off, &on}) {
    for (const char* kind : {"definitely_lost", "indirectly_lost"}) (*r)["reachability"][kind]["blocks"] = 0;
    (*r)["leak_check"] = {{"program_leak_blocks", 3}};
  }
  a = WriteTemp("a.json", off.dump());
  b = WriteTemp("b.json", on.dump());
  Outcome clean = Call({"diff", "--fail-on-leak", a, b});
  EXPECT_EQ(clean.status, 0) << clean.err;
}

// --html=FILE: the table printed on stdout as an HTML table, and both reports' timelines on one
// chart (each run's three lines, named by its label); a file that cannot be written is status 2.
TEST(DiffCommandTest, HtmlPageWithBothTimelines) {
  nlohmann::json off = LoadJson(kOff), on = LoadJson(kOn);
  for (nlohmann::json* r : {&off, &on}) {
    nlohmann::json points = nlohmann::json::array();
    for (int i = 0; i < 3; ++i) {
      points.push_back({{"t_ms", 100 * i}, {"logical_live_blocks", 10 * i}, {"real_live_blocks", 5 * i},
                        {"pools", 0}, {"rss_kib", 1024}});
    }
    (*r)["timeline"] = {{"interval_ms", 5}, {"points", points}};
  }
  std::string a = WriteTemp("a.json", off.dump()), b = WriteTemp("b.json", on.dump());
  std::string page_path = WriteTemp("page.html", "");
  Outcome diff = Call({"diff", "--html=" + page_path, a, b});
  ASSERT_EQ(diff.status, 0) << diff.err;
  EXPECT_EQ(diff.err, "poolscope: comparison page written to " + page_path + "\n");
  std::ifstream in(page_path);
  std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  // The table as printed, as an HTML table: the row of logical allocations has stdout's cells
  // (stdout's first line names the files; the table follows it; cells are 2 or more spaces apart).
  const size_t row_at = diff.out.find("logical allocations");
  std::string row = diff.out.substr(row_at, diff.out.find('\n', row_at) - row_at);
  std::vector<std::string> cells;
  for (size_t at = 0; at < row.size();) {
    size_t gap = row.find("  ", at);
    cells.push_back(row.substr(at, gap == std::string::npos ? std::string::npos : gap - at));
    if (gap == std::string::npos) break;
    at = row.find_first_not_of(' ', gap);
  }
  ASSERT_EQ(cells.size(), 4u) << row;
  EXPECT_NE(page.find("<table class=\"compare\">"), std::string::npos);
  EXPECT_NE(page.find("<tr><td class=\"label\">" + cells[0] + "</td><td class=\"n\">" + cells[1] +
                      "</td><td class=\"n\">" + cells[2] + "</td><td class=\"n\">" + cells[3] + "</td></tr>"),
            std::string::npos)
      << row << "\n" << page;
  EXPECT_EQ(page.find("<pre"), std::string::npos);
  size_t lines = 0;
  for (size_t p = page.find("<polyline"); p != std::string::npos; p = page.find("<polyline", p + 1)) ++lines;
  EXPECT_EQ(lines, 6u);
  EXPECT_NE(page.find(">A (pooling off): logical live blocks</text>"), std::string::npos) << page;
  EXPECT_NE(page.find(">B (pooling on): resident set (right axis)</text>"), std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  // Reports without timelines: the page says so.
  Outcome plain = Call({"diff", "--html=" + page_path, kOff, kOn});
  ASSERT_EQ(plain.status, 0) << plain.err;
  std::ifstream in2(page_path);
  std::string page2((std::istreambuf_iterator<char>(in2)), std::istreambuf_iterator<char>());
  EXPECT_NE(page2.find("Neither report has a timeline"), std::string::npos);
  Outcome bad = Call({"diff", "--html=/proc/self/no/such/page.html", kOff, kOn});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("/proc/self/no/such/page.html: cannot be written (--html)"), std::string::npos)
      << bad.err;
}

TEST(DiffCommandTest, Errors) {
  ExpectUsageError({"diff"}, "poolscope: diff: missing operands A.json B.json");
  ExpectUsageError({"diff", kOff}, "poolscope: diff: missing operand B.json");
  ExpectUsageError({"diff", kOff, kOn, kOn},
                   "poolscope: " + kOn + ": unexpected operand (diff takes two reports)");
  ExpectUsageError({"diff", "--fail-on-leak=yes", kOff, kOn},
                   "poolscope: --fail-on-leak: takes no value");
  ExpectUsageError({"diff", kOff, "tests/testdata/not_json.json"},
                   "poolscope: tests/testdata/not_json.json: not JSON (syntax error at byte 2)");
}

TEST(SuppressionsCommandTest, FormatsAndErrors) {
  Outcome lsan = Call({"suppressions", kOn, "--format=lsan"});
  EXPECT_EQ(lsan.status, 0);
  EXPECT_NE(lsan.out.find("\nleak:ShimBackend::AllocPool\nleak:poolscope::PoolFromMalloc\n"
                          "leak:poolscope_pool_alloc\n"),
            std::string::npos);
  Outcome valgrind = Call({"suppressions", "--format=valgrind", kOn});
  EXPECT_NE(valgrind.out.find("   Memcheck:Leak\n"), std::string::npos);
  EXPECT_NE(valgrind.out.find("\n   ...\n   fun:_ZN9poolscope*ShimBackend9AllocPool*\n}\n"),
            std::string::npos);
  Outcome heaptrack = Call({"suppressions", "--format=heaptrack", kOn});
  EXPECT_EQ(heaptrack.status, 0);
  EXPECT_NE(heaptrack.out.find("\nleak:ShimBackend::AllocPool\n"), std::string::npos);
  // The help text names the entries exactly as they are printed.
  Outcome help = Call({"suppressions", "--help"});
  EXPECT_NE(help.out.find("`leak:ShimBackend::AllocPool`, `leak:poolscope::PoolFromMalloc` and\n"
                          "              `leak:poolscope_pool_alloc`, for LSAN_OPTIONS"),
            std::string::npos);
  EXPECT_NE(help.out.find("the same three lines, for heaptrack_print"), std::string::npos);
  EXPECT_NE(help.out.find("`fun:_ZN9poolscope*ShimBackend9AllocPool*`"), std::string::npos);
  ExpectUsageError({"suppressions", kOn}, "poolscope: --format: required: lsan, valgrind or heaptrack");
  ExpectUsageError({"suppressions", "--format=asan", kOn},
                   "poolscope: --format: expected lsan, valgrind or heaptrack, got 'asan'");
  ExpectUsageError({"suppressions", "--format=lsan"},
                   "poolscope: suppressions: missing operand R.json");
  ExpectUsageError({"suppressions", "--format=lsan", "tests/testdata/empty.json"},
                   "poolscope: tests/testdata/empty.json: empty file (the program wrote no "
                   "report, or it is still being written)");
}

TEST(SuppressionsCommandTest, AdaptPrintsTheFileWarnsAndNamesBadLines) {
  std::string valgrind = WriteTemp("user.supp", "{\n   a\n   Memcheck:Leak\n   fun:malloc\n   fun:f\n}\n");
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"suppressions", "--adapt", valgrind},
                                             {"suppressions", "--adapt=" + valgrind, "--format=valgrind"}}) {
    Outcome adapted = Call(args);
    EXPECT_EQ(adapted.status, 0);
    EXPECT_EQ(adapted.err, "");
    EXPECT_EQ(adapted.out.rfind("# poolscope suppressions --adapt " + valgrind + ": for memcheck", 0), 0u);
    EXPECT_NE(adapted.out.find("   a/poolscope:1\n   Memcheck:Leak\n   fun:malloc\n"
                               "   obj:*/libpoolscope.so\n   fun:f\n}\n"),
              std::string::npos);
  }
  // A pattern that matches poolscope's own frames: the file as it is, and one warning line.
  std::string lsan = WriteTemp("user.lsan", "leak:f\nleak:Alloc\n");
  Outcome warned = Call({"suppressions", "--adapt", lsan, "--format=lsan"});
  EXPECT_EQ(warned.status, 0);
  EXPECT_NE(warned.out.find("\nleak:f\n"), std::string::npos);
  EXPECT_EQ(warned.err, "poolscope: " + lsan + ":2: warning: leak:Alloc also matches poolscope's own "
                        "frame poolscope::AllocSlow(poolscope::Api, unsigned long, void*): with poolscope "
                        "preloaded it suppresses every leak allocated through that frame, whatever the "
                        "program's stack\n");
  Outcome help = Call({"suppressions", "--help"});
  EXPECT_NE(help.out.find("poolscope suppressions --adapt FILE [--format=lsan|valgrind|heaptrack]"),
            std::string::npos);
  std::string bad = WriteTemp("bad.supp", "# mine\n{\n   a\n   Memcheck:Leak\n   fn:malloc\n}\n");
  ExpectUsageError({"suppressions", "--adapt", bad},
                   "poolscope: " + bad + ":5: expected a frame (fun:, obj:, src: or ...) or '}', got "
                   "'fn:malloc'");
  ExpectUsageError({"suppressions", "--adapt", valgrind, "--format=lsan"},
                   "poolscope: " + valgrind + ":1: expected leak:PATTERN, got '{' (a valgrind "
                   "suppression: --format=valgrind)");
  ExpectUsageError({"suppressions", "--adapt", "/nonexistent/user.supp"},
                   "poolscope: /nonexistent/user.supp: no such file");
  ExpectUsageError({"suppressions", "--adapt", valgrind, kOn},
                   "poolscope: " + kOn + ": unexpected operand (--adapt takes the suppression file as "
                   "its value)");
  ExpectUsageError({"suppressions", "--adapt="}, "poolscope: --adapt: needs a value (the suppression file)");
  ExpectUsageError({"suppressions", "--adapt"}, "poolscope: --adapt: needs a value");
  ExpectUsageError({"suppressions", "--adapt", valgrind, "--format=asan"},
                   "poolscope: --format: expected lsan, valgrind or heaptrack, got 'asan'");
}

TEST(RunCommandTest, UsageErrorsBeforeAnythingRuns) {
  ExpectUsageError({"run"}, "poolscope: run: missing CMD (usage: poolscope run [FLAGS] -- CMD "
                            "[ARGS...])");
  ExpectUsageError({"run", "--pool=maybe", "--", "true"},
                   "poolscope: --pool: expected on or off, got 'maybe'");
  ExpectUsageError({"run", "--options=pool_size", "--", "true"},
                   "poolscope: --options: 'pool_size' is not key=value");
  ExpectUsageError({"run", "--options=pool=0", "--", "true"},
                   "poolscope: --options: pool= is set by this command");
  ExpectUsageError({"run", "--lib=/nonexistent/libpoolscope.so", "--", "true"},
                   "poolscope: --lib: /nonexistent/libpoolscope.so: no such file");
  ExpectUsageError({"run", "--frob", "--", "true"},
                   "poolscope: --frob: unknown flag (see poolscope run --help)");
  ExpectUsageError({"run", "-o"}, "poolscope: -o: needs a value");
  // A report that could not be written is refused before the program runs (it would make the file).
  const std::string marker = ::testing::TempDir() + "/run_ran";
  // (--lib: any file will do, the program never starts.)
  ExpectUsageError({"run", "--lib=/bin/true", "-o", "/etc/passwd/sub/r.json", "--", "touch", marker},
                   "poolscope: -o: /etc/passwd: not a directory");
  ExpectUsageError({"run", "--lib=/bin/true", "--options=report=/etc/passwd/r.json", "--", "touch", marker},
                   "poolscope: report=: /etc/passwd: not a directory");
  // The run's folder (the report's path without .json) taken by a file: refused as well.
  const std::string taken = WriteTemp("taken", "a file of the user's\n");
  ExpectUsageError({"run", "--lib=/bin/true", "-o", taken + ".json", "--", "touch", marker},
                   "poolscope: -o: " + taken + ": not a directory (the folder of the run's reports)");
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the program ran";
}

TEST(CompareCommandTest, UsageErrorsBeforeAnythingRuns) {
  ExpectUsageError({"compare", "--options=report=/tmp/x"},
                   "poolscope: --options: report= is set by this command");
  ExpectUsageError({"compare", "--lib=/nonexistent/libpoolscope.so"},
                   "poolscope: --lib: /nonexistent/libpoolscope.so: no such file");
  ExpectUsageError({"compare", "--fail-on-leak=1"}, "poolscope: --fail-on-leak: takes no value");
  ExpectUsageError({"compare", "--lib=/bin/true", "--report-dir=/etc/passwd/out", "--", "true"},
                   "poolscope: --report-dir: /etc/passwd: not a directory");
  ExpectUsageError({"compare", "--keep=1"}, "poolscope: --keep: takes no value");
  // Each run's reports in a folder of its own, DIR/off and DIR/on: one taken by a file is refused.
  const std::string dir = ::testing::TempDir() + "/compare_dir";
  mkdir(dir.c_str(), 0700);
  std::ofstream(dir + "/off") << "a file of the user's\n";
  ExpectUsageError({"compare", "--lib=/bin/true", "--report-dir=" + dir, "--", "true"},
                   "poolscope: --report-dir: " + dir + "/off: not a directory");
}

// Checked before any process is looked at (pid 1 is never reached).
TEST(AttachCommandTest, UsageErrorsBeforeAnyProcessIsTouched) {
  ExpectUsageError({"attach", "--options=pool=0", "1"},
                   "poolscope: --options: pool= is set by this command (use --pool)");
  ExpectUsageError({"attach", "--options=quiet=0:pool_size", "1"},
                   "poolscope: --options: 'pool_size' is not key=value");
  ExpectUsageError({"attach", "--options=report=/tmp/x.json", "--lib=/nonexistent/libpoolscope.so", "1"},
                   "poolscope: --lib: /nonexistent/libpoolscope.so: no such file");
  ExpectUsageError({"attach", "--pool=maybe", "1"}, "poolscope: --pool: expected on or off, got 'maybe'");
  ExpectUsageError({"attach"}, "poolscope: attach: missing PID (usage: poolscope attach [FLAGS] PID)");
}

}  // namespace
}  // namespace poolscope::tools
