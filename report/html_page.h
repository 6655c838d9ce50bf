// File: report/html_page.h
//
// What the HTML pages of the `poolscope` command share (html_report.cc, html_compare.cc): the head
// of a page with its inline style sheet, its end, and escaping. Private to the html_report library.
//
// Thread-safety: pure functions.
#ifndef POOLSCOPE_REPORT_HTML_PAGE_H_
#define POOLSCOPE_REPORT_HTML_PAGE_H_

#include <string>

namespace poolscope::report {

// "<!DOCTYPE html>" to "<main>": the title (escaped here) and the style sheet, nothing fetched.
std::string PageStart(const std::string& title);

// "</main>" to "</html>".
std::string PageEnd();

// HtmlEscape, shorter.
std::string E(const std::string& text);

// A figure card: a large number over its label (both escaped here), with an extra class.
std::string Card(const std::string& number, const std::string& label, const std::string& extra_class = "");

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_HTML_PAGE_H_
