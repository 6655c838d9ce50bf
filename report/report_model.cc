// File: report/report_model.cc
//
// Reading a report file into nlohmann::json without letting an exception escape, and turning each
// way a file can be wrong into one sentence. See report_model.h.
#include "report/report_model.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "fmt/format.h"

namespace poolscope::report {
namespace {

using nlohmann::json;

// Required numeric fields: a report without them is not one `compare`, `diff` or `report` can
// describe. Each may be null (unknown), but must be present.
constexpr std::string_view kRequiredCounts[] = {
    "logical.allocs",
    "logical.frees",
    "real.allocs",
    "real.frees",
};

// Required objects.
constexpr std::string_view kRequiredObjects[] = {
    "process", "logical", "real", "pool", "reconciliation",
};

const char* TypeName(const json& value) { return value.type_name(); }

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::NotFoundError("no such file");
    return absl::Status(absl::ErrnoToStatusCode(errno), std::strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError("is a directory, not a report file");
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return absl::NotFoundError("no such file");
    if (errno != 0) return absl::Status(absl::ErrnoToStatusCode(errno), std::strerror(errno));
    return absl::UnknownError("cannot open");
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError("read error");
  return std::move(buffer).str();
}

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

}  // namespace

const json* Find(const json& doc, std::string_view dotted_path) {
  const json* node = &doc;
  while (!dotted_path.empty()) {
    size_t dot = dotted_path.find('.');
    std::string_view key = dotted_path.substr(0, dot);
    if (!node->is_object()) return nullptr;
    auto it = node->find(key);
    if (it == node->end()) return nullptr;
    node = &*it;
    dotted_path = dot == std::string_view::npos ? std::string_view() : dotted_path.substr(dot + 1);
  }
  return node;
}

std::optional<int64_t> Count(const json& doc, std::string_view dotted_path) {
  const json* node = Find(doc, dotted_path);
  if (node == nullptr) return std::nullopt;
  if (node->is_number_integer()) return node->get<int64_t>();
  if (node->is_number_unsigned()) return static_cast<int64_t>(node->get<uint64_t>());
  if (node->is_number_float()) {
    double value = node->get<double>();
    if (!std::isfinite(value)) return std::nullopt;
    return static_cast<int64_t>(std::llround(value));
  }
  return std::nullopt;
}

std::optional<double> Number(const json& doc, std::string_view dotted_path) {
  const json* node = Find(doc, dotted_path);
  if (node == nullptr || !node->is_number()) return std::nullopt;
  return node->get<double>();
}

std::optional<std::string> String(const json& doc, std::string_view dotted_path) {
  const json* node = Find(doc, dotted_path);
  if (node == nullptr || !node->is_string()) return std::nullopt;
  return node->get<std::string>();
}

std::optional<bool> Bool(const json& doc, std::string_view dotted_path) {
  const json* node = Find(doc, dotted_path);
  if (node == nullptr) return std::nullopt;
  if (node->is_boolean()) return node->get<bool>();
  if (node->is_number()) return node->get<double>() != 0;
  return std::nullopt;
}

std::optional<double> WallSeconds(const json& doc) {
  // Nanoseconds since the epoch do not fit a double exactly: subtract as integers first.
  std::optional<int64_t> start = Count(doc, "process.start_ns");
  std::optional<int64_t> end = Count(doc, "process.end_ns");
  if (!start || !end || *end < *start) return std::nullopt;
  return static_cast<double>(*end - *start) / 1e9;
}

absl::Status CheckSchemaName(const json& doc) {
  if (!doc.is_object()) {
    return Invalid(
        fmt::format("not a poolscope report (the JSON is {}, not an object)", TypeName(doc)));
  }
  auto schema = doc.find("schema");
  if (schema == doc.end()) {
    return Invalid(fmt::format("not a poolscope report (no \"schema\" field; expected \"{}\")",
                               kReportSchema));
  }
  if (!schema->is_string() || schema->get<std::string>() != kReportSchema) {
    return Invalid(fmt::format("unsupported schema {} (this poolscope reads \"{}\")",
                               schema->dump(-1, ' ', false, json::error_handler_t::replace),
                               kReportSchema));
  }
  return absl::OkStatus();
}

absl::Status ValidateReport(const json& doc) {
  if (absl::Status named = CheckSchemaName(doc); !named.ok()) return named;
  for (std::string_view path : kRequiredObjects) {
    const json* node = Find(doc, path);
    if (node == nullptr)
      return Invalid(fmt::format("invalid report: field \"{}\" is missing", path));
    if (!node->is_object()) {
      return Invalid(fmt::format("invalid report: field \"{}\" is {}, expected an object", path,
                                 TypeName(*node)));
    }
  }
  for (std::string_view path : kRequiredCounts) {
    const json* node = Find(doc, path);
    if (node == nullptr)
      return Invalid(fmt::format("invalid report: field \"{}\" is missing", path));
    if (!node->is_number() && !node->is_null()) {
      return Invalid(fmt::format("invalid report: field \"{}\" is {}, expected a number", path,
                                 TypeName(*node)));
    }
  }
  // Lists the renderers walk: when present they must be arrays.
  for (std::string_view path : {"leaks", "sites", "threads", "sizes.buckets", "errors.cases"}) {
    const json* node = Find(doc, path);
    if (node != nullptr && !node->is_array() && !node->is_null()) {
      return Invalid(fmt::format("invalid report: field \"{}\" is {}, expected an array", path,
                                 TypeName(*node)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<json> ParseReportFile(const std::string& path) {
  absl::StatusOr<std::string> contents = ReadWholeFile(path);
  if (!contents.ok()) return contents.status();
  if (contents->find_first_not_of(" \t\r\n") == std::string::npos) {
    return Invalid("empty file (the program wrote no report, or it is still being written)");
  }
  try {
    return json::parse(*contents);
  } catch (const json::parse_error& error) {
    // nlohmann reports the byte where parsing stopped; at the end of the input the file was cut.
    if (error.byte >= contents->size()) {
      return Invalid(
          fmt::format("truncated JSON (the document ends early, at byte {})", contents->size()));
    }
    return Invalid(fmt::format("not JSON (syntax error at byte {})", error.byte));
  } catch (const std::exception& error) {
    return Invalid(fmt::format("not JSON ({})", error.what()));
  }
}

absl::StatusOr<Report> LoadReport(const std::string& path) {
  absl::StatusOr<json> doc = ParseReportFile(path);
  if (!doc.ok()) return doc.status();
  if (absl::Status valid = ValidateReport(*doc); !valid.ok()) return valid;
  return Report{path, *std::move(doc)};
}

}  // namespace poolscope::report
