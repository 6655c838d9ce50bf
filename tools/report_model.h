// File: tools/report_model.h
//
// Loading and validating a poolscope report ("schema": "poolscope.report/1", see
// docs/report-schema.md) for the `poolscope` command, and null-tolerant accessors over it.
//
// LoadReport never throws and never aborts: every problem (missing file, empty or truncated file,
// not JSON, another schema, a required field missing or of the wrong type) becomes one short
// sentence in `*problem`, which the caller prints as `poolscope: FILE: problem`. After a successful
// load, the accessors below may be used on any path: a field that is absent or null reads as
// std::nullopt, so renderers print "n/a" instead of failing on a report that lacks an optional field.
//
// Thread-safety: plain values; no shared state.
#ifndef POOLSCOPE_TOOLS_REPORT_MODEL_H_
#define POOLSCOPE_TOOLS_REPORT_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"

namespace poolscope::tools {

inline constexpr std::string_view kReportSchema = "poolscope.report/1";

// A validated report: the parsed document and the file it came from.
struct Report {
  std::string path;
  nlohmann::json doc;
};

// Reads and validates `path`. Returns false with a one-sentence `*problem` (no file name in it).
bool LoadReport(const std::string& path, Report* report, std::string* problem);

// Validates an already parsed document (the schema check and the required fields).
bool ValidateReport(const nlohmann::json& doc, std::string* problem);

// The value at a dotted path ("reconciliation.detector_view.unfreed_blocks"), or nullptr when a
// step is missing or not an object. Never throws.
const nlohmann::json* Find(const nlohmann::json& doc, std::string_view dotted_path);

// An integer count at `dotted_path`; std::nullopt when absent, null or not a number (a float is
// rounded).
std::optional<int64_t> Count(const nlohmann::json& doc, std::string_view dotted_path);

// A number at `dotted_path` as a double; std::nullopt when absent, null or not a number.
std::optional<double> Number(const nlohmann::json& doc, std::string_view dotted_path);

// A string at `dotted_path`; std::nullopt when absent or not a string.
std::optional<std::string> String(const nlohmann::json& doc, std::string_view dotted_path);

// A boolean at `dotted_path` (JSON true/false, or a number: nonzero is true).
std::optional<bool> Bool(const nlohmann::json& doc, std::string_view dotted_path);

// The process's wall time in seconds from process.start_ns / end_ns, when both are there.
std::optional<double> WallSeconds(const nlohmann::json& doc);

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_REPORT_MODEL_H_
