// File: report/html_report.h
//
// `poolscope report --format=html`: one self-contained HTML page (inline CSS and inline SVG, no
// script, no external font, image or URL) showing the two ledgers as a bar chart, the request
// size histogram with a marker at the pool size (axes titled, tick labels rotated), the real blocks
// live at exit by kind, a flame graph of the bytes live at exit, the leak table (stacks folded to
// their first program frame in <details>), and the top call sites. Each of the last three is a
// <section> with an id (flame, leaks, sites). Every string from the report is HTML-escaped.
//
// Thread-safety: pure function.
#ifndef POOLSCOPE_REPORT_HTML_REPORT_H_
#define POOLSCOPE_REPORT_HTML_REPORT_H_

#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace poolscope::report {

// The whole page. `path` is the report's file name, shown in the title.
std::string HtmlReport(const nlohmann::json& report, const std::string& path);

// The page of a comparison of two runs (`compare --html`, `diff --html`): `table` (preformatted
// text, as printed on stdout), then both reports' timelines on one chart.
std::string HtmlComparePage(const std::string& title, const std::string& table, const nlohmann::json& before,
                            const std::string& before_label, const nlohmann::json& after,
                            const std::string& after_label);

// The page of a process tree: `summary` (preformatted text: totals and the per-process table), then
// one <section id="process-PID"> per report of `processes` (report, file), each the page above
// with its ids prefixed "pPID-" and its headings one level down.
std::string HtmlTreeReport(const std::string& title, const std::string& summary,
                           const std::vector<std::pair<const nlohmann::json*, std::string>>& processes);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_HTML_REPORT_H_
