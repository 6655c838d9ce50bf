// File: tools/ledger_table.h
//
// The side-by-side ledger of `poolscope compare` and `poolscope diff`: two reports (normally the
// same program with pooling off, then on) as rows of figures with a "change" column, followed by a
// verdict sentence. The figures come from the reports; wall time and peak RSS come from the run
// (wait4's rusage) when `compare` ran the program, else from the report's process times.
//
// Thread-safety: pure functions.
#ifndef POOLSCOPE_TOOLS_LEDGER_TABLE_H_
#define POOLSCOPE_TOOLS_LEDGER_TABLE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "nlohmann/json.hpp"

namespace poolscope::tools {

// What the command measured about one run, beyond the report.
struct RunFacts {
  std::optional<double> wall_seconds;
  std::optional<int64_t> peak_rss_kib;
};

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

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_LEDGER_TABLE_H_
