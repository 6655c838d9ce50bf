// File: tools/compare_commands.cc
//
// `poolscope compare` (runs a command twice, pooling off then on, and prints the two ledgers side by
// side) and `poolscope diff` (the same table from two saved reports or folders of reports).
#include <cerrno>
#include <cstdlib>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "report/format_util.h"
#include "report/site_pinning.h"
#include "report/text_report.h"
#include "report/html_report.h"
#include "report/leak_diff.h"
#include "report/ledger_table.h"
#include "report/report_model.h"
#include "tools/child_runner.h"
#include "tools/cli_common.h"
#include "tools/commands.h"
#include "tools/locate.h"
#include "tools/process_tree.h"
#include "tools/runs.h"
#include "tools/subcommands.h"
#include "tools/tree_reports.h"

namespace poolscope::tools {

using report::Bool;
using report::Count;
using report::ExecutableMismatch;
using report::HtmlComparePage;
using report::LeakDiffSection;
using report::LedgerTable;
using report::LoadReport;
using report::LostBlocks;
using report::OneLine;
using report::Report;
using report::RunFacts;
using report::Thousands;

namespace {

// Lines after compare's table that change what a reader should do or read: what its "detector view"
// rows are, and, for a python whose own allocator serves its small objects, that most of its
// allocations never reached malloc.
std::string CompareHints(const nlohmann::json& on) {
  std::string out =
      "hint: the \"detector view\" rows are what memcheck (lost blocks) and a malloc/free-counting leak "
      "detector (unfreed blocks) report when run below poolscope\n";
  const std::string exe = report::String(on, "process.exe").value_or("");
  const std::string base = exe.substr(exe.rfind('/') + 1);
  const char* pythonmalloc = getenv("PYTHONMALLOC");
  const std::string mode = pythonmalloc != nullptr ? pythonmalloc : "";
  if (base.rfind("python", 0) == 0 && mode != "malloc" && mode != "malloc_debug") {
    out += fmt::format(
        "hint: {} serves its small objects from its own allocator (pymalloc): {} of its allocations "
        "reached malloc; PYTHONMALLOC=malloc sends every one through it\n",
        base, Thousands(Count(on, "logical.allocs")));
  }
  return out;
}

// With pooling on, where pooling serves the program badly and where well: the site whose live blocks
// pin most pools at exit or at the peak of real live bytes (the peak's figure beside the exit's where
// they differ), and the site it saves most calls at (report::PinningSites).
std::string PinningLines(const nlohmann::json& on) {
  const report::SitePinning p = report::PinningSites(on, 1);
  std::string out;
  if (!p.pinning.empty()) {
    const report::SiteRow& row = p.pinning[0];
    const std::string at_exit = fmt::format("{} pool{}, {}", Thousands(row.pools_pinned), row.pools_pinned == 1 ? "" : "s",
                                            report::Bytes(row.pinned_bytes));
    if (report::PeakDiffers(row)) {
      out += fmt::format("pools pinned at exit or at the peak, most by: {} ({} at exit; {}, {} at the peak; "
                         "`poolscope report` lists the rest)\n",
                         report::SiteLine(row), at_exit, Thousands(row.peak_pools_pinned),
                         report::Bytes(row.peak_pinned_bytes));
    } else {
      out += fmt::format("pools pinned at exit, most by: {} ({}; `poolscope report` lists the rest)\n",
                         report::SiteLine(row), at_exit);
    }
  }
  if (p.saver) out += report::SaverLine(*p.saver);
  return out;
}

constexpr char kCompareUsage[] = R"(usage: poolscope compare [--options=K=V:...] [--lib=PATH] [--report-dir=DIR] [--keep] [--fail-on-leak] [--process=GLOB] [--no-children] [--html=FILE] [-- CMD [ARGS...]]

Runs CMD twice with libpoolscope.so preloaded, pooling off (pool=0) then on (pool=1), each with its
own report, and prints one table on stdout: logical and real allocations, real frees, real blocks
live at exit, what a malloc/free-counting leak detector would see, pool figures, wall time and
peak RSS, pooling off | on | change, then a verdict, the site that pins most pools (at exit or at the
peak of real live bytes) and the
one pooling saves most calls at, and hints (what the detector rows are; for python, its own
allocator). Progress goes to stderr. With no CMD it runs
the bundled demo workload (threads opening confined arenas, plus a few deliberate leaks).

Each run's reports go to a folder of its own: DIR/off/off.json and DIR/on/on.json. DIR is a new
temporary directory, removed when compare ends unless --keep, or the --report-dir, which is kept;
the line naming the reports says which. CMD's stdout is kept in DIR/off.stdout and DIR/on.stdout
and shown once, the first run's, before the table (with a note when the second run printed
something else); its stderr is left alone.

When CMD starts other programs (a shell, make, a launcher script), each preloaded process writes
its report into its run's folder (DIR/off/off.json.PID, DIR/on/on.json.PID); the table then gives
totals over the process tree, followed by a table of its processes (the top 10 by logical
allocations, the two runs' processes matched by their place in the tree and their executable), and
any without a report. `poolscope diff DIR/off DIR/on` compares the kept trees again.

flags:
  --options=K=V:...   more POOLSCOPE_OPTIONS for both runs (not pool= or report=)
  --lib=PATH          libpoolscope.so to preload (found as for `run`)
  --report-dir=DIR    write the reports to DIR/off/ and DIR/on/ (made when missing) and keep them
                      (default: a new temporary directory)
  --keep              keep the temporary directory and its reports for `poolscope diff` and
                      `report` (default: removed when compare ends)
  --fail-on-leak      exit 1 when the program itself loses blocks in either run: definitely or
                      indirectly lost blocks (the reachability scan, track=1); without a scan,
                      leak_check.program_leak_blocks with --options=leak_exitcode=N, else
                      logical.live_blocks; pooled blocks count as the program's, pools never do
  --process=GLOB      only the processes whose executable (path or base name) matches GLOB, in
                      the totals and the table (repeatable)
  --no-children       only the process poolscope started
  --html=FILE         also write FILE: one self-contained page with the table and both runs'
                      memory over time (the reports' timelines; a tree's root processes') on one
                      chart
  -h, --help          this text

exit status: the first nonzero exit status of CMD (run 1, then run 2), as `run` passes it
(even when that run wrote no report); else 1 when --fail-on-leak finds a leak; else 0. 2 for
bad usage, a missing library, or a run that exited 0 but wrote no readable report.
)";

constexpr char kDiffUsage[] = R"(usage: poolscope diff [--fail-on-leak] [--process=GLOB] [--no-children] [--html=FILE] A.json|A_FOLDER B.json|B_FOLDER

With two folders of reports (each the folder of one run's process tree: `run`'s folder, or
compare's DIR/off and DIR/on), the table gives totals over each tree and a table of their
processes matched by place in the tree, and the leaks by stack cover every process. A folder that
holds the reports of more than one run is refused (status 2); they are never merged.

Prints the table of `poolscope compare` from two saved reports, A (before) and B (after), with the
verdict of B, then their leaks matched by stack. Wall time comes from the reports' start and end
times, peak RSS from their process.max_rss_kib (n/a for a report that lacks it).

When the reports' executables (process.exe) have different base names, a one-line warning goes
to stderr first; the same program in two folders is not warned about.

leaks by stack: the leaks[] groups of A and B matched by their symbolized stacks (function and
object name of each frame, no addresses, so two runs of one program match), groups of one stack
added up. A count line (new, gone, grown, shrunk, unchanged), then the changed stacks, largest
change in bytes first, at most 20 rows:
  change    new (only in B), gone (only in A), grown or shrunk (bytes)
  bytes     B bytes minus A bytes
  A bytes, B bytes, A blocks, B blocks, and the stack's first four functions, innermost first

flags:
  --fail-on-leak   exit 1 when the program loses blocks in A or B: as for compare, definitely
                   or indirectly lost blocks when both reports were scanned, else
                   leak_check.program_leak_blocks when both have it, else logical.live_blocks
  --process=GLOB   only the processes whose executable matches GLOB (repeatable; folders)
  --no-children    only the root of each tree
  --html=FILE      also write FILE: the table and both reports' memory over time on one chart
  -h, --help       this text

exit status: 0; 1 when --fail-on-leak finds a leak; 2 for bad usage or an unreadable report.
)";

// --fail-on-leak judges the program's own lost blocks, a figure pooling does not change: definitely
// plus indirectly lost (memcheck's errors by default) when both reports were scanned for
// reachability; else leak_check.program_leak_blocks when both reports have it (leak_exitcode was set:
// start-up blocks and stdio's buffers left out), else logical.live_blocks. Never the detector view's
// figures: those leave out the program's blocks that sit in pools, so they drop when pooling is on
// although the program leaks exactly as much.
int LeakExit(const nlohmann::json& before, const nlohmann::json& after, std::ostream& err) {
  const char* field = "reachability: definitely + indirectly lost";
  std::optional<int64_t> a = LostBlocks(before);
  std::optional<int64_t> b = LostBlocks(after);
  if (!a || !b) {
    field = "leak_check.program_leak_blocks";
    a = Count(before, field);
    b = Count(after, field);
  }
  if (!a || !b) {
    field = "logical.live_blocks";
    a = Count(before, field);
    b = Count(after, field);
  }
  if (!a || !b) {
    err << "poolscope: --fail-on-leak: a report has no logical.live_blocks\n";
    return kExitDifference;
  }
  if (*a != 0 || *b != 0) {
    err << fmt::format("poolscope: --fail-on-leak: the program leaks ({} blocks before, {} after: {})\n",
                       Thousands(a), Thousands(b), field);
    return kExitDifference;
  }
  return kExitOk;
}

// The comparison of two process trees: totals over the selected processes of each, then the
// per-process table, the processes matched by place.
// `--html=FILE` of compare and diff: the table printed on stdout as an HTML table (and a tree's
// per-process table, a diff's leaks by stack), then both runs' timelines on one chart. A file that
// cannot be written is an error (status 2), after the table on stdout.
void WriteComparePage(const std::string& path, const std::string& title, const report::CompareRun& before,
                      const report::CompareRun& after, const report::CellTable* processes, bool leaks_by_stack,
                      std::ostream& err) {
  if (path.empty()) return;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << HtmlComparePage(title, before, after, processes, leaks_by_stack);
  f.close();
  if (!f) throw CliError{path, "cannot be written (--html)"};
  err << fmt::format("poolscope: comparison page written to {}\n", path);
}

// What becomes of compare's reports, after the line that names them: kept, and how to compare them
// again, or removed when compare ends.
std::string Kept(bool keep, const std::string& off, const std::string& on) {
  if (!keep) return "; removed when compare ends (--keep keeps them)";
  return fmt::format("; kept: poolscope diff {} {}", ShellQuote(off), ShellQuote(on));
}

// A temporary folder of compare's, removed with everything in it when the command ends (path empty:
// nothing to remove).
struct TemporaryFolder {
  std::string path;
  TemporaryFolder() = default;
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  ~TemporaryFolder() { RemoveTemporaryFolder(path); }
};

// The report of a tree's root process, whose timeline a comparison page shows; null without one.
const nlohmann::json& RootDoc(const ProcessTree& tree) {
  static const nlohmann::json kNone;
  for (const TreeProcess& p : tree.processes) {
    if (p.is_root && !p.doc.is_null()) return p.doc;
  }
  return kNone;
}

int CompareTrees(const std::vector<std::string>& shown, const std::string& report_dir, bool keep,
                 ProcessTree (&trees)[2], const ChildResult& off, const ChildResult& on,
                 const std::vector<std::string>& globs, bool no_children, bool fail_on_leak,
                 int first_failure, const std::string& html, std::ostream& out, std::ostream& err) {
  std::vector<size_t> selected[2];
  nlohmann::json totals[2];
  for (int i = 0; i < 2; ++i) selected[i] = Selection(trees[i], globs, no_children);
  for (const ProcessTree& tree : trees) PrintWarnings(tree, err);
  for (int i = 0; i < 2; ++i) {
    totals[i] = TreeTotals(trees[i], selected[i]);
    if (!totals[i].contains("logical")) {
      err << fmt::format("poolscope: {}/{}: no readable report of the selected processes ({}, exit "
                         "status {})\n",
                         report_dir, i == 0 ? "off" : "on",
                         i == 0 ? "pooling off" : "pooling on",
                         (i == 0 ? off : on).exit_status);
      return first_failure != 0 ? first_failure : kExitUsage;
    }
  }
  size_t reports[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    for (size_t k : selected[i]) reports[i] += trees[i].processes[k].doc.is_null() ? 0 : 1;
  }
  std::string which;
  for (const std::string& glob : globs) which += (which.empty() ? "" : ", ") + glob;
  out << fmt::format("poolscope compare: {}\n", CommandLine(shown));
  out << fmt::format("reports: {}/off ({} processes, pooling off), {}/on ({} processes, pooling on){}\n",
                     report_dir, reports[0], report_dir, reports[1],
                     Kept(keep, report_dir + "/off", report_dir + "/on"));
  out << fmt::format("totals over {}\n\n",
                     no_children ? std::string("the root process only")
                     : which.empty() ? std::string("the whole process tree")
                                     : "the processes matching " + OneLine(which));
  RunFacts facts[2];
  facts[0].wall_seconds = off.wall_seconds;
  facts[1].wall_seconds = on.wall_seconds;
  const report::CellTable processes =
      ProcessTableOfTwoCells(trees[0], selected[0], trees[1], selected[1], "off", "on", kProcessesShown);
  out << LedgerTable(totals[0], facts[0], totals[1], facts[1], "pooling off", "pooling on") + "\n" +
             TextOf(processes);
  if (off.exit_status != 0) out << fmt::format("note: run 1 of 2, pooling off ended with status {}\n", off.exit_status);
  if (on.exit_status != 0) out << fmt::format("note: run 2 of 2, pooling on ended with status {}\n", on.exit_status);
  out.flush();
  WriteComparePage(html, "compare " + CommandLine(shown),
                   {&totals[0], facts[0], "pooling off", &RootDoc(trees[0]), "pooling off (root process)"},
                   {&totals[1], facts[1], "pooling on", &RootDoc(trees[1]), "pooling on (root process)"},
                   &processes, false, err);
  if (first_failure != 0) return first_failure;
  return fail_on_leak ? LeakExit(totals[0], totals[1], err) : kExitOk;
}

}  // namespace

int CompareCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagParser flags(args, 2, "poolscope compare");
  std::string options, lib, report_dir, html;
  std::vector<std::string> globs;
  bool fail_on_leak = false, no_children = false, keep = false;
  while (!flags.Done()) {
    if (flags.AtDoubleDash()) {
      flags.Next();
      break;
    }
    if (!flags.AtFlag()) break;
    if (IsHelp(flags.Current())) {
      out << kCompareUsage;
      return kExitOk;
    }
    if (flags.Value({"--options"}, &options) || flags.Value({"--lib"}, &lib) ||
        flags.Value({"--report-dir"}, &report_dir) || flags.Value({"--html"}, &html)) {
      continue;
    }
    if (flags.Switch({"--fail-on-leak"})) {
      fail_on_leak = true;
      continue;
    }
    if (flags.Switch({"--keep"})) {
      keep = true;
      continue;
    }
    if (ProcessFlags(flags, &globs, &no_children)) continue;
    flags.Unknown();
  }
  std::string extra = CheckOptions(options, nullptr, {"pool", "report"});
  std::vector<std::string> command(args.begin() + static_cast<long>(flags.Index()), args.end());
  std::string library = FindLibrary(lib, args[0]);
  const bool bundled_demo = command.empty();
  if (command.empty()) {
    std::vector<std::string> looked;
    std::string demo = Locate({"demo_workload", "tools", "", "", args[0]}, &looked);
    if (demo.empty()) {
      throw CliError{"demo_workload", "not found next to poolscope nor in its runfiles; give a "
                                      "command: poolscope compare -- CMD [ARGS...]"};
    }
    command.push_back(demo);
  }
  const std::string obstacle = PreloadObstacle(command[0]);
  if (!obstacle.empty()) {
    throw CliError{command[0], obstacle + ", so LD_PRELOAD cannot load poolscope into it: nothing to compare"};
  }
  // A folder of compare's own is removed when it ends (also after an error), unless --keep; one the
  // user named is always kept.
  const bool temporary = report_dir.empty();
  TemporaryFolder made;
  if (temporary) {
    report_dir = MakeTempDirectory("poolscope");
    if (!keep) made.path = report_dir;
  } else {
    keep = true;
    EnsureWritableDirectory(AbsolutePath(report_dir), "--report-dir");
  }
  report_dir = AbsolutePath(report_dir);

  // The bundled demo by its name, not by its path in Bazel's output tree.
  std::vector<std::string> shown = command;
  if (bundled_demo) shown[0] = "demo_workload";

  // Each run's reports in a folder of its own, DIR/off and DIR/on (runs.h).
  struct Side {
    bool pool_on;
    const char* label;
    std::string folder;
    std::string report;
    std::string output;  // the child's stdout, shown once before the table
    ChildResult child;
    Report loaded;
    std::vector<KnownProcess> running;
  };
  Side sides[2] = {{false, "run 1 of 2, pooling off", report_dir + "/off", report_dir + "/off/off.json",
                    report_dir + "/off.stdout", {}, {}, {}},
                   {true, "run 2 of 2, pooling on", report_dir + "/on", report_dir + "/on/on.json",
                    report_dir + "/on.stdout", {}, {}, {}}};
  for (const Side& side : sides) EnsureWritableDirectory(side.folder, temporary ? "compare" : "--report-dir");
  err << fmt::format("poolscope: comparing {}\n", CommandLine(shown));
  for (Side& side : sides) {
    RemoveTreeReports(side.report);
    Flush(out, err);
    ChildSpec spec;
    spec.argv = command;
    spec.preload = library;
    spec.options = BuildOptions(side.pool_on, extra, side.report);
    spec.progress_label = side.label;
    spec.stdout_path = side.output;
    spec.run = true;
    spec.run_folder = side.folder;
    side.child = RunChild(spec);
    if (side.child.started) {
      side.running = StillRunning(side.child.pid);
      for (KnownProcess& p : StartMarkers(side.folder, side.child.pid)) side.running.push_back(std::move(p));
    }
    if (!side.child.started) {
      err << fmt::format("poolscope: {}: {}\n", OneLine(command[0]), side.child.problem);
      return side.child.exec_errno == ENOENT ? 127 : side.child.exec_errno != 0 ? 126 : kExitUsage;
    }
  }
  // The program's own output once, before anything of poolscope's on stdout: the first run's, and
  // a note when the second run printed something else.
  std::string printed[2];
  for (int i = 0; i < 2; ++i) {
    std::ifstream file(sides[i].output, std::ios::binary);
    printed[i].assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  out << printed[0];
  if (!printed[0].empty() && printed[0].back() != '\n') out << "\n";
  if (printed[1] != printed[0]) {
    out << fmt::format("note: with pooling on the program printed something else: {}{}\n", sides[1].output,
                       keep ? "" : " (removed when compare ends; --keep keeps it)");
  }
  if (!printed[0].empty() || printed[1] != printed[0]) out << "\n";
  int first_failure = 0;
  for (const Side& side : sides) {
    if (first_failure == 0) first_failure = side.child.exit_status;
  }
  ProcessTree trees[2];
  for (int i = 0; i < 2; ++i) {
    trees[i] = BuildTree(TemplateFiles(sides[i].report), sides[i].child.pid,
                         HowItEnded(sides[i].child), sides[i].running, sides[i].child.run);
  }
  if (IsTree(trees[0]) || IsTree(trees[1]) || !globs.empty() || no_children) {
    return CompareTrees(shown, report_dir, keep, trees, sides[0].child, sides[1].child, globs,
                        no_children, fail_on_leak, first_failure, html, out, err);
  }
  for (Side& side : sides) {
    absl::StatusOr<Report> loaded = LoadReport(side.report);
    if (!loaded.ok()) {
      err << fmt::format("poolscope: {}: {} ({}, exit status {})\n", side.report,
                         std::string(loaded.status().message()), side.label,
                         side.child.exit_status);
      // A program that failed is the news; a missing report is its consequence.
      return first_failure != 0 ? first_failure : kExitUsage;
    }
    side.loaded = *std::move(loaded);
  }
  out << fmt::format("poolscope compare: {}\n", CommandLine(shown));
  out << fmt::format("reports: {} (off), {} (on){}\n\n", sides[0].report, sides[1].report,
                     Kept(keep, sides[0].report, sides[1].report));
  RunFacts facts[2];
  for (int i = 0; i < 2; ++i) {
    facts[i].wall_seconds = sides[i].child.wall_seconds;
    facts[i].peak_rss_kib = sides[i].child.peak_rss_kib;
  }
  out << LedgerTable(sides[0].loaded.doc, facts[0], sides[1].loaded.doc, facts[1], "pooling off", "pooling on");
  for (const Side& side : sides) {
    if (side.child.exit_status != 0) {
      out << fmt::format("note: {} ended with status {}\n", side.label, side.child.exit_status);
    }
  }
  out << PinningLines(sides[1].loaded.doc);
  out << CompareHints(sides[1].loaded.doc);
  out.flush();
  WriteComparePage(html, "compare " + CommandLine(shown),
                   {&sides[0].loaded.doc, facts[0], "pooling off", &sides[0].loaded.doc, "pooling off"},
                   {&sides[1].loaded.doc, facts[1], "pooling on", &sides[1].loaded.doc, "pooling on"}, nullptr,
                   false, err);
  if (first_failure != 0) return first_failure;
  return fail_on_leak ? LeakExit(sides[0].loaded.doc, sides[1].loaded.doc, err) : kExitOk;
}

int DiffCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagParser flags(args, 2, "poolscope diff");
  std::string html;
  bool fail_on_leak = false;
  bool help = false;
  std::vector<std::string> globs;
  bool no_children = false;
  std::vector<std::string> files = ReportOperands(flags, kDiffUsage, &help, out, [&] {
    if (ProcessFlags(flags, &globs, &no_children)) return true;
    if (flags.Value({"--html"}, &html)) return true;
    if (!flags.Switch({"--fail-on-leak"})) return false;
    fail_on_leak = true;
    return true;
  });
  if (help) return kExitOk;
  if (files.size() < 2) {
    throw CliError{"diff", files.empty() ? "missing operands A.json B.json"
                                         : "missing operand B.json"};
  }
  if (files.size() > 2) throw CliError{files[2], "unexpected operand (diff takes two reports)"};
  if (IsDirectory(files[0]) || IsDirectory(files[1]) || !globs.empty() || no_children) {
    ProcessTree trees[2] = {LoadTreeOperands({files[0]}, err), LoadTreeOperands({files[1]}, err)};
    std::vector<size_t> selected[2];
    nlohmann::json totals[2];
    for (int i = 0; i < 2; ++i) {
      selected[i] = Selection(trees[i], globs, no_children);
      totals[i] = TreeTotals(trees[i], selected[i]);
      if (!totals[i].contains("logical")) {
        throw CliError{files[i], "no report of the selected processes"};
      }
    }
    for (const ProcessTree& tree : trees) PrintWarnings(tree, err);
    std::optional<bool> pool_a = Bool(totals[0], "pool.enabled");
    std::optional<bool> pool_b = Bool(totals[1], "pool.enabled");
    std::string label_a = "A", label_b = "B";
    if (pool_a && pool_b && *pool_a != *pool_b) {
      label_a = *pool_a ? "A (pooling on)" : "A (pooling off)";
      label_b = *pool_b ? "B (pooling on)" : "B (pooling off)";
    }
    out << fmt::format("poolscope diff: A = {}, B = {}\n", OneLine(files[0]), OneLine(files[1]));
    out << fmt::format("totals over {} processes of A, {} of B\n\n",
                       ByLogicalAllocations(trees[0], selected[0]).size(),
                       ByLogicalAllocations(trees[1], selected[1]).size());
    const report::CellTable processes =
        ProcessTableOfTwoCells(trees[0], selected[0], trees[1], selected[1], "A", "B", kProcessesShown);
    out << LedgerTable(totals[0], {}, totals[1], {}, label_a, label_b) + "\n" + TextOf(processes) + "\n" +
               LeakDiffSection(totals[0], totals[1], 20);
    out.flush();
    WriteComparePage(html, "diff " + OneLine(files[0]) + " " + OneLine(files[1]),
                     {&totals[0], {}, label_a, &RootDoc(trees[0]), label_a + " (root process)"},
                     {&totals[1], {}, label_b, &RootDoc(trees[1]), label_b + " (root process)"}, &processes,
                     true, err);
    return fail_on_leak ? LeakExit(totals[0], totals[1], err) : kExitOk;
  }
  Report a = Load(files[0]);
  Report b = Load(files[1]);
  std::optional<bool> pool_a = Bool(a.doc, "pool.enabled");
  std::optional<bool> pool_b = Bool(b.doc, "pool.enabled");
  std::string label_a = "A", label_b = "B";
  if (pool_a && pool_b && *pool_a != *pool_b) {
    label_a = *pool_a ? "A (pooling on)" : "A (pooling off)";
    label_b = *pool_b ? "B (pooling on)" : "B (pooling off)";
  }
  std::string mismatch = ExecutableMismatch(a.doc, b.doc);
  if (!mismatch.empty()) err << mismatch << "\n";
  // Two roots of process trees: the files are compared as asked, and the trees' folders named.
  const std::string tree_a = TreeFolderOf(files[0], a.doc), tree_b = TreeFolderOf(files[1], b.doc);
  if (!tree_a.empty() && !tree_b.empty()) {
    err << fmt::format("poolscope: diff: note: A and B are the root processes of runs whose reports are in "
                       "{} and {}: poolscope diff {} {} compares the whole trees\n",
                       OneLine(tree_a), OneLine(tree_b), ShellQuote(tree_a), ShellQuote(tree_b));
  }
  out << fmt::format("poolscope diff: A = {}, B = {}\n\n", OneLine(files[0]), OneLine(files[1]));
  out << LedgerTable(a.doc, {}, b.doc, {}, label_a, label_b) + "\n" + LeakDiffSection(a.doc, b.doc, 20);
  out.flush();
  WriteComparePage(html, "diff " + OneLine(files[0]) + " " + OneLine(files[1]),
                   {&a.doc, {}, label_a, &a.doc, label_a}, {&b.doc, {}, label_b, &b.doc, label_b}, nullptr, true, err);
  return fail_on_leak ? LeakExit(a.doc, b.doc, err) : kExitOk;
}

}  // namespace poolscope::tools
