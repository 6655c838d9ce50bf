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
#include "report/ledger_table.h"

namespace poolscope::report {

// The whole page. `path` is the report's file name, shown in the title.
std::string HtmlReport(const nlohmann::json& report, const std::string& path);

// A table of text cells, for the text pages (columns padded) and the HTML pages (a <table>): a caption,
// the rows (the first one the headings), which column is text (left-aligned; the others are figures),
// and lines after it (processes without a report).
struct CellTable {
  std::string caption;
  std::vector<std::vector<std::string>> rows;
  size_t text_column = 0;
  std::string after;
};

// The table as an HTML <table class="processes">, its caption a <p> before it, `after` a <pre>.
std::string HtmlCellTable(const CellTable& table);

// One run of a comparison page.
struct CompareRun {
  const nlohmann::json* report = nullptr;    // the table's figures: the run's report, or its tree's totals
  RunFacts facts;                            // what the command measured of the run, when it ran it
  std::string label;                         // the head of the run's column ("pooling off")
  const nlohmann::json* timeline = nullptr;  // the report whose timeline is drawn (a tree's root); may be null
  std::string timeline_label;                // its lines' name in the chart's legend
};

// The page of a comparison of two runs (`compare --html`, `diff --html`): the side-by-side ledger as
// a <table> (section id "table", one row per row of the text table, the change in its own column)
// and the verdict; `processes` (the per-process table of two trees, a <table>; none when null);
// with `leaks_by_stack` (diff), the two runs' leaks matched by stack as a table (section id
// "leak-diff"); then both runs' timelines on one chart (section id "timeline").
std::string HtmlComparePage(const std::string& title, const CompareRun& before, const CompareRun& after,
                            const CellTable* processes, bool leaks_by_stack);

// The page of a process tree: `summary` (lines of text: what the tree holds and its totals), the
// per-process table `processes_table` as a <table>, then
// one <section id="process-PID"> per report of `processes` (report, file), each the page above
// with its ids, its labels' targets and its radio buttons' group names prefixed "pPID-" (each
// process's flame graph switches on its own) and its headings one level down.
std::string HtmlTreeReport(const std::string& title, const std::string& summary, const CellTable& processes_table,
                           const std::vector<std::pair<const nlohmann::json*, std::string>>& processes);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_HTML_REPORT_H_
