// File: report/format_util.cc
//
// See format_util.h.
#include "report/format_util.h"

#include <cmath>
#include <cstdlib>

#include "fmt/format.h"

namespace poolscope::report {

std::string Thousands(std::optional<int64_t> value) {
  if (!value) return "n/a";
  std::string digits = std::to_string(*value < 0 ? -(*value + 1) + 1ULL : uint64_t(*value));
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count > 0 && count % 3 == 0) out.push_back(',');
    out.push_back(*it);
    ++count;
  }
  if (*value < 0) out.push_back('-');
  return std::string(out.rbegin(), out.rend());
}

std::string Bytes(std::optional<int64_t> bytes) {
  if (!bytes) return "n/a";
  double value = static_cast<double>(*bytes);
  if (std::fabs(value) < 1024) return fmt::format("{} B", *bytes);
  if (std::fabs(value) < 1024.0 * 1024) return fmt::format("{:.1f} KiB", value / 1024);
  if (std::fabs(value) < 1024.0 * 1024 * 1024) {
    return fmt::format("{:.1f} MiB", value / (1024.0 * 1024));
  }
  return fmt::format("{:.2f} GiB", value / (1024.0 * 1024 * 1024));
}

std::string Seconds(std::optional<double> seconds) {
  if (!seconds) return "n/a";
  return fmt::format("{:.3f} s", *seconds);
}

std::string Percent(std::optional<int64_t> part, std::optional<int64_t> whole) {
  if (!part || !whole || *whole == 0) return "n/a";
  return fmt::format("{:.1f}%", 100.0 * static_cast<double>(*part) / static_cast<double>(*whole));
}

std::string Change(std::optional<int64_t> before, std::optional<int64_t> after) {
  if (!before || !after) return "n/a";
  int64_t delta = *after - *before;
  if (delta == 0) return "0";
  std::string sign = delta > 0 ? "+" : "";
  std::string out = sign + Thousands(delta);
  if (*before > 0) {
    out += fmt::format(" ({}{:.1f}%)", sign,
                       100.0 * static_cast<double>(delta) / static_cast<double>(*before));
  }
  return out;
}

std::string SecondsChange(std::optional<double> before, std::optional<double> after) {
  if (!before || !after) return "n/a";
  double delta = *after - *before;
  std::string sign = delta > 0 ? "+" : "";
  std::string out = sign + Seconds(delta);
  if (*before > 0) out += fmt::format(" ({}{:.1f}%)", sign, 100.0 * delta / *before);
  return out;
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '&': out += "&amp;"; ++i; continue;
      case '<': out += "&lt;"; ++i; continue;
      case '>': out += "&gt;"; ++i; continue;
      case '"': out += "&quot;"; ++i; continue;
      case '\'': out += "&#39;"; ++i; continue;
      default: break;
    }
    if (c < 0x80) {
      out.push_back(c < 0x20 && c != '\n' && c != '\t' ? ' ' : static_cast<char>(c));
      ++i;
      continue;
    }
    // Copy one well-formed UTF-8 sequence, or replace the byte.
    size_t length = (c >= 0xC2 && c <= 0xDF)   ? 2
                    : (c >= 0xE0 && c <= 0xEF) ? 3
                    : (c >= 0xF0 && c <= 0xF4) ? 4
                                               : 0;
    bool ok = length != 0 && i + length <= text.size();
    for (size_t k = 1; ok && k < length; ++k) {
      ok = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    }
    if (ok) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string OneLine(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = ' ';
  }
  return out;
}

}  // namespace poolscope::report
