// File: tools/run_command.cc
//
// `poolscope run`: runs a command with the preload library, then says where the report (or the
// process tree's reports) went and what it says.
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "report/find_report.h"
#include "report/format_util.h"
#include "report/report_model.h"
#include "report/report_path.h"
#include "tools/child_runner.h"
#include "tools/cli_common.h"
#include "tools/commands.h"
#include "tools/process_tree.h"
#include "tools/runs.h"
#include "tools/subcommands.h"
#include "tools/tree_reports.h"

namespace poolscope::tools {

using report::LoadReport;
using report::OneLine;
using report::Report;

namespace {

constexpr char kRunUsage[] = R"(usage: poolscope run [--pool=on|off] [--options=K=V:...] [-o REPORT] [--lib=PATH] [--process=GLOB] [--no-children] -- CMD [ARGS...]

Runs CMD (through execvp, never a shell) with libpoolscope.so preloaded, then prints a short
summary of its report on stderr; CMD's own stdout and stderr are untouched. Every preloaded
descendant of CMD (through fork and exec) writes its own report (REPORT.PID) into the run's folder,
REPORT without its .json (-o out/mk.json: out/mk/), where the root's report is linked too, so the
folder holds the run's whole tree and nothing else; when there are any, the summary gives totals
over the tree and a table of its processes. A single process leaves REPORT alone, no folder.

flags:
  --pool=on|off       pooling on (default) or off (pool=1 / pool=0)
  --options=K=V:...   more POOLSCOPE_OPTIONS, appended (e.g. --options=pool_size=128:pools=8)
  -o, --output=PATH   the report file (default: report.json in a new temporary directory, which is
                      then the run's folder, named in the summary and kept); its folder is made
                      when missing; a report= key in --options does the same
  --lib=PATH          libpoolscope.so to preload (default: $POOLSCOPE_LIB, then next to poolscope,
                      then ../interpose/ beside it, then the Bazel runfiles tree)
  --process=GLOB      only the processes whose executable (path or base name) matches GLOB, in
                      the totals and the table (repeatable)
  --no-children       only the process poolscope started
  -h, --help          this text

environment given to CMD: LD_PRELOAD=<lib> before any existing entries, POOLSCOPE_OPTIONS
(any existing value first, then pool=, --options, report=), POOLSCOPE_ROOT_PID=<CMD's pid>,
POOLSCOPE_RUN=<CMD's pid>-<start time in ns> (every report's process.run) and
POOLSCOPE_RUN_DIR=<the run's folder>.

exit status: CMD's exit status, 128+N when a signal N ended it; 127 when CMD was not found, 126
when it could not be executed; 2 for bad usage.
)";

}  // namespace

int RunCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagParser flags(args, 2, "poolscope run");
  std::string pool = "on", options, output, lib;
  std::vector<std::string> globs;
  bool no_children = false;
  while (!flags.Done()) {
    if (flags.AtDoubleDash()) {
      flags.Next();
      break;
    }
    if (!flags.AtFlag()) break;
    if (IsHelp(flags.Current())) {
      out << kRunUsage;
      return kExitOk;
    }
    if (flags.Value({"--pool"}, &pool) || flags.Value({"--options"}, &options) ||
        flags.Value({"-o", "--output"}, &output) || flags.Value({"--lib"}, &lib)) {
      continue;
    }
    if (ProcessFlags(flags, &globs, &no_children)) continue;
    flags.Unknown();
  }
  if (pool != "on" && pool != "off") {
    throw CliError{"--pool", fmt::format("expected on or off, got '{}'", OneLine(pool))};
  }
  std::vector<std::string> command(args.begin() + static_cast<long>(flags.Index()), args.end());
  if (command.empty()) throw CliError{"run", "missing CMD (usage: poolscope run [FLAGS] -- CMD [ARGS...])"};
  std::string report_from_options;
  std::string extra = CheckOptions(options, &report_from_options, {"pool"});
  std::string library = FindLibrary(lib, args[0]);
  std::string report = !output.empty() ? output : report_from_options;
  bool temporary = report.empty();
  if (temporary) report = MakeTempDirectory("poolscope") + "/report.json";
  if (report != "none") report = AbsolutePath(report);
  const std::string flag = output.empty() ? "report=" : "-o";
  const std::string folder = report.substr(0, report.rfind('/'));
  const std::string name = report.substr(report.rfind('/') + 1);
  // The run's folder, where the library writes the reports of the root's descendants (runs.h): the
  // temporary folder itself, else one named by the report (`out/mk.json`: `out/mk`).
  ChildSpec spec;
  spec.argv = command;
  spec.preload = library;
  spec.run = report != "none";
  spec.run_folder = temporary ? folder : RunFolderTemplate(report);
  spec.run_exe = ProgramName(command[0]);
  spec.run_start = std::to_string(time(nullptr));
  if (report != "none") {
    // The report's folder before the program runs: a run is not lost to a report that cannot be written.
    EnsureWritableDirectory(folder, flag);
    RemoveTreeReports(report);
    if (spec.run_folder.find("%p") == std::string::npos) {
      char expanded[PATH_MAX];
      report::ReportPathValues values;
      values.exe = spec.run_exe.c_str();
      values.start = spec.run_start.c_str();
      if (report::ExpandReportPath(spec.run_folder.c_str(), values, expanded, sizeof expanded).length <
          sizeof expanded) {
        PrepareRunFolder(expanded, name, flag);
      }
    }
  }

  // A program the preload cannot reach still runs (its status is run's), but leaves no report.
  const std::string obstacle = PreloadObstacle(command[0]);
  if (!obstacle.empty()) {
    err << fmt::format("poolscope: {}: {}, so LD_PRELOAD cannot load poolscope into it: it runs as "
                       "usual and no report is written\n",
                       OneLine(command[0]), obstacle);
  }
  Flush(out, err);
  spec.options = BuildOptions(pool == "on", extra, report);
  ChildResult child = RunChild(spec);
  std::vector<KnownProcess> running;
  if (child.started && report != "none") {
    running = StillRunning(child.pid);
    for (KnownProcess& p : StartMarkers(child.run_dir, child.pid)) running.push_back(std::move(p));
  }
  if (!child.started) {
    err << fmt::format("poolscope: {}: {}\n", OneLine(command[0]), child.problem);
    return child.exec_errno == ENOENT ? 127 : child.exec_errno != 0 ? 126 : kExitUsage;
  }
  if (!obstacle.empty()) {
    err << fmt::format("poolscope: exit {}; no report\n", child.exit_status);
    return child.exit_status;
  }
  std::string status = child.signal != 0
                           ? fmt::format("killed by signal {} ({})", child.signal,
                                         OneLine(strsignal(child.signal)))
                           : fmt::format("exit {}", child.exit_status);
  if (report == "none") {
    err << fmt::format("poolscope: {}; no report (report=none)\n", status);
    return child.exit_status;
  }
  std::vector<std::string> files = TemplateFiles(report);
  const std::string& run_folder = child.run_dir;
  if (run_folder != folder) {
    for (std::string& file : TemplateFiles(run_folder + "/" + name)) files.push_back(std::move(file));
  }
  ProcessTree tree = BuildTree(files, child.pid, HowItEnded(child), running, child.run);
  if (run_folder != folder) {
    // The whole tree in the run's folder, the root's report included; none for a single process.
    if (IsTree(tree)) {
      for (const TreeProcess& p : tree.processes) {
        if (p.is_root && !p.path.empty() && p.path.rfind(run_folder + "/", 0) != 0 &&
            !LinkIntoRunFolder(p.path, run_folder)) {
          err << fmt::format("poolscope: warning: {}: the root's report could not be linked into {}\n",
                             OneLine(p.path), OneLine(run_folder));
        }
      }
    } else {
      rmdir(run_folder.c_str());
    }
  }
  if (IsTree(tree) || !globs.empty() || no_children) {
    size_t reports = 0;
    std::string details = IsTree(tree) ? run_folder : report;
    for (const TreeProcess& p : tree.processes) {
      reports += p.doc.is_null() ? 0 : 1;
      if (!IsTree(tree) && p.is_root && !p.path.empty()) details = p.path;
    }
    err << fmt::format("poolscope: {}; {} report{} of the process tree in {}{}\n", status, reports,
                       reports == 1 ? "" : "s", OneLine(IsTree(tree) ? run_folder : folder),
                       temporary ? " (temporary)" : "");
    std::vector<size_t> selected = Selection(tree, globs, no_children);
    PrintWarnings(tree, err);
    nlohmann::json totals = TreeTotals(tree, selected);
    if (totals.contains("logical")) err << RunSummary(totals);
    std::string table = ProcessTable(tree, selected, kProcessesShown);
    for (size_t at = 0; at < table.size();) {
      size_t end = table.find('\n', at);
      err << "poolscope: " << table.substr(at, end - at) << "\n";
      at = end == std::string::npos ? table.size() : end + 1;
    }
    err << fmt::format("poolscope: details: poolscope report {}\n", ShellQuote(details));
    return child.exit_status;
  }
  std::string written = report::FindReport(report, child.pid);
  if (written.empty()) written = report;
  err << fmt::format("poolscope: {}; report {}{}\n", status, OneLine(written),
                     temporary ? " (temporary)" : "");
  absl::StatusOr<Report> loaded = LoadReport(written);
  if (!loaded.ok()) {
    err << fmt::format("poolscope: {}: {}\n", OneLine(written),
                       std::string(loaded.status().message()));
    return child.exit_status;
  }
  err << RunSummary(loaded->doc);
  err << fmt::format("poolscope: details: poolscope report {}\n", ShellQuote(written));
  return child.exit_status;
}

}  // namespace poolscope::tools
