// File: report/html_charts.h
//
// The charts of the HTML pages, each one inline SVG element drawn by hand with fixed sizes (a page
// 1100 px wide): the scales are linear and every bar carries its figure (beside it, in its tooltip or
// in its table row), so a bar too short to see still reads. Every string from the report is HTML-escaped.
//
// Thread-safety: pure functions.
#ifndef POOLSCOPE_REPORT_HTML_CHARTS_H_
#define POOLSCOPE_REPORT_HTML_CHARTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace poolscope::report {

// The colours of the two ledgers wherever the pages draw them: logical (the program's calls) and
// real (the calls that reached the allocator below).
inline constexpr char kLogicalColor[] = "#3b6fb6";
inline constexpr char kRealColor[] = "#e07b28";

// One row of the ledger table as two horizontal bars, the logical (program) figure's and the real
// (allocator below) figure's, the longer of the two 190 px: how much of what the program asked for
// reached the allocator, row by row. A figure the report lacks draws no bar.
std::string LedgerBars(std::optional<int64_t> logical, std::optional<int64_t> real);

// Vertical bars per size bucket, with a dashed line at the pool size.
std::string SizeChart(const nlohmann::json& report);

// One stacked bar: unfreed blocks outside pools, pools cached, pools in use.
std::string LiveChart(const nlohmann::json& report);

// Which bytes a flame graph draws: those of the `leaks[]` groups the reachability scan found lost
// (definitely, indirectly and possibly lost), or of every group (all bytes live at exit).
enum class FlameBytes { kLost, kAllLive };

// The flame graph of the bytes at exit (the chosen `leaks[]` groups' bytes by stack, outermost
// frame at the bottom, each stack cut at its first program frame) as one inline SVG element, or a
// paragraph saying there are none. Frames are merged by function name along each path; siblings
// are ordered by bytes, largest first, and a frame is as wide as its bytes in 1000 px.
std::string FlameGraph(const nlohmann::json& report, FlameBytes which);

// Memory over time (the reports' `timeline`s): live bytes of both ledgers against time when every run
// drawn has them (track=1), else live blocks, and the resident set on its own scale (right axis),
// for one run or for two on one chart. Every line has its own colour; the second run's lines are
// dashed, and each measure has its marker (logical a circle, real a square, resident set a
// triangle) at eight points along its line; the legend shows each line's sample with its name (the
// run's label, then the measure). Empty when no run has two points or more.
std::string TimelineChart(const std::vector<std::pair<const nlohmann::json*, std::string>>& runs);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_HTML_CHARTS_H_
