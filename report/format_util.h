// File: report/format_util.h
//
// Small formatting helpers shared by the renderers of the `poolscope` command: counts with
// thousands separators, byte sizes, durations, signed changes and percentages, and escaping for
// HTML. Every function takes std::optional so that an unknown figure prints as "n/a".
//
// Thread-safety: pure functions.
#ifndef POOLSCOPE_REPORT_FORMAT_UTIL_H_
#define POOLSCOPE_REPORT_FORMAT_UTIL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace poolscope::report {

// "1,234,567"; "n/a" for std::nullopt.
std::string Thousands(std::optional<int64_t> value);

// "512 B", "4.0 KiB", "1.5 MiB".
std::string Bytes(std::optional<int64_t> bytes);

// "0.123 s" (always seconds, so that a column of them lines up).
std::string Seconds(std::optional<double> seconds);

// "12.3%" of part in whole; "n/a" when whole is zero or unknown.
std::string Percent(std::optional<int64_t> part, std::optional<int64_t> whole);

// The change from `before` to `after`: "+1,200 (+12.0%)", "-38,000 (-97.4%)", "0", "n/a".
std::string Change(std::optional<int64_t> before, std::optional<int64_t> after);

// The change of a duration: "-0.120 s (-30.0%)".
std::string SecondsChange(std::optional<double> before, std::optional<double> after);

// Escapes &, <, >, " and ' for HTML text and attribute values; invalid UTF-8 bytes become U+FFFD.
std::string HtmlEscape(std::string_view text);

// Replaces control characters (newlines, tabs, escapes) with spaces, so that a string from a report
// cannot break a line-oriented output or drive a terminal.
std::string OneLine(std::string_view text);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_FORMAT_UTIL_H_
