// File: tools/html_report.h
//
// `poolscope report --format=html`: one self-contained HTML page (inline CSS and inline SVG, no
// script, no external font, image or URL) showing the two ledgers as a bar chart, the request
// size histogram with a marker at the pool size, the real blocks live at exit by kind, and the
// leak table. Every string from the report is HTML-escaped.
//
// Thread-safety: pure function.
#ifndef POOLSCOPE_TOOLS_HTML_REPORT_H_
#define POOLSCOPE_TOOLS_HTML_REPORT_H_

#include <string>

#include "nlohmann/json.hpp"

namespace poolscope::tools {

// The whole page. `path` is the report's file name, shown in the title.
std::string HtmlReport(const nlohmann::json& report, const std::string& path);

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_HTML_REPORT_H_
