// File: report/html_report.h
//
// The HTML pages of the `poolscope` command, each one self-contained file (inline CSS and inline
// SVG, no script, no external font, image or URL). Every string from a report is HTML-escaped.
//
// `poolscope report --format=html`: what the program loses at exit first (the reachability scan's
// four classes, blocks and bytes; or that the scan was not made), then what detectors below
// poolscope see (a malloc/free-counting detector's unfreed blocks outside pools and pool blocks,
// memcheck's and LeakSanitizer's reports, the verdicts), the two ledgers in one table with bars,
// the request size histogram with a marker at the pool size, memory over time, a flame graph of the
// lost bytes with a switch (radio buttons and CSS) to all bytes live at exit, the leak table and
// the top call sites (each stack named by its site frame, stack_frames.h, the whole stack in a
// <details>), the pool and errors. The sections have ids: loss, detector, ledgers, sizes,
// timeline, flame, leaks, sites, pool, errors.
//
// Thread-safety: pure functions.
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
// with its ids, its labels' targets and its radio buttons' group names prefixed "pPID-" (each
// process's flame graph switches on its own) and its headings one level down.
std::string HtmlTreeReport(const std::string& title, const std::string& summary,
                           const std::vector<std::pair<const nlohmann::json*, std::string>>& processes);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_HTML_REPORT_H_
