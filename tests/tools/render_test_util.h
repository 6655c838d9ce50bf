// File: tests/tools/render_test_util.h
//
// What render_test's files share: the recorded reports and goldens of tests/testdata (read from
// the test's runfiles) and a hand-written report for the call-site tables.
#ifndef POOLSCOPE_TESTS_TOOLS_RENDER_TEST_UTIL_H_
#define POOLSCOPE_TESTS_TOOLS_RENDER_TEST_UTIL_H_

#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "report/report_model.h"

namespace poolscope::report::testdata {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline nlohmann::json LoadData(const std::string& name) {
  absl::StatusOr<Report> report = LoadReport("tests/testdata/" + name);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? report->doc : nlohmann::json();
}

inline std::string Golden(const std::string& name) {
  std::string text = ReadFile("tests/testdata/" + name);
  EXPECT_FALSE(text.empty()) << name;
  return text;
}

// A hand-written report for the call-site table: three sites and the leak groups of one of them.
// By logical allocations: beta (50) first, then gamma and alpha (10 each; gamma has more bytes).
// alpha's stack has two leak groups (2 blocks, 64 B and 1 block, 32 B): 3 blocks (96 B) live at
// exit; beta's leak group has another stack, so beta has none live.
inline nlohmann::json SitesReport() {
  return nlohmann::json::parse(R"({
    "sites": [
      {"logical_allocs": 10, "pool_hits": 8, "real_allocs": 2, "bytes": 640,
       "stack": [{"function": "malloc", "object": "/lib/libc.so.6"},
                 {"function": "alpha", "object": "/bin/p"}, {"function": "main", "object": "/bin/p"}]},
      {"logical_allocs": 50, "pool_hits": 50, "real_allocs": 0, "bytes": 800,
       "stack": [{"function": "beta", "object": "/bin/p"}, {"function": "main", "object": "/bin/p"}]},
      {"logical_allocs": 10, "pool_hits": 0, "real_allocs": 10, "bytes": 960,
       "stack": [{"function": "poolscope_arena_alloc", "object": "/opt/lib/libpoolscope.so"},
                 {"function": "gamma", "object": "/bin/p"}]}],
    "leaks": [
      {"kind": "definitely_lost", "blocks": 2, "bytes": 64,
       "stack": [{"function": "malloc", "object": "/lib/libc.so.6"},
                 {"function": "alpha", "object": "/bin/p"}, {"function": "main", "object": "/bin/p"}]},
      {"kind": "still_reachable", "blocks": 1, "bytes": 32,
       "stack": [{"function": "malloc", "object": "/lib/libc.so.6"},
                 {"function": "alpha", "object": "/bin/p"}, {"function": "main", "object": "/bin/p"}]},
      {"kind": "definitely_lost", "blocks": 1, "bytes": 16,
       "stack": [{"function": "beta", "object": "/bin/p"}, {"function": "other", "object": "/bin/p"}]}]
  })");
}
}  // namespace poolscope::report::testdata

#endif  // POOLSCOPE_TESTS_TOOLS_RENDER_TEST_UTIL_H_
