// File: report/check_util.h
//
// What the schema check and the identities share to read a report's numbers and name its fields in
// the lines they print.
//
// Thread-safety: pure functions.
#ifndef POOLSCOPE_REPORT_CHECK_UTIL_H_
#define POOLSCOPE_REPORT_CHECK_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace poolscope::report::check {

inline bool IsInt(const nlohmann::json* node) { return node != nullptr && node->is_number_integer(); }

inline int64_t IntOf(const nlohmann::json& node) {
  return node.is_number_unsigned() ? static_cast<int64_t>(node.get<uint64_t>())
                                   : node.get<int64_t>();
}

inline std::string Text(const nlohmann::json& node) {
  return node.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline std::string Path(std::string_view parent, std::string_view field) {
  return parent.empty() ? std::string(field) : fmt::format("{}.{}", parent, field);
}

}  // namespace poolscope::report::check

#endif  // POOLSCOPE_REPORT_CHECK_UTIL_H_
