// File: report/text_report.h
//
// The renderings of one report that `poolscope report` prints as text: the page a person reads top
// to bottom (--format=text), folded stacks for flamegraph.pl (--format=folded) and the validated
// report re-emitted pretty-printed (--format=json). Also the helpers shared with the HTML page
// (the call sites' rows, the order of leak classes); the frames are named as stack_frames.h says.
//
// Thread-safety: pure functions.
#ifndef POOLSCOPE_REPORT_TEXT_REPORT_H_
#define POOLSCOPE_REPORT_TEXT_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "report/stack_frames.h"

namespace poolscope::report {

// How many leak stacks the text page and the HTML page show.
inline constexpr int kLeaksShown = 10;

// How many call sites the text page and the HTML page show.
inline constexpr int kSitesShown = 20;

// One row of the call-site table: a `sites[]` entry and what of it is live at exit, the bytes and
// blocks of the `leaks[]` groups whose stack is the site's stack (any kind).
struct SiteRow {
  const nlohmann::json* stack = nullptr;  // the site's frames, innermost first; null when absent
  int64_t logical_allocs = 0;
  int64_t pool_hits = 0;
  int64_t real_allocs = 0;
  int64_t bytes = 0;
  int64_t live_blocks = 0;
  int64_t live_bytes = 0;
  int64_t pools_pinned = 0;  // pools its live blocks keep alive at exit
  int64_t pinned_bytes = 0;
  int64_t peak_pools_pinned = 0;  // and at the peak of real live bytes (`pinning_peak`)
  int64_t peak_pinned_bytes = 0;
};

// a + b, held at INT64_MAX or INT64_MIN instead of overflowing (a report's figures are untrusted).
int64_t SaturatingAdd(int64_t a, int64_t b);

// The `sites[]` entries with most logical allocations first (ties: more bytes first, then report
// order), at most `limit` of them.
std::vector<SiteRow> TopSites(const nlohmann::json& report, size_t limit);

// The sites that pin most pools and the one pooling saves most at: site_pinning.h.

// A site in one line: its site frame's function, file:line, and what it called into libc
// ("lose_copy  demo.c:12  (via __strdup)").
std::string SiteLine(const SiteRow& row);

// What of the still-reachable blocks exists only because poolscope is loaded
// (`reachability.loaded_by_poolscope`), as a clause to end a sentence with: "; 1 block (71.0 KiB) of
// them only because poolscope loaded libstdc++.so.6"; "" when the report names none.
std::string LoadedByPoolscopeClause(const nlohmann::json& report);

// The order lost leak groups are listed in: definitely (0), indirectly (1), possibly lost (2), then
// groups of no known class (3).
int KindRank(const nlohmann::json& leak);

// The by_api keys of both ledgers: the schema's in its order, then any others the report adds.
std::vector<std::string> ApiKeys(const nlohmann::json& report);

// The text page (--format=text). `path` is the report's file name, shown in the title.
std::string TextReport(const nlohmann::json& report, const std::string& path);

// One line per leak stack, "outermost;...;innermost bytes" (--format=folded).
std::string FoldedStacks(const nlohmann::json& report);

// The report pretty-printed with two-space indentation and a final newline (--format=json).
std::string PrettyJson(const nlohmann::json& report);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_TEXT_REPORT_H_
