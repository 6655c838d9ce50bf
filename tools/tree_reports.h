// File: tools/tree_reports.h
//
// The reports of a process tree as the subcommands find and show them: the report files a `report=`
// template produced, the processes still running or that left only a start marker, the tree read
// from folders given on the command line, the warnings for unreadable or broken reports, the
// processes --process and --no-children select, and the short summary `run` prints.
//
// Thread-safety: functions of their arguments, the file system and /proc.
#ifndef POOLSCOPE_TOOLS_TREE_REPORTS_H_
#define POOLSCOPE_TOOLS_TREE_REPORTS_H_

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/child_runner.h"
#include "tools/process_tree.h"

namespace poolscope::tools {

// How many processes the per-process tables show before one line for the rest.
inline constexpr size_t kProcessesShown = 10;

// The processes still running whose environment names `root_pid` as POOLSCOPE_ROOT_PID: the root's
// descendants that outlived it (their reports, if any, come after poolscope has read the folder).
std::vector<KnownProcess> StillRunning(int64_t root_pid);

// The files a report= template can have produced, the root's and its descendants' (`.PID`
// appended when the template has no %p): the entries of its folder that match it, with %p, %e and
// %t as wildcards.
std::vector<std::string> TemplateFiles(const std::string& report_template);

// The processes of the tree of `root_pid` that left a start marker in `folder`, the run's folder
// (the library's ".poolscope-started.ROOT.PID", holding "PARENT EXE"); every such marker is removed.
// A process among them that wrote no report ended without one.
std::vector<KnownProcess> StartMarkers(const std::string& folder, int64_t root_pid);

// Removes what an earlier run left at `report` and `report`.PID, for a path without `%`: a template
// with `%p`, `%e` or `%t` names each run's files apart (and a run reads only its own tree's).
void RemoveTreeReports(const std::string& report);

// The files that could not be read, then each report whose identities do not hold (checked per
// report, as `poolscope check` does), its first broken identity named.
void PrintWarnings(const ProcessTree& tree, std::ostream& err);

// Why the root has no report: "no report", with the signal that killed it.
std::string HowItEnded(const ChildResult& child);

// A tree is shown as one when it holds anything but its root's report.
bool IsTree(const ProcessTree& tree);

// The processes `globs` and `root_only` select; a CliError when none is.
std::vector<size_t> Selection(const ProcessTree& tree, const std::vector<std::string>& globs,
                              bool root_only);

// The lines `run` prints after the program: both ledgers, pool hits, the detector view, the verdict.
std::string RunSummary(const nlohmann::json& doc);

// The tree of the reports that `operands` (folders of reports and report files) name, all of one run
// (runs.h: a CliError naming the runs otherwise). Nothing readable: a CliError naming the first file
// and its problem; a folder without reports whose folders hold some (a compare's `off` and `on`): a
// CliError naming them. Some readable: the others are named in warnings on `err`.
ProcessTree LoadTreeOperands(const std::vector<std::string>& operands, std::ostream& err);

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_TREE_REPORTS_H_
