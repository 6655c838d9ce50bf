// File: tools/runs.h
//
// A run: the program `poolscope run` or `compare` starts, with every preloaded process of its tree.
// Each report of a run names it (`process.run`, which the command hands the library in POOLSCOPE_RUN;
// a report older than that field is known by its `process.root_pid`), and the run's reports go to a
// folder of its own (POOLSCOPE_RUN_DIR): there the library writes every report but the root's, whose
// path the command gives (`-o`); the command then links the root's report into it, so the folder
// holds the whole tree. Reports of different runs are never merged: a folder (or a set of files)
// that holds several runs' reports is refused, with one line that names them.
//
// Thread-safety: functions of their arguments and the file system.
#ifndef POOLSCOPE_TOOLS_RUNS_H_
#define POOLSCOPE_TOOLS_RUNS_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/process_tree.h"

namespace poolscope::tools {

// The run folder of the report template `report` (absolute): the template without its `.json`
// (`out/mk.json` -> `out/mk`), `.d` added to a name without it; a template still, whose %p is the
// root's pid.
std::string RunFolderTemplate(const std::string& report);

// What tells a report's run from others: "run N" for process.run, "root pid N" for a report that
// names only its root, "" for a process preloaded by hand (no run).
std::string RunKey(const nlohmann::json& doc);

// Before a run whose folder is `folder` (no %p in it) and whose reports are named by `name` (a
// template's file name): a CliError naming `flag` when `folder` exists and is no directory; else the
// reports an earlier run left there under those names are removed.
void PrepareRunFolder(const std::string& folder, const std::string& name, const std::string& flag);

// The root's report, linked into the run's folder under its own name (copied when the file system
// will not link), so that the folder holds the whole tree. False when neither could be done.
bool LinkIntoRunFolder(const std::string& root_report, const std::string& folder);

// A CliError when `tree` holds the reports of more than one run: "WHERE: the reports of N runs,
// which are never merged: EXE (root pid P, started HH:MM:SS), ...".
void RefuseMixedRuns(const ProcessTree& tree, const std::string& where);

// The folders directly inside `folder` that hold reports (a compare's `off` and `on`), sorted.
std::vector<std::string> RunFoldersIn(const std::string& folder);

// For a report that is the root of a run (process.root_pid is its pid): the folder that holds its
// descendants' reports (`FILE.PID` beside it or in its run folder), else "".
std::string TreeFolderOf(const std::string& file, const nlohmann::json& doc);

// Removes `dir`, a temporary folder of poolscope's, with everything in it.
void RemoveTemporaryFolder(const std::string& dir);

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_RUNS_H_
