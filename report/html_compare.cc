// File: report/html_compare.cc
//
// See html_report.h: the page of `compare --html` and `diff --html`. Its ledger is the rows of
// ledger_table.h in a <table>, the leaks by stack those of leak_diff.h; the chart is
// TimelineChart's.
#include <map>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/html_charts.h"
#include "report/html_page.h"
#include "report/html_report.h"
#include "report/leak_diff.h"
#include "report/ledger_table.h"
#include "report/report_model.h"

namespace poolscope::report {
namespace {

using nlohmann::json;

// The side-by-side ledger: a row per row of the text table, a part of the row above (its label
// indented in the text) indented; the verdict below.
std::string LedgerTableSection(const CompareRun& before, const CompareRun& after) {
  static const json kNone = json::object();
  const json& a = before.report != nullptr ? *before.report : kNone;
  const json& b = after.report != nullptr ? *after.report : kNone;
  std::string out = "<section id=\"table\">\n<h2>The two runs side by side</h2>\n<table class=\"compare\">\n";
  out += fmt::format("<tr><th></th><th class=\"n\">{}</th><th class=\"n\">{}</th><th class=\"n\">change</th>"
                     "</tr>\n",
                     E(before.label), E(after.label));
  for (const LedgerRow& row : LedgerRows(a, before.facts, b, after.facts)) {
    const bool part = row.label.rfind("  ", 0) == 0;
    out += fmt::format("<tr><td class=\"label{}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                       "<td class=\"n\">{}</td></tr>\n",
                       part ? " sub" : "", E(part ? row.label.substr(2) : row.label), E(row.before),
                       E(row.after), E(row.change));
  }
  out += "</table>\n";
  out += fmt::format("<div class=\"verdict\">{}</div>\n", E(Verdict(a, b)));
  return out + "</section>\n";
}

// "+2,000", "-200", "0".
std::string SignedThousands(int64_t value) {
  if (value == 0) return "0";
  return (value > 0 ? "+" : "-") + Thousands(value > 0 ? value : -(value + 1) + 1);
}

// The two runs' leaks matched by stack (diff): how many stacks changed how, then the changed ones,
// the largest change in bytes first, at most 20.
std::string LeakDiffTable(const CompareRun& before, const CompareRun& after) {
  constexpr size_t kShown = 20;
  static const json kNone = json::object();
  const json& a = before.report != nullptr ? *before.report : kNone;
  const json& b = after.report != nullptr ? *after.report : kNone;
  std::string out = "<section id=\"leak-diff\">\n<h2>Leaks by stack (live at exit)</h2>\n";
  for (const CompareRun* run : {&before, &after}) {
    const json& report = run == &before ? a : b;
    if (Bool(report, "tracked") == false) {
      out += fmt::format("<p>{} was not tracked (track=0): it lists no leaks.</p>\n", E(run->label));
    }
    if (std::optional<int64_t> omitted = Count(report, "leak_groups_omitted"); omitted.value_or(0) > 0) {
      out += fmt::format("<p>{} left out {} leak groups beyond those it lists.</p>\n", E(run->label),
                         E(Thousands(omitted)));
    }
  }
  std::vector<StackChange> changes = LeakChanges(a, b);
  std::map<std::string, int> counts;
  std::vector<const StackChange*> shown;
  for (const StackChange& change : changes) {
    ++counts[change.Change()];
    if (std::string(change.Change()) != "same") shown.push_back(&change);
  }
  out += fmt::format("<p>{} new, {} gone, {} grown, {} shrunk, {} unchanged.</p>\n", counts["new"],
                     counts["gone"], counts["grown"], counts["shrunk"], counts["same"]);
  if (shown.empty()) return out + "</section>\n";
  out += fmt::format(
      "<table class=\"leak-diff\"><tr><th>change</th><th class=\"n\">bytes</th><th class=\"n\">{0} bytes</th>"
      "<th class=\"n\">{1} bytes</th><th class=\"n\">{0} blocks</th><th class=\"n\">{1} blocks</th>"
      "<th>stack (innermost first)</th></tr>\n",
      E(before.label), E(after.label));
  for (size_t i = 0; i < shown.size() && i < kShown; ++i) {
    const StackChange& change = *shown[i];
    std::string stack;
    for (size_t f = 0; f < change.frames.size() && f < 4; ++f) {
      stack += (f == 0 ? "" : " &lt; ") + E(OneLine(change.frames[f]));
    }
    if (change.frames.size() > 4) stack += " &lt; ...";
    if (stack.empty()) stack = "(no stack)";
    out += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                       "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"stack\">{}</td></tr>\n",
                       change.Change(), E(SignedThousands(change.bytes_b - change.bytes_a)),
                       E(Thousands(change.bytes_a)), E(Thousands(change.bytes_b)),
                       E(Thousands(change.blocks_a)), E(Thousands(change.blocks_b)), stack);
  }
  out += "</table>\n";
  if (shown.size() > kShown) out += fmt::format("<p>{} more changed stacks.</p>\n", shown.size() - kShown);
  return out + "</section>\n";
}

}  // namespace

std::string HtmlComparePage(const std::string& title, const CompareRun& before, const CompareRun& after,
                            const CellTable* processes, bool leaks_by_stack) {
  std::string page = PageStart("poolscope: " + title);
  page += fmt::format("<h1>poolscope: {}</h1>\n", E(title));
  page += LedgerTableSection(before, after);
  if (processes != nullptr) {
    page += "<section id=\"processes\">\n<h2>Processes</h2>\n" + HtmlCellTable(*processes) + "</section>\n";
  }
  if (leaks_by_stack) page += LeakDiffTable(before, after);
  static const json kNone;
  std::string timeline = TimelineChart({{before.timeline != nullptr ? before.timeline : &kNone, before.timeline_label},
                                        {after.timeline != nullptr ? after.timeline : &kNone, after.timeline_label}});
  page += "<section id=\"timeline\">\n<h2>Memory over time, both runs</h2>\n";
  page += timeline.empty() ? std::string("<p>Neither report has a timeline of two points or more.</p>\n")
                           : timeline;
  return page + "</section>\n" + PageEnd();
}

}  // namespace poolscope::report
