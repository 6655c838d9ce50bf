// File: report/schema_check.h
//
// The fields every poolscope report carries (schema 1, docs/report-schema.md), with their types:
// the part of `poolscope check` that runs before the identities (identities.h), which read them.
//
// Thread-safety: pure function over a parsed document; never throws on any document.
#ifndef POOLSCOPE_REPORT_SCHEMA_CHECK_H_
#define POOLSCOPE_REPORT_SCHEMA_CHECK_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace poolscope::report {

// One line per problem ("process.pid is missing", "logical.allocs must be an integer, got 1000.0").
// Empty for a complete report. `doc` must already be a poolscope report (CheckSchemaName in
// report_model.h).
std::vector<std::string> SchemaProblems(const nlohmann::json& doc);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_SCHEMA_CHECK_H_
