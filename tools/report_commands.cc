// File: tools/report_commands.cc
//
// The subcommands over saved reports: `poolscope report` (text, HTML, folded stacks or JSON of one
// report or a process tree's), `poolscope suppressions` and `poolscope check`.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "report/format_util.h"
#include "report/html_report.h"
#include "report/identities.h"
#include "report/report_model.h"
#include "report/suppressions.h"
#include "report/suppressions_adapt.h"
#include "report/text_report.h"
#include "tools/cli_common.h"
#include "tools/commands.h"
#include "tools/process_tree.h"
#include "tools/runs.h"
#include "tools/subcommands.h"
#include "tools/tree_reports.h"

namespace poolscope::tools {

using report::FoldedStacks;
using report::HtmlReport;
using report::HtmlTreeReport;
using report::OneLine;
using report::ParseSuppressionFormat;
using report::PrettyJson;
using report::Report;
using report::SuppressionFormat;
using report::Suppressions;
using report::TextReport;

namespace {

constexpr char kReportUsage[] = R"(usage: poolscope report [--format=text|html|folded|json] [--process=GLOB] [--no-children] R.json|FOLDER...

Renders a saved report on stdout. A folder of reports (files *.json and *.json.PID), or several
files, is one process tree: totals, a table of its processes by logical allocations, then each of
the top 10 rendered as one report (html: a section per process; folded: stacks under EXE [PID];
json: an array). Unreadable files among readable ones are named in warnings on stderr. The reports
must be of one run: a folder that holds the reports of several runs (or only runs' folders, as
compare's DIR holds off/ and on/) is refused with one line naming them (status 2).

formats:
  text     (default) a page to read top to bottom: process, totals, both ledgers with calls by
           entry point, the pool, the reconciliation and detector view with the verdict, the
           top 20 call sites, the sites whose live blocks pin most pools at exit and the one
           pooling saves most at, the largest leaks with their stacks, errors
  html     one self-contained page (inline CSS and SVG, no script, nothing fetched): both ledgers,
           the size histogram against the pool size, live blocks by kind, a flame graph of the
           bytes live at exit, the leak table, the top 20 call sites
  folded   one line per leak stack, `outer;...;inner BYTES`, for flamegraph.pl
  json     the validated report, pretty-printed

flags:
  --format=FORMAT   as above
  --process=GLOB    only the processes whose executable matches GLOB (repeatable)
  --no-children     only the root process
  -h, --help        this text

exit status: 0; 2 for bad usage or an unreadable report (missing, truncated, not JSON, another
schema).
)";

constexpr char kSuppressionsUsage[] = R"(usage: poolscope suppressions --format=lsan|valgrind|heaptrack R.json
       poolscope suppressions --adapt FILE [--format=lsan|valgrind|heaptrack]

Prints suppressions that mark poolscope's pool memory as expected, so an existing leak check
stays green with pooling on and still reports the program's own leaks. Every entry matches the
function that makes each pool's real allocation, ShimBackend::AllocPool in libpoolscope.so, or the
two under it that call the allocator (LeakSanitizer's default unwinder sees only those):

  lsan        `leak:ShimBackend::AllocPool`, `leak:poolscope::PoolFromMalloc` and
              `leak:poolscope_pool_alloc`, for LSAN_OPTIONS=suppressions=FILE
  heaptrack   the same three lines, for heaptrack_print --suppressions=FILE
              (heaptrack_print 1.4 also needs --disable-builtin-suppressions)
  valgrind    a Memcheck:Leak block, all leak kinds, with the frames
              `...` and `fun:_ZN9poolscope*ShimBackend9AllocPool*` (mangled: memcheck matches
              mangled names), for valgrind --suppressions=FILE

With --adapt, prints FILE, a suppression file written for the program run without poolscope,
rewritten to match the same reports with libpoolscope.so preloaded (the pools need the entries
above besides):
  valgrind    each memcheck entry whose stack starts at malloc, free, operator new or their kin
              is kept and followed by copies that allow 1 to 4 of poolscope's frames
              (`obj:*/libpoolscope.so`) between that function and its caller, and copies for the
              blocks pools serve (their stacks start at poolscope's ValgrindDescribeAlloc)
  lsan, heaptrack
              the `leak:` patterns, unchanged (they match any frame of a stack); a pattern that
              also matches one of poolscope's own frames is named in a warning on stderr
Comments and other entries are kept. The format is found from the file (a `{` first: valgrind)
unless --format says it.

flags:
  --format=FORMAT   lsan, valgrind or heaptrack; required with a report
  --adapt=FILE      adapt the suppression file FILE
  -h, --help        this text

exit status: 0; 2 for bad usage, an unreadable report, or a FILE that is not a suppression file
(`poolscope: FILE:LINE: problem`).
)";

constexpr char kCheckUsage[] = R"(usage: poolscope check R.json [R2.json ...]

Checks that each report is complete (every field of schema 1, with its type) and that every
identity between its figures holds: each ledger balances (allocs - frees = live_blocks), the
reconciliation and the detector view agree with the ledgers and the pool counts, the size
buckets and the per-thread figures add up to the totals, leak_check's split adds up, and the
real ledger is what the logical one and the pool make of it (pooling off: the same). The
identities that compare the two ledgers are left out when process.counters_exact is false.

Prints `R.json: ok, N identities hold` for a report that holds, else one line per broken
identity or missing field, naming the fields and their values:
  R.json: logical.allocs - logical.frees = 1000 - 990 = 10 != logical.live_blocks = 11

flags:
  -h, --help   this text

exit status: 0 every report holds; 1 a report is incomplete or breaks an identity; 2 for bad
usage or an unreadable report (missing, empty, truncated, not JSON, not a poolscope report), with
one line on stderr; every report is checked either way.
)";

// `report` of a tree: the totals and the per-process table, then each of the first processes by
// logical allocations rendered as one report is.
std::string TreeReport(const ProcessTree& tree, const std::vector<size_t>& selected,
                       const std::string& where, const std::string& format) {
  std::vector<size_t> order = ByLogicalAllocations(tree, selected);
  if (order.size() > kProcessesShown) order.resize(kProcessesShown);
  if (format == "json") {
    nlohmann::json all = nlohmann::json::array();
    for (size_t i : ByLogicalAllocations(tree, selected)) all.push_back(tree.processes[i].doc);
    return PrettyJson(all);
  }
  if (format == "folded") {
    // Each stack under its process's executable, so that one flame graph shows the whole tree.
    std::string out;
    for (size_t i : ByLogicalAllocations(tree, selected)) {
      const TreeProcess& p = tree.processes[i];
      std::string name = p.exe.substr(p.exe.rfind('/') == std::string::npos ? 0 : p.exe.rfind('/') + 1);
      for (char& c : name) {
        if (c == ';' || c == ' ') c = '_';
      }
      std::string folded = FoldedStacks(p.doc);
      for (size_t at = 0; at < folded.size();) {
        size_t end = folded.find('\n', at);
        if (end == std::string::npos) end = folded.size();
        if (end > at) out += fmt::format("{} [{}];{}\n", name, p.pid, folded.substr(at, end - at));
        at = end + 1;
      }
    }
    return out;
  }
  size_t reports = ByLogicalAllocations(tree, selected).size();
  std::string summary = fmt::format("process tree{}: {} process{}, {} with a report\n",
                                    where.empty() ? "" : " of " + OneLine(where), selected.size(),
                                    selected.size() == 1 ? "" : "es", reports);
  nlohmann::json totals = TreeTotals(tree, selected);
  if (totals.contains("logical")) {
    std::string run = RunSummary(totals);
    for (size_t at = 0; at < run.size();) {
      size_t end = run.find('\n', at);
      std::string line = run.substr(at, end - at);
      if (line.rfind("poolscope: ", 0) == 0) line = line.substr(11);
      summary += "totals: " + line + "\n";
      at = end == std::string::npos ? run.size() : end + 1;
    }
  }
  const report::CellTable processes = ProcessTableCells(tree, selected, kProcessesShown);
  if (format == "html") {
    std::vector<std::pair<const nlohmann::json*, std::string>> shown;
    for (size_t i : order) shown.push_back({&tree.processes[i].doc, tree.processes[i].path});
    return HtmlTreeReport(where.empty() ? "process tree" : "process tree of " + where, summary, processes, shown);
  }
  summary += "\n" + TextOf(processes);
  std::string out = "poolscope report: " + summary;
  for (size_t i : order) {
    const TreeProcess& p = tree.processes[i];
    out += fmt::format("\n{}\npid {}: {}\n{}\n", std::string(100, '='), p.pid, OneLine(p.exe),
                       std::string(100, '='));
    out += TextReport(p.doc, p.path);
  }
  return out;
}

// A report that is the root of a process tree whose other reports are in a folder (runs.h): one line
// on stderr saying where the whole tree is.
void NoteTreeRoot(const std::string& file, const nlohmann::json& doc, std::ostream& err) {
  const std::string folder = TreeFolderOf(file, doc);
  if (folder.empty()) return;
  err << fmt::format("poolscope: note: {} is the root process of a run whose reports are in {}: "
                     "poolscope report {} shows the whole tree\n",
                     OneLine(file), OneLine(folder), ShellQuote(folder));
}

}  // namespace

int ReportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagParser flags(args, 2, "poolscope report");
  std::string format = "text";
  std::vector<std::string> globs;
  bool help = false, no_children = false;
  std::vector<std::string> files = ReportOperands(flags, kReportUsage, &help, out, [&] {
    if (ProcessFlags(flags, &globs, &no_children)) return true;
    return flags.Value({"--format", "-f"}, &format);
  });
  if (help) return kExitOk;
  if (files.empty()) throw CliError{"report", "missing operand R.json"};
  if (format != "text" && format != "html" && format != "folded" && format != "json") {
    throw CliError{"--format", fmt::format("expected text, html, folded or json, got '{}'",
                                           OneLine(format))};
  }
  if (files.size() > 1 || IsDirectory(files[0]) || !globs.empty() || no_children) {
    ProcessTree tree = LoadTreeOperands(files, err);
    std::vector<size_t> selected = Selection(tree, globs, no_children);
    PrintWarnings(tree, err);
    if (tree.processes.size() == 1) NoteTreeRoot(tree.processes[0].path, tree.processes[0].doc, err);
    out << TreeReport(tree, selected, files.size() == 1 ? files[0] : std::string(), format);
    return kExitOk;
  }
  const std::string& file = files[0];
  Report report = Load(file);
  NoteTreeRoot(file, report.doc, err);
  if (format == "text") {
    out << TextReport(report.doc, file);
  } else if (format == "html") {
    out << HtmlReport(report.doc, file);
  } else if (format == "folded") {
    out << FoldedStacks(report.doc);
  } else {
    out << PrettyJson(report.doc);
  }
  return kExitOk;
}

int SuppressionsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagParser flags(args, 2, "poolscope suppressions");
  std::string format_name, adapt;
  bool help = false, adapting = false;
  std::vector<std::string> files = ReportOperands(flags, kSuppressionsUsage, &help, out, [&] {
    if (flags.Value({"--adapt"}, &adapt)) {
      adapting = true;
      return true;
    }
    return flags.Value({"--format", "-f"}, &format_name);
  });
  if (help) return kExitOk;
  SuppressionFormat format;
  if (!format_name.empty() && !ParseSuppressionFormat(format_name, &format)) {
    throw CliError{"--format", fmt::format("expected lsan, valgrind or heaptrack, got '{}'",
                                           OneLine(format_name))};
  }
  if (adapting) {
    if (adapt.empty()) throw CliError{"--adapt", "needs a value (the suppression file)"};
    if (!files.empty()) {
      throw CliError{files[0], "unexpected operand (--adapt takes the suppression file as its value)"};
    }
    absl::StatusOr<std::string> text = report::ReadSuppressionFile(adapt);
    if (!text.ok()) throw CliError{adapt, std::string(text.status().message())};
    report::AdaptedSuppressions adapted = report::AdaptSuppressions(
        *text, adapt, format_name.empty() ? std::nullopt : std::optional<SuppressionFormat>(format));
    if (!adapted.error.empty()) {
      throw CliError{fmt::format("{}:{}", adapt, adapted.error_line), adapted.error};
    }
    out << adapted.text;
    out.flush();
    for (const std::string& warning : adapted.warnings) {
      err << fmt::format("poolscope: {}:{}\n", OneLine(adapt), warning);
    }
    return kExitOk;
  }
  if (files.empty()) throw CliError{"suppressions", "missing operand R.json"};
  if (files.size() > 1) throw CliError{files[1], "unexpected operand (one report at a time)"};
  if (format_name.empty()) {
    throw CliError{"--format", "required: lsan, valgrind or heaptrack"};
  }
  Report report = Load(files[0]);
  out << Suppressions(report.doc, files[0], format);
  return kExitOk;
}

int CheckCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagParser flags(args, 2, "poolscope check");
  bool help = false;
  std::vector<std::string> files =
      ReportOperands(flags, kCheckUsage, &help, out, [] { return false; });
  if (help) return kExitOk;
  if (files.empty()) throw CliError{"check", "missing operand R.json"};
  int status = kExitOk;
  for (const std::string& file : files) {
    absl::StatusOr<nlohmann::json> doc = report::ParseReportFile(file);
    absl::Status readable = doc.ok() ? report::CheckSchemaName(*doc) : doc.status();
    if (!readable.ok()) {
      out.flush();
      err << fmt::format("poolscope: {}: {}\n", OneLine(file),
                         OneLine(std::string(readable.message())));
      status = kExitUsage;
      continue;
    }
    report::CheckResult result = report::CheckReport(*doc);
    if (result.ok()) {
      out << fmt::format("{}: ok, {} identities hold\n", OneLine(file), result.held);
      continue;
    }
    for (const std::string& line : result.broken) {
      out << fmt::format("{}: {}\n", OneLine(file), OneLine(line));
    }
    if (status == kExitOk) status = kExitDifference;
  }
  out.flush();
  return status;
}

}  // namespace poolscope::tools
