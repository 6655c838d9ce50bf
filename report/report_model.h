// File: report/report_model.h
//
// Reading a poolscope report ("schema": "poolscope.report/1", see docs/report-schema.md) into a
// parsed document, and null-tolerant accessors over it. The `poolscope` command and the identity
// checks (report/identities.h) read reports through this file only.
//
// Nothing here throws or aborts: every problem (missing file, empty or truncated file, not JSON,
// another schema, a required field missing or of the wrong type) is an error status whose message
// is one short sentence without the file name, which the caller prints as
// `poolscope: FILE: problem`. After a successful load the accessors below may be used on any path:
// a field that is absent or null reads as std::nullopt, so renderers print "n/a" instead of
// failing on a report that lacks an optional field.
//
// Thread-safety: plain values; no shared state.
#ifndef POOLSCOPE_REPORT_REPORT_MODEL_H_
#define POOLSCOPE_REPORT_REPORT_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace poolscope::report {

inline constexpr std::string_view kReportSchema = "poolscope.report/1";

// A validated report: the parsed document and the file it came from.
struct Report {
  std::string path;
  nlohmann::json doc;
};

// Reads `path` and parses it as JSON, whatever the document is. Errors: NotFound (no such file),
// InvalidArgument (a directory, empty, truncated, not JSON), or the reason a read failed.
absl::StatusOr<nlohmann::json> ParseReportFile(const std::string& path);

// The document is a poolscope report: a JSON object whose "schema" is kReportSchema.
absl::Status CheckSchemaName(const nlohmann::json& doc);

// Validates an already parsed document: CheckSchemaName and the fields every subcommand needs.
absl::Status ValidateReport(const nlohmann::json& doc);

// ParseReportFile, then ValidateReport.
absl::StatusOr<Report> LoadReport(const std::string& path);

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

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_REPORT_MODEL_H_
