// File: report/identities.h
//
// The identities a poolscope report satisfies, in one place: the fields every report carries
// (schema 1, docs/report-schema.md) and the relations between its figures (the ledger balances,
// the reconciliation, the detector view, the pool counts, the size buckets, the per-thread
// figures against the totals, leak_check); docs/cli.md lists them all. `poolscope check` prints
// what these functions find; the tests check every report they produce through it.
//
// Each broken identity becomes one line that names its fields and their values, for example
//   logical.allocs - logical.frees = 1000 - 990 = 10 != logical.live_blocks = 11
// Identities over fields a report may omit (additive fields, per-thread figures) are evaluated
// only when the fields are there. A report whose counters were read while other threads were
// counting (process.counters_exact false) is checked only for the identities that hold within one
// reading; the ones that compare the two ledgers are left out.
//
// Thread-safety: pure functions over a parsed document; they never throw on any document.
#ifndef POOLSCOPE_REPORT_IDENTITIES_H_
#define POOLSCOPE_REPORT_IDENTITIES_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace poolscope::report {

// What checking one report found.
struct CheckResult {
  int held = 0;                     // identities evaluated that hold
  std::vector<std::string> broken;  // one line per broken identity or schema problem
  bool ok() const { return broken.empty(); }
};

// Every identity that applies to `doc`, which SchemaProblems (schema_check.h) accepted.
CheckResult CheckIdentities(const nlohmann::json& doc);

// SchemaProblems (schema_check.h), then, when there are none, CheckIdentities.
CheckResult CheckReport(const nlohmann::json& doc);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_IDENTITIES_H_
