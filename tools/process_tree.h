// File: tools/process_tree.h
//
// The reports of one process tree: the process `poolscope run`/`compare` started (the root) and every
// preloaded descendant, through fork and exec, each of which writes its own report. The tree is
// built from the reports' `process.pid` and `process.parent_pid` (else `process.ppid`); a process
// named as a parent that wrote no report, and a process still running when the root ended, appear
// as entries without a report and with the reason. Processes of two runs (pooling off and on) are
// matched by their place in the tree: the executables' base names along the path from the root,
// with, at each step, the rank among siblings of the same name by start time. Never by pid.
//
// Thread-safety: pure functions over values.
#ifndef POOLSCOPE_TOOLS_PROCESS_TREE_H_
#define POOLSCOPE_TOOLS_PROCESS_TREE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "report/html_report.h"

namespace poolscope::tools {

struct TreeProcess {
  int64_t pid = 0;
  int64_t parent = 0;       // the parent's pid, 0 when none is in the tree
  std::string exe;          // process.exe, or what is known of it
  std::string path;         // the report file; empty when there is none
  nlohmann::json doc;       // the report; null when there is none
  std::string missing;      // why there is no report ("no report", "still running ..."), else ""
  std::string place;        // the place in the tree (see above)
  std::vector<size_t> children;
  bool is_root = false;
};

struct ProcessTree {
  std::vector<TreeProcess> processes;  // the root (when known) first, then by start time
  std::vector<std::string> warnings;   // "FILE: problem" for each file that could not be read
};

// A process known from outside the reports (still running when the root ended).
struct KnownProcess {
  int64_t pid = 0;
  int64_t parent = 0;
  std::string exe;
  std::string why;  // "still running when the root ended"
};

// The report files of a folder: regular files named *.json or *.json.PID (not the .tmp.PID files a
// report is written through). Sorted by name.
std::vector<std::string> ReportFilesIn(const std::string& folder);

// Reads `files` (unreadable or foreign ones go to `warnings`) and builds the tree. With
// `root_pid` > 0 only reports whose process.root_pid is that pid, or whose pid is, are kept, and the
// root is that pid (an entry without a report, `root_missing`, when it wrote none); with `run`, only
// those whose process.run is `run` (or that have none).
ProcessTree BuildTree(const std::vector<std::string>& files, int64_t root_pid,
                      const std::string& root_missing, const std::vector<KnownProcess>& known,
                      const std::string& run = "");

// The entries that `globs` (fnmatch patterns, matched against the executable's path and its base
// name; all entries when empty) select, and only the root with `root_only`. Indices into
// tree.processes.
std::vector<size_t> SelectProcesses(const ProcessTree& tree, const std::vector<std::string>& globs,
                                    bool root_only);

// One report whose figures are the sums of the selected reports' counts (logical, real, internal,
// pool, reconciliation, reachability, leak_check, errors); lists and figures that do not add up
// (threads, leaks, sites, verdicts) are left out, and `process` is the root's (else the first's).
// Peak RSS, which does not add up, goes to `tree` (when every report has process.max_rss_kib):
// `processes`, the largest process's `largest_exe`, `largest_max_rss_kib` and
// `largest_peak_resident_bytes` (poolscope's own memory in it), and `sum_max_rss_kib`.
// With one selected report, that report itself.
nlohmann::json TreeTotals(const ProcessTree& tree, const std::vector<size_t>& selected);

// The per-process table of one tree: pid, parent, executable, logical and real allocations, pool
// hits, logical blocks live at exit, lost blocks (definitely + indirectly), ordered by logical
// allocations, the first `limit` and one line for the rest, then one line per entry without a report.
std::string ProcessTable(const ProcessTree& tree, const std::vector<size_t>& selected, size_t limit);
// Its cells, for an HTML page; TextOf renders cells as the text tables above.
report::CellTable ProcessTableCells(const ProcessTree& tree, const std::vector<size_t>& selected, size_t limit);
std::string TextOf(const report::CellTable& table);

// The same for two trees, A and B, matched by place: pid and parent of B (else A), executable,
// logical and real allocations of both, pool hits, live and lost blocks of B.
std::string ProcessTableOfTwo(const ProcessTree& a, const std::vector<size_t>& selected_a,
                              const ProcessTree& b, const std::vector<size_t>& selected_b,
                              const std::string& label_a, const std::string& label_b, size_t limit);
report::CellTable ProcessTableOfTwoCells(const ProcessTree& a, const std::vector<size_t>& selected_a,
                                         const ProcessTree& b, const std::vector<size_t>& selected_b,
                                         const std::string& label_a, const std::string& label_b, size_t limit);

// The selected entries that have a report, by logical allocations (most first, then pid).
std::vector<size_t> ByLogicalAllocations(const ProcessTree& tree, const std::vector<size_t>& selected);

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_PROCESS_TREE_H_
