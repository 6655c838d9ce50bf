// File: tests/tools/check_test.cc
//
// `poolscope check` against reports the library wrote (tests/testdata/demo_on.json: the demo
// workload with pooling on and leak_exitcode=23; demo_off.json: pooling off). Both hold; then each
// identity of report/identities.h is broken by hand in a copy, which must make the command exit 1
// with a line naming that identity. Unreadable input exits 2 with one line on stderr.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/commands.h"

namespace poolscope::tools {
namespace {

using nlohmann::json;

json Recorded(const std::string& name) {
  std::ifstream in("tests/testdata/" + name);
  EXPECT_TRUE(in.good()) << name;
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

struct Outcome {
  int status;
  std::string out;
  std::string err;
};

Outcome RunCheck(const std::vector<std::string>& files) {
  std::vector<std::string> args = {"poolscope", "check"};
  args.insert(args.end(), files.begin(), files.end());
  std::ostringstream out, err;
  int status = Main(args, out, err);
  return {status, out.str(), err.str()};
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string Write(const std::string& name, const std::string& text) {
  std::string path = TempPath(name);
  std::ofstream(path) << text;
  return path;
}

Outcome CheckDoc(const json& doc) { return RunCheck({Write("copy.json", doc.dump())}); }

void Add(json& doc, const std::string& pointer, int64_t delta) {
  json& field = doc[json::json_pointer(pointer)];
  field = field.get<int64_t>() + delta;
}

void Replace(json& doc, const std::string& pointer, const std::string& from,
             const std::string& to) {
  std::string text = doc[json::json_pointer(pointer)].get<std::string>();
  size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << text;
  doc[json::json_pointer(pointer)] = text.replace(at, from.size(), to);
}

// One identity broken by hand: the edit, and what the line that reports it must contain.
struct Breakage {
  const char* report;
  std::function<void(json&)> edit;
  std::vector<std::string> names;
};

constexpr int64_t kHuge = 1000000000;

std::vector<Breakage> Breakages() {
  std::vector<Breakage> cases = {
      // The two ledgers balance.
      {"demo_on.json",
       [](json& d) { Add(d, "/logical/live_blocks", 1); },
       {"logical.allocs - logical.frees = ", "!= logical.live_blocks = "}},
      {"demo_on.json",
       [](json& d) { Add(d, "/real/live_blocks", 1); },
       {"real.allocs - real.frees = ", "!= real.live_blocks = "}},
      // The pool counts.
      {"demo_on.json",
       [](json& d) { Add(d, "/pool/pools_released", 1); },
       {"pool.pools_cached_at_exit + pool.pools_in_use_at_exit = ",
        "!= pool.pools_created - pool.pools_released = "}},
      {"demo_on.json",
       [](json& d) { Add(d, "/reconciliation/pools_cached", 1); },
       {"reconciliation.pools_cached = 5 != pool.pools_cached_at_exit = 4"}},
      {"demo_on.json",
       [](json& d) { Add(d, "/reconciliation/pools_in_use", 1); },
       {"reconciliation.pools_in_use = 5 != pool.pools_in_use_at_exit = 4"}},
      {"demo_on.json",
       [](json& d) { Add(d, "/pool/pooled_live_blocks", 1); },
       {"reconciliation.pooled_live_blocks = 3 != pool.pooled_live_blocks = 4"}},
      // The reconciliation.
      {"demo_on.json",
       [](json& d) { Add(d, "/reconciliation/real_live_blocks", 1); },
       {"reconciliation.real_live_blocks = 17 != real.live_blocks = 16"}},
      {"demo_on.json",
       [](json& d) { Add(d, "/reconciliation/unpooled_live_blocks", 1); },
       {"reconciliation.unpooled_live_blocks = 9 != logical.live_blocks - "
        "reconciliation.pooled_live_blocks = 11 - 3 = 8"}},
      {"demo_on.json",
       [](json& d) { d["reconciliation"]["interrupted_by_fork"] = 2; },
       {"reconciliation.interrupted_by_fork = 2 != 0 outside a fork() child"}},
      {"demo_on.json",
       [](json& d) {
         d["process"]["forked_from"] = 4242;
         d["reconciliation"]["interrupted_by_fork"] = 2;
       },
       {"reconciliation.real_live_blocks = 16 != reconciliation.unpooled_live_blocks + "
        "reconciliation.pools_cached + reconciliation.pools_in_use + "
        "reconciliation.interrupted_by_fork = 8 + 4 + 4 + 2 = 18"}},
      {"demo_on.json",
       [](json& d) { d["reconciliation"]["balanced"] = false; },
       {"reconciliation.balanced = false != true"}},
      // The detector view.
      {"demo_on.json",
       [](json& d) { Add(d, "/reconciliation/detector_view/unfreed_blocks", 1); },
       {"reconciliation.detector_view.unfreed_blocks = 17 != reconciliation.real_live_blocks = "
        "16"}},
      {"demo_on.json",
       [](json& d) { Add(d, "/reconciliation/detector_view/program_leak_blocks", 1); },
       {"reconciliation.detector_view.program_leak_blocks = 9 != "
        "reconciliation.unpooled_live_blocks = 8"}},
      {"demo_on.json",
       [](json& d) { Add(d, "/reconciliation/detector_view/pool_blocks", 1); },
       {"reconciliation.detector_view.pool_blocks = 9 != reconciliation.pools_cached + "
        "reconciliation.pools_in_use = 4 + 4 = 8"}},
      {"demo_on.json",
       [](json& d) { Add(d, "/reconciliation/detector_view/unfreed_bytes", 1); },
       {"reconciliation.detector_view.unfreed_bytes = 79121 != real.live_bytes = 79120"}},
      {"demo_on.json",
       [](json& d) {
         Replace(d, "/reconciliation/detector_view/verdict", "would see 16", "would see 15");
       },
       {"verdict does not say \"would see 16 unfreed blocks\""}},
      {"demo_on.json",
       [](json& d) {
         Replace(d, "/reconciliation/detector_view/verdict", "leaves 11 blocks", "leaves 8 blocks");
       },
       {"verdict does not say \"3 more of the program's blocks, so the program leaves 11 blocks "
        "unfreed\""}},
      // The size buckets.
      {"demo_on.json",
       [](json& d) { Add(d, "/sizes/total", 1); },
       {"sum(sizes.buckets[].count) = ", "!= sizes.total = "}},
      {"demo_on.json",
       [](json& d) { Add(d, "/sizes/buckets/0/count", 1); },
       {"sum(sizes.buckets[].count where le <= sizes.pool_size = 64) = ",
        "!= sizes.at_or_below_pool_size = "}},
      {"demo_on.json",
       [](json& d) { d["sizes"]["share_at_or_below_pool_size"] = 0.5; },
       {"sizes.at_or_below_pool_size / sizes.total = ",
        "!= sizes.share_at_or_below_pool_size = 0.5"}},
      // Each thread's ledgers balance; the pools cached are the live threads'.
      {"demo_on.json",
       [](json& d) { Add(d, "/threads/0/logical/live_blocks", 1); },
       {"threads[0].logical.allocs - threads[0].logical.frees = ",
        "!= threads[0].logical.live_blocks = "}},
      {"demo_on.json",
       [](json& d) { Add(d, "/threads/0/real/live_blocks", 1); },
       {"threads[0].real.allocs - threads[0].real.frees = ", "!= threads[0].real.live_blocks = "}},
      {"demo_on.json",
       [](json& d) { Add(d, "/threads/0/pool/pools_cached", 1); },
       {"sum(threads[].pool.pools_cached) = 5 != pool.pools_cached_at_exit = 4"}},
      {"demo_on.json",
       [](json& d) { Add(d, "/threads/0/logical/by_api/malloc", kHuge); },
       {"sum(threads[].logical.by_api) > logical.by_api at malloc: "}},
      {"demo_on.json",
       [](json& d) { Add(d, "/threads/0/real/by_api/free", kHuge); },
       {"sum(threads[].real.by_api) > real.by_api at free: "}},
      {"demo_on.json",
       [](json& d) { Add(d, "/threads/0/pool/misses/too_large", kHuge); },
       {"sum(threads[].pool.misses) > pool.misses at too_large: "}},
      // leak_check's split.
      {"demo_on.json",
       [](json& d) { Add(d, "/leak_check/program_leak_blocks", 1); },
       {"max(0, leak_check.live_blocks - leak_check.live_at_start - leak_check.stdio_buffers = "
        "11 - 1 - 1 = 9) != leak_check.program_leak_blocks = 10"}},
      // Every live block is in a leak group.
      {"demo_on.json",
       [](json& d) {
         for (json& group : d["leaks"]) group["blocks"] = 0;
       },
       {"sum(leaks[].blocks) = 0 < logical.live_blocks = 11"}},
      // The real ledger from the logical one and the pool.
      {"demo_on.json",
       [](json& d) { Add(d, "/pool/spills", 1); },
       {"!= logical.allocs - pool.hits + pool.pools_created + pool.spills = ", "(pooling on)"}},
      {"demo_on.json",
       [](json& d) { d["pool"]["enabled"] = false; },
       {"pool.enabled = false != true (options.pool = 1"}},
      {"demo_off.json",
       [](json& d) { d["pool"]["enabled"] = true; },
       {"pool.enabled = true != false (options.pool = 0"}},
      {"demo_off.json",
       [](json& d) {
         Add(d, "/real/allocs", 1);
         Add(d, "/real/live_blocks", 1);
       },
       {"real.allocs = ", "!= logical.allocs = ", "(pooling off)"}},
      {"demo_off.json",
       [](json& d) {
         Add(d, "/real/frees", 1);
         Add(d, "/real/live_blocks", -1);
       },
       {"real.frees = ", "!= logical.frees = ", "(pooling off)"}},
      // A program without explicit arenas: the entry points match one for one.
      {"demo_off.json",
       [](json& d) {
         for (const char* side : {"logical", "real"}) {
           d[side]["by_api"]["poolscope_arena_alloc"] = 0;
           d[side]["by_api"]["poolscope_arena_close"] = 0;
         }
         d["real"]["by_api"] = d["logical"]["by_api"];
         Add(d, "/real/by_api/calloc", 1);
       },
       {"real.by_api != logical.by_api: real.by_api.calloc = 5 != logical.by_api.calloc = 4"}},
      // The schema.
      {"demo_on.json", [](json& d) { d["process"].erase("pid"); }, {"process.pid is missing"}},
      {"demo_on.json",
       [](json& d) { d["logical"]["by_api"].erase("pvalloc"); },
       {"logical.by_api.pvalloc is missing"}},
      {"demo_on.json",
       [](json& d) { d["logical"]["allocs"] = 1.5; },
       {"logical.allocs must be an integer, got 1.5"}},
      {"demo_on.json", [](json& d) { d.erase("sizes"); }, {"sizes is missing"}},
      {"demo_on.json",
       [](json& d) { d["process"]["reason"] = "crash"; },
       {"process.reason = \"crash\", expected \"exit\", \"snapshot\", \"signal\" or \"detach\""}},
      {"demo_on.json",
       [](json& d) {
         d["process"]["reason"] = "signal";
         d["process"]["signal"] = "SIGKILL";
       },
       {"process.signal = \"SIGKILL\", expected"}},
  };
  const char* sides[] = {"logical", "real"};
  for (const char* side : sides) {
    for (const char* field : {"allocs", "frees", "reallocs", "bytes_requested"}) {
      std::string pointer = std::string("/threads/0/") + side + "/" + field;
      cases.push_back({"demo_on.json",
                       [pointer](json& d) { Add(d, pointer, kHuge); },
                       {std::string("sum(threads[].") + side + "." + field + ") = ",
                        std::string(" > ") + side + "." + field + " = "}});
    }
  }
  // poolscope's own resident memory.
  cases.push_back({"demo_on.json",
                   [](json& d) {
                     d["internal"]["mapped_bytes"] = 8192;
                     d["internal"]["resident_bytes"] = 12288;
                     d["internal"]["peak_resident_bytes"] = 16384;
                   },
                   {"internal.resident_bytes = 12288 > internal.mapped_bytes = 8192"}});
  cases.push_back({"demo_on.json",
                   [](json& d) {
                     d["internal"]["resident_bytes"] = 8192;
                     d["internal"]["peak_resident_bytes"] = 4096;
                   },
                   {"internal.resident_bytes = 8192 > internal.peak_resident_bytes = 4096"}});
  // The timeline: points in time order, at most 201, the last one the report's own counts.
  auto timeline = [](json& d, size_t n) {
    json points = json::array();
    for (size_t i = 0; i < n; ++i) {
      points.push_back({{"t_ms", i},
                        {"logical_live_blocks", d["logical"]["live_blocks"]},
                        {"real_live_blocks", d["real"]["live_blocks"]},
                        {"pools", d["pool"]["pools_cached_at_exit"].get<int64_t>() +
                                      d["pool"]["pools_in_use_at_exit"].get<int64_t>()},
                        {"rss_kib", nullptr},
                        {"logical_live_bytes", d["logical"]["live_bytes"]},
                        {"real_live_bytes", d["real"]["live_bytes"]}});
    }
    d["timeline"] = {{"interval_ms", 5}, {"points", points}};
  };
  cases.push_back({"demo_on.json",
                   [timeline](json& d) {
                     timeline(d, 3);
                     d["timeline"]["points"][1]["t_ms"] = 7;
                   },
                   {"timeline.points[2].t_ms = 2 < 7 (the point before it)"}});
  cases.push_back({"demo_on.json",
                   [timeline](json& d) {
                     timeline(d, 2);
                     Add(d, "/timeline/points/1/logical_live_blocks", 1);
                   },
                   {"timeline.points[1].logical_live_blocks = ", " != logical.live_blocks = "}});
  cases.push_back({"demo_on.json",
                   [timeline](json& d) {
                     timeline(d, 2);
                     Add(d, "/timeline/points/1/pools", 1);
                   },
                   {"timeline.points[1].pools = "}});
  for (const char* field : {"logical", "real"}) {
    const std::string bytes = std::string(field) + "_live_bytes";
    cases.push_back({"demo_on.json",
                     [timeline, bytes](json& d) {
                       timeline(d, 2);
                       Add(d, "/timeline/points/1/" + bytes, 1);
                     },
                     {"timeline.points[1]." + bytes + " = ", std::string(" != ") + field + ".live_bytes = "}});
  }
  cases.push_back({"demo_on.json", [timeline](json& d) { timeline(d, 202); },
                   {"timeline.points has 202 points, more than 201"}});
  for (const char* field : {"hits", "pools_created", "pools_reused", "pools_released",
                            "resets_in_place", "spills", "absorbs"}) {
    std::string pointer = std::string("/threads/0/pool/") + field;
    cases.push_back({"demo_on.json",
                     [pointer](json& d) { Add(d, pointer, kHuge); },
                     {std::string("sum(threads[].pool.") + field + ") = ",
                      std::string(" > pool.") + field + " = "}});
  }
  // The run a report belongs to: a name, and only in a report of a run (which names its root).
  cases.push_back({"demo_on.json", [](json& d) { d["process"]["run"] = 7; },
                   {"process.run must be null or a non-empty string, got 7"}});
  cases.push_back({"demo_on.json", [](json& d) { d["process"]["run"] = ""; },
                   {"process.run must be null or a non-empty string, got \"\""}});
  cases.push_back({"demo_on.json",
                   [](json& d) {
                     d["process"]["run"] = "4242-1";
                     d["process"]["root_pid"] = nullptr;
                   },
                   {"process.run = \"4242-1\" without an integer process.root_pid"}});
  return cases;
}

TEST(CheckCommandTest, RecordedReportsHold) {
  Outcome outcome = RunCheck({"tests/testdata/demo_on.json", "tests/testdata/demo_off.json"});
  EXPECT_EQ(outcome.status, kExitOk) << outcome.out << outcome.err;
  EXPECT_NE(outcome.out.find("tests/testdata/demo_on.json: ok, "), std::string::npos)
      << outcome.out;
  EXPECT_NE(outcome.out.find("tests/testdata/demo_off.json: ok, "), std::string::npos)
      << outcome.out;
  EXPECT_EQ(outcome.err, "");
}

// A report of a run names it and its root; one without the field (older) or with null holds too.
TEST(CheckCommandTest, ReportOfARunHolds) {
  json doc = Recorded("demo_on.json");
  ASSERT_FALSE(doc.is_discarded());
  doc["process"]["run"] = "4242-1764686000000000000";
  doc["process"]["root_pid"] = 4242;
  Outcome outcome = CheckDoc(doc);
  EXPECT_EQ(outcome.status, kExitOk) << outcome.out << outcome.err;
  doc["process"]["run"] = nullptr;
  outcome = CheckDoc(doc);
  EXPECT_EQ(outcome.status, kExitOk) << outcome.out << outcome.err;
}

TEST(CheckCommandTest, EachBrokenIdentityIsNamed) {
  int n = 0;
  for (const Breakage& breakage : Breakages()) {
    SCOPED_TRACE(testing::Message()
                 << "case " << n++ << " on " << breakage.report << ": " << breakage.names[0]);
    json doc = Recorded(breakage.report);
    ASSERT_FALSE(doc.is_discarded());
    breakage.edit(doc);
    Outcome outcome = CheckDoc(doc);
    EXPECT_EQ(outcome.status, kExitDifference) << outcome.out << outcome.err;
    // One line holds every name of the identity.
    bool named = false;
    std::istringstream lines(outcome.out);
    for (std::string line; std::getline(lines, line);) {
      bool all = true;
      for (const std::string& name : breakage.names)
        all = all && line.find(name) != std::string::npos;
      named = named || all;
    }
    EXPECT_TRUE(named) << outcome.out;
  }
}

// A report signal that stopped a call between its two ledgers' updates leaves them unbalanced; the
// report then says its counters are not exact, and `balanced`, which compares the ledgers, is not held.
TEST(CheckCommandTest, InexactCountersLeaveBalancedOut) {
  json doc = Recorded("demo_on.json");
  doc["reconciliation"]["balanced"] = false;
  EXPECT_EQ(CheckDoc(doc).status, kExitDifference);
  doc["process"]["counters_exact"] = false;
  EXPECT_EQ(CheckDoc(doc).status, kExitOk) << CheckDoc(doc).out;
}

TEST(CheckCommandTest, InexactCountersSkipOnlyTheCrossLedgerIdentities) {
  json doc = Recorded("demo_on.json");
  Add(doc, "/pool/spills", 1);  // breaks real.allocs == logical.allocs - hits + pools + spills
  doc["process"]["counters_exact"] = false;
  EXPECT_EQ(CheckDoc(doc).status, kExitOk);
  Add(doc, "/logical/live_blocks", 1);  // within one reading: still checked
  Outcome outcome = CheckDoc(doc);
  EXPECT_EQ(outcome.status, kExitDifference);
  EXPECT_NE(outcome.out.find("logical.allocs - logical.frees"), std::string::npos) << outcome.out;
}

// The timeline's last point's bytes are held to the report's own when known, and not in a report
// whose counters were read while threads ran or in a fork child that lost threads.
TEST(CheckCommandTest, TimelineBytesCheckedWhenKnownAndExact) {
  json doc = Recorded("demo_on.json");
  json point = {{"t_ms", 0},
                {"logical_live_blocks", doc["logical"]["live_blocks"]},
                {"real_live_blocks", doc["real"]["live_blocks"]},
                {"pools", doc["pool"]["pools_cached_at_exit"].get<int64_t>() +
                              doc["pool"]["pools_in_use_at_exit"].get<int64_t>()},
                {"rss_kib", nullptr},
                {"logical_live_bytes", doc["logical"]["live_bytes"].get<int64_t>() + 1},
                {"real_live_bytes", nullptr}};
  doc["timeline"] = {{"interval_ms", 5}, {"points", json::array({point})}};
  EXPECT_EQ(CheckDoc(doc).status, kExitDifference);
  json lost = doc;
  lost["threads_lost_at_fork"] = 2;
  EXPECT_EQ(CheckDoc(lost).status, kExitOk) << CheckDoc(lost).out;
  json inexact = doc;
  inexact["process"]["counters_exact"] = false;
  EXPECT_EQ(CheckDoc(inexact).status, kExitOk) << CheckDoc(inexact).out;
  doc["timeline"]["points"][0]["logical_live_bytes"] = nullptr;  // unknown: nothing to hold
  EXPECT_EQ(CheckDoc(doc).status, kExitOk) << CheckDoc(doc).out;
}

TEST(CheckCommandTest, UnreadableInputIsStatus2WithOneLine) {
  for (const char* name : {"no_such_report.json", "empty.json", "not_json.json", "truncated.json",
                           "other_schema.json"}) {
    SCOPED_TRACE(name);
    std::string path = std::string("tests/testdata/") + name;
    Outcome outcome = RunCheck({path});
    EXPECT_EQ(outcome.status, kExitUsage);
    EXPECT_EQ(outcome.err.rfind("poolscope: " + path + ": ", 0), 0u) << outcome.err;
    EXPECT_EQ(std::count(outcome.err.begin(), outcome.err.end(), '\n'), 1) << outcome.err;
  }
  Outcome array = RunCheck({Write("array.json", "[1, 2]")});
  EXPECT_EQ(array.status, kExitUsage);
  EXPECT_NE(array.err.find("not a poolscope report"), std::string::npos) << array.err;
}

TEST(CheckCommandTest, EveryFileIsChecked) {
  json broken = Recorded("demo_on.json");
  Add(broken, "/logical/live_blocks", 1);
  std::string bad = Write("bad.json", broken.dump());
  Outcome outcome = RunCheck({bad, "tests/testdata/demo_off.json"});
  EXPECT_EQ(outcome.status, kExitDifference);
  EXPECT_NE(outcome.out.find(bad + ": logical.allocs"), std::string::npos) << outcome.out;
  EXPECT_NE(outcome.out.find("demo_off.json: ok"), std::string::npos) << outcome.out;
  // Unreadable wins over broken, and the rest is still checked.
  outcome = RunCheck({bad, "tests/testdata/not_json.json", "tests/testdata/demo_off.json"});
  EXPECT_EQ(outcome.status, kExitUsage);
  EXPECT_NE(outcome.out.find("demo_off.json: ok"), std::string::npos) << outcome.out;
}

TEST(CheckCommandTest, UsageAndHelp) {
  std::ostringstream out, err;
  EXPECT_EQ(Main({"poolscope", "check"}, out, err), kExitUsage);
  EXPECT_EQ(err.str(), "poolscope: check: missing operand R.json\n");
  std::ostringstream help, none;
  EXPECT_EQ(Main({"poolscope", "check", "--help"}, help, none), kExitOk);
  EXPECT_EQ(help.str().rfind("usage: poolscope check R.json", 0), 0u) << help.str();
}

}  // namespace
}  // namespace poolscope::tools
