// File: report/ledger_table.h
//
// The side-by-side ledger of `poolscope compare` and `poolscope diff`: two reports (normally the
// same program with pooling off, then on) as rows of figures with a "change" column, followed by a
// verdict sentence. The figures come from the reports; wall time and peak RSS come from the run
// (wait4's rusage) when `compare` ran the program, else from the report's process times.
//
// Thread-safety: pure functions.
#ifndef POOLSCOPE_REPORT_LEDGER_TABLE_H_
#define POOLSCOPE_REPORT_LEDGER_TABLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"

namespace poolscope::report {

// What the command measured about one run, beyond the report.
struct RunFacts {
  std::optional<double> wall_seconds;
  std::optional<int64_t> peak_rss_kib;
};

// One row of the table as printed: its label (two leading spaces mark a part of the row above:
// "  of which outside pools"), the two runs' figures and the change.
struct LedgerRow {
  std::string label;
  std::string before;
  std::string after;
  std::string change;
};

// The rows of the table, in order (the list in ledger_table.cc's header).
std::vector<LedgerRow> LedgerRows(const nlohmann::json& before, const RunFacts& before_facts,
                                  const nlohmann::json& after, const RunFacts& after_facts);

// The table and the verdict, ending with a newline. `before_label` and `after_label` head the two
// figure columns ("pooling off", "pooling on" for compare; the file names' roles for diff).
std::string LedgerTable(const nlohmann::json& before, const RunFacts& before_facts,
                        const nlohmann::json& after, const RunFacts& after_facts,
                        const std::string& before_label, const std::string& after_label);

// The verdict: `after`'s reconciliation.detector_view.verdict when present, else one derived from
// the detector view of both reports.
std::string Verdict(const nlohmann::json& before, const nlohmann::json& after);

// The program's own unfreed blocks (detector_view.program_leak_blocks), else std::nullopt.
std::optional<int64_t> ProgramLeakBlocks(const nlohmann::json& report);

// The blocks of one reachability class ("definitely_lost", "indirectly_lost", "possibly_lost",
// "still_reachable") in the reachability object at `object_path` ("reachability" for the
// program's live logical blocks, "reconciliation.detector_view.reachability" for what a detector
// below poolscope sees); std::nullopt when the object is absent, says `scanned: false`, or lacks
// the class.
std::optional<int64_t> ReachabilityBlocks(const nlohmann::json& report,
                                          std::string_view object_path, std::string_view kind);

// The same in bytes.
std::optional<int64_t> ReachabilityBytes(const nlohmann::json& report,
                                         std::string_view object_path, std::string_view kind);

// The program's lost blocks: definitely plus indirectly lost in `reachability`, a figure pooling
// does not change; std::nullopt when the report has no scan.
std::optional<int64_t> LostBlocks(const nlohmann::json& report);

// What a leak detector below poolscope reports as lost (definitely plus indirectly), from
// reconciliation.detector_view.reachability; std::nullopt when the report has none.
std::optional<int64_t> DetectorLostBlocks(const nlohmann::json& report);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_LEDGER_TABLE_H_
