// File: report/html_page.cc
//
// See html_page.h.
#include "report/html_page.h"

#include "fmt/format.h"
#include "report/format_util.h"

namespace poolscope::report {
namespace {

constexpr const char* kStyle = R"css(
body { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; color: #1d2330;
       background: #ffffff; margin: 0; }
main { max-width: 1100px; margin: 0 auto; padding: 20px 24px 40px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #d5d9e0; padding-bottom: 4px; }
p.meta { color: #555f70; margin: 2px 0; font-size: 13px; word-break: break-all; }
.verdict { background: #f3f6fb; border-left: 4px solid #3b6fb6; padding: 10px 14px; margin: 14px 0;
           font-size: 15px; }
section.headline h2 { font-size: 20px; border-bottom: none; margin-top: 18px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
p.lead { font-size: 17px; margin: 6px 0 10px; }
p.unknown { font-size: 16px; background: #fff8e6; border-left: 4px solid #d4a017; padding: 10px 14px; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; margin: 12px 0; }
.card { border: 1px solid #d5d9e0; border-radius: 6px; padding: 8px 14px; flex: 1 1 0; }
.card .n { font-size: 22px; font-weight: bold; }
.card .l { font-size: 12px; color: #555f70; }
.card .b { font-size: 14px; }
.cards.loss .card { border-width: 2px; }
.cards.loss .card.definitely_lost, .cards.loss .card.indirectly_lost { border-color: #c0392b; }
.cards.loss .card.possibly_lost { border-color: #e07b28; }
.cards.loss .card .l { font-size: 14px; font-weight: bold; color: #1d2330; }
.cards.detector .card { background: #f7f8fa; }
.cards.detector .n { font-size: 18px; color: #555f70; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #e6e9ee; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
td.stack { font-family: "DejaVu Sans Mono", monospace; font-size: 12px; }
td.stack span.where { color: #6b7486; }
table.ledgers td { vertical-align: middle; }
span.key { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 8px; }
.ok { color: #2e7d32; font-weight: bold; }
.bad { color: #c0392b; font-weight: bold; }
svg text { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; font-size: 12px;
           fill: #1d2330; }
svg text.axis-title { font-weight: bold; fill: #555f70; }
details.stack summary { cursor: pointer; }
details.stack span.more { color: #6b7486; font-size: 11px; }
details.stack span.via { color: #6b7486; font-size: 11px; font-style: italic; }
details.stack div.frame { padding-left: 16px; }
details.stack div.skipped { color: #8a93a3; }
svg.flame text { font-size: 11px; pointer-events: none; }
details.detectors { margin: 8px 0 14px; font-size: 14px; }
details.detectors summary { cursor: pointer; color: #3b6fb6; }
label.flame-choice { font-size: 13px; margin: 0 18px 10px 2px; cursor: pointer; }
div.flame-view { display: none; }
input.flame-lost:checked ~ div.flame-lost, input.flame-all:checked ~ div.flame-all { display: block; }
table.compare td.label.sub { padding-left: 26px; }
)css";

}  // namespace

std::string E(const std::string& text) { return HtmlEscape(text); }

std::string PageStart(const std::string& title) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n"
      "<style>{}</style>\n</head>\n<body>\n<main>\n",
      E(title), kStyle);
}

std::string PageEnd() { return "</main>\n</body>\n</html>\n"; }

std::string Card(const std::string& number, const std::string& label, const std::string& extra_class) {
  return fmt::format("<div class=\"card{}{}\"><div class=\"n\">{}</div><div class=\"l\">{}</div></div>\n",
                     extra_class.empty() ? "" : " ", extra_class, E(number), E(label));
}

}  // namespace poolscope::report
