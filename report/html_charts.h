// File: report/html_charts.h
//
// The charts of the HTML pages, each one inline SVG element drawn by hand with fixed sizes (a page
// 1100 px wide): the scales are linear and every bar carries its figure, so a bar too short to see
// still reads. Every string from the report is HTML-escaped.
//
// Thread-safety: pure functions.
#ifndef POOLSCOPE_REPORT_HTML_CHARTS_H_
#define POOLSCOPE_REPORT_HTML_CHARTS_H_

#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace poolscope::report {

// Grouped horizontal bars: for each measure, a logical and a real bar.
std::string LedgerChart(const nlohmann::json& report);

// Vertical bars per size bucket, with a dashed line at the pool size.
std::string SizeChart(const nlohmann::json& report);

// One stacked bar: unfreed blocks outside pools, pools cached, pools in use.
std::string LiveChart(const nlohmann::json& report);

// The flame graph of the bytes live at exit (the `leaks[]` groups' bytes by stack, outermost frame
// at the bottom, each stack cut at its first program frame) as one inline SVG element, or a
// paragraph saying there are none. Frames are merged by function name along each path; siblings
// are ordered by bytes, largest first, and a frame is as wide as its bytes in 1000 px.
std::string FlameGraph(const nlohmann::json& report);

// Memory over time (the reports' `timeline`s): live bytes of both ledgers against time when every run
// drawn has them (track=1), else live blocks, and the resident set on its own scale (right axis,
// dashed), for one run or for several on one chart (each run's lines in its own shade, named by its
// label). Empty when no run has two points or more.
std::string TimelineChart(const std::vector<std::pair<const nlohmann::json*, std::string>>& runs);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_HTML_CHARTS_H_
