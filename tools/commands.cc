// File: tools/commands.cc
//
// See commands.h. Each subcommand parses its own flags with the small parser below (flags and
// operands may be mixed; `--` ends the flags; for run and compare the first operand starts the
// command), then does its work. Errors travel as a CliError up to Main, which prints the one line
// and returns 2.
#include "tools/commands.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>

#include <sys/stat.h>
#include <unistd.h>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "report/find_report.h"
#include "report/identities.h"
#include "tools/attach.h"
#include "tools/child_runner.h"
#include "tools/format_util.h"
#include "tools/html_report.h"
#include "tools/leak_diff.h"
#include "tools/ledger_table.h"
#include "tools/locate.h"
#include "tools/report_model.h"
#include "tools/suppressions.h"
#include "tools/text_report.h"

namespace poolscope::tools {
namespace {

// One error: printed as "poolscope: SUBJECT: PROBLEM".
struct CliError {
  std::string subject;
  std::string problem;
};

constexpr char kTopUsage[] = R"(usage: poolscope COMMAND [FLAGS] [ARGS]

An LD_PRELOAD allocation interposer and leak-accounting profiler.

commands:
  run           run a program with libpoolscope.so preloaded, print a summary
  attach        load libpoolscope.so into a running process; its report when it ends or at ^C
  compare       run a program twice (pooling off, then on) and compare the ledgers
  diff          the same comparison from two saved reports
  report        render a saved report (text, html, folded stacks, json)
  suppressions  leak-checker suppressions that mark poolscope's pools as expected
  check         check that reports are complete and that their identities hold

  poolscope COMMAND --help   shows the flags of a command.

exit status: 0 success; 1 a difference the caller asked to fail on (--fail-on-leak), or a
report `check` finds broken; 2 bad usage or unreadable input; `run` exits with the program's status.
)";

constexpr char kRunUsage[] = R"(usage: poolscope run [--pool=on|off] [--options=K=V:...] [-o REPORT] [--lib=PATH] -- CMD [ARGS...]

Runs CMD (through execvp, never a shell) with libpoolscope.so preloaded, then prints a short
summary of its report on stderr; CMD's own stdout and stderr are untouched.

flags:
  --pool=on|off       pooling on (default) or off (pool=1 / pool=0)
  --options=K=V:...   more POOLSCOPE_OPTIONS, appended (e.g. --options=pool_size=128:pools=8)
  -o, --output=PATH   the report file (default: a new temporary directory, named in the summary);
                      a report= key in --options does the same
  --lib=PATH          libpoolscope.so to preload (default: $POOLSCOPE_LIB, then next to poolscope,
                      then ../interpose/ beside it, then the Bazel runfiles tree)
  -h, --help          this text

environment given to CMD: LD_PRELOAD=<lib> before any existing entries, POOLSCOPE_OPTIONS
(any existing value first, then pool=, --options, report=), POOLSCOPE_ROOT_PID=<CMD's pid>.

exit status: CMD's exit status, 128+N when a signal N ended it; 127 when CMD was not found, 126
when it could not be executed; 2 for bad usage.
)";

constexpr char kCompareUsage[] = R"(usage: poolscope compare [--options=K=V:...] [--lib=PATH] [--report-dir=DIR] [--fail-on-leak] [-- CMD [ARGS...]]

Runs CMD twice with libpoolscope.so preloaded, pooling off (pool=0) then on (pool=1), each with its
own report, and prints one table on stdout: logical and real allocations, real frees, real blocks
live at exit, what a malloc/free-counting leak detector would see, pool figures, wall time and
peak RSS, pooling off | on | change, then a verdict. Progress goes to stderr. With no CMD it runs
the bundled demo workload (threads opening confined arenas, plus a few deliberate leaks).

CMD's stdout is kept in DIR/off.stdout and DIR/on.stdout and shown once, the first run's, before
the table (with a note when the second run printed something else); its stderr is left alone.

flags:
  --options=K=V:...   more POOLSCOPE_OPTIONS for both runs (not pool= or report=)
  --lib=PATH          libpoolscope.so to preload (found as for `run`)
  --report-dir=DIR    write the reports to DIR/off.json and DIR/on.json (default: a new
                      temporary directory); they stay there for `poolscope diff` and `report`
  --fail-on-leak      exit 1 when the program itself loses blocks in either run: definitely or
                      indirectly lost blocks (the reachability scan, track=1); without a scan,
                      leak_check.program_leak_blocks with --options=leak_exitcode=N, else
                      logical.live_blocks; pooled blocks count as the program's, pools never do
  -h, --help          this text

exit status: the first nonzero exit status of CMD (run 1, then run 2), as `run` passes it
(even when that run wrote no report); else 1 when --fail-on-leak finds a leak; else 0. 2 for
bad usage, a missing library, or a run that exited 0 but wrote no readable report.
)";

constexpr char kDiffUsage[] = R"(usage: poolscope diff [--fail-on-leak] A.json B.json

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
  -h, --help       this text

exit status: 0; 1 when --fail-on-leak finds a leak; 2 for bad usage or an unreadable report.
)";

constexpr char kReportUsage[] = R"(usage: poolscope report [--format=text|html|folded|json] R.json

Renders a saved report on stdout.

formats:
  text     (default) a page to read top to bottom: process, totals, both ledgers with calls by
           entry point, the pool, the reconciliation and detector view with the verdict, the
           top 20 call sites, the largest leaks with their stacks, errors
  html     one self-contained page (inline CSS and SVG, no script, nothing fetched): both ledgers,
           the size histogram against the pool size, live blocks by kind, a flame graph of the
           bytes live at exit, the leak table, the top 20 call sites
  folded   one line per leak stack, `outer;...;inner BYTES`, for flamegraph.pl
  json     the validated report, pretty-printed

flags:
  --format=FORMAT   as above
  -h, --help        this text

exit status: 0; 2 for bad usage or an unreadable report (missing, truncated, not JSON, another
schema).
)";

constexpr char kSuppressionsUsage[] = R"(usage: poolscope suppressions --format=lsan|valgrind|heaptrack R.json

Prints suppressions that mark poolscope's pool memory as expected, so an existing leak check
stays green with pooling on and still reports the program's own leaks. Every entry matches the one
function that makes each pool's real allocation, ShimBackend::AllocPool in libpoolscope.so:

  lsan        `leak:ShimBackend::AllocPool`, for LSAN_OPTIONS=suppressions=FILE
  heaptrack   `leak:ShimBackend::AllocPool`, for heaptrack_print --suppressions=FILE
              (heaptrack_print 1.4 also needs --disable-builtin-suppressions)
  valgrind    a Memcheck:Leak block, all leak kinds, with the frames
              `...` and `fun:_ZN9poolscope*ShimBackend9AllocPool*` (mangled: memcheck matches
              mangled names), for valgrind --suppressions=FILE

flags:
  --format=FORMAT   required: lsan, valgrind or heaptrack
  -h, --help        this text

exit status: 0; 2 for bad usage or an unreadable report.
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

// A flag parser over args[first..]. Recognises --name=value, --name value, and short -o value.
class FlagParser {
 public:
  FlagParser(const std::vector<std::string>& args, size_t first, std::string usage_hint)
      : args_(args), i_(first), hint_(std::move(usage_hint)) {}

  bool Done() const { return i_ >= args_.size(); }
  const std::string& Current() const { return args_[i_]; }
  size_t Index() const { return i_; }
  void Next() { ++i_; }

  // True when the current argument looks like a flag (and is not a lone "-").
  bool AtFlag() const { return Current().size() > 1 && Current()[0] == '-'; }
  bool AtDoubleDash() const { return Current() == "--"; }

  // Matches a boolean flag.
  bool Switch(std::initializer_list<const char*> names) {
    for (const char* name : names) {
      if (Current() == name) {
        ++i_;
        return true;
      }
      if (Current().rfind(std::string(name) + "=", 0) == 0) {
        throw CliError{name, "takes no value"};
      }
    }
    return false;
  }

  // Matches a flag with a value; stores it in *value.
  bool Value(std::initializer_list<const char*> names, std::string* value) {
    for (const char* name : names) {
      const std::string& arg = Current();
      std::string with_equals = std::string(name) + "=";
      if (arg.rfind(with_equals, 0) == 0) {
        *value = arg.substr(with_equals.size());
        ++i_;
        return true;
      }
      if (arg == name) {
        if (i_ + 1 >= args_.size()) throw CliError{name, "needs a value"};
        *value = args_[i_ + 1];
        i_ += 2;
        return true;
      }
    }
    return false;
  }

  [[noreturn]] void Unknown() const {
    std::string flag = Current().substr(0, Current().find('='));
    throw CliError{flag, "unknown flag (see " + hint_ + " --help)"};
  }

 private:
  const std::vector<std::string>& args_;
  size_t i_;
  std::string hint_;
};

bool IsHelp(const std::string& arg) { return arg == "-h" || arg == "--help"; }

Report Load(const std::string& path) {
  absl::StatusOr<Report> report = LoadReport(path);
  if (!report.ok()) throw CliError{path, std::string(report.status().message())};
  return *std::move(report);
}

std::string ShellQuote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789-_./=:,+@%") == std::string::npos) {
    return arg;
  }
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string CommandLine(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& arg : argv) out += (out.empty() ? "" : " ") + ShellQuote(arg);
  return OneLine(out);
}

std::string AbsolutePath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

std::string MakeTempDirectory() {
  const char* tmp = getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                        "/poolscope.XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) {
    throw CliError{pattern, fmt::format("cannot create a temporary directory: {}",
                                        std::strerror(errno))};
  }
  return buffer.data();
}

// The options from --options: checked for key=value syntax; a report= key is taken out into
// *report (the last one wins) and keys in `forbidden` are refused.
std::string CheckOptions(const std::string& options, std::string* report,
                         std::initializer_list<const char*> forbidden) {
  std::string kept;
  size_t start = 0;
  while (start <= options.size()) {
    size_t end = options.find(':', start);
    if (end == std::string::npos) end = options.size();
    std::string entry = options.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    size_t eq = entry.find('=');
    if (eq == 0 || eq == std::string::npos) {
      throw CliError{"--options", fmt::format("'{}' is not key=value", OneLine(entry))};
    }
    std::string key = entry.substr(0, eq);
    for (const char* bad : forbidden) {
      if (key == bad) {
        throw CliError{"--options", fmt::format("{}= is set by this command", key)};
      }
    }
    if (key == "report" && report != nullptr) {
      *report = entry.substr(eq + 1);
      continue;
    }
    kept += (kept.empty() ? "" : ":") + entry;
  }
  return kept;
}

// POOLSCOPE_OPTIONS for the child: the caller's own value first, then ours (later keys win).
std::string BuildOptions(bool pool_on, const std::string& extra, const std::string& report) {
  std::string out;
  const char* inherited = getenv("POOLSCOPE_OPTIONS");
  if (inherited != nullptr && *inherited != '\0') out = std::string(inherited) + ":";
  out += pool_on ? "pool=1" : "pool=0";
  if (!extra.empty()) out += ":" + extra;
  out += ":report=" + report;
  return out;
}

std::string FindLibrary(const std::string& explicit_path, const std::string& argv0) {
  std::vector<std::string> looked;
  std::string lib =
      Locate({"libpoolscope.so", "interpose", explicit_path, "POOLSCOPE_LIB", argv0}, &looked);
  if (!lib.empty()) return lib;
  if (!explicit_path.empty()) throw CliError{"--lib", explicit_path + ": no such file"};
  std::string where;
  for (const std::string& place : looked) where += (where.empty() ? "" : ", ") + place;
  throw CliError{"libpoolscope.so",
                 "not found (use --lib=PATH or POOLSCOPE_LIB; looked in " + where + ")"};
}

void Flush(std::ostream& out, std::ostream& err) {
  out.flush();
  err.flush();
  std::cout.flush();
  std::cerr.flush();
}

// ---------------------------------------------------------------------------------------------
// run

std::string RunSummary(const nlohmann::json& doc) {
  std::string out;
  std::optional<int64_t> logical = Count(doc, "logical.allocs");
  std::optional<int64_t> hits = Count(doc, "pool.hits");
  out += fmt::format("poolscope: {} logical allocations, {} real; {} served from pools ({}); {} "
                     "real blocks live at exit\n",
                     Thousands(logical), Thousands(Count(doc, "real.allocs")), Thousands(hits),
                     Percent(hits, logical), Thousands(Count(doc, "real.live_blocks")));
  out += fmt::format(
      "poolscope: detector view: {} unfreed blocks = {} program leaks + {} pool blocks + {} "
      "internal\n",
      Thousands(Count(doc, "reconciliation.detector_view.unfreed_blocks")),
      Thousands(Count(doc, "reconciliation.detector_view.program_leak_blocks")),
      Thousands(Count(doc, "reconciliation.detector_view.pool_blocks")),
      Thousands(Count(doc, "reconciliation.detector_view.internal_blocks")));
  out += fmt::format("poolscope: {}\n", Verdict(nlohmann::json::object(), doc));
  return out;
}

int Run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagParser flags(args, 2, "poolscope run");
  std::string pool = "on", options, output, lib;
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
  if (temporary) report = MakeTempDirectory() + "/report.json";
  if (report != "none") report = AbsolutePath(report);
  if (report.find('%') == std::string::npos && report != "none") unlink(report.c_str());

  // A program the preload cannot reach still runs (its status is run's), but leaves no report.
  const std::string obstacle = PreloadObstacle(command[0]);
  if (!obstacle.empty()) {
    err << fmt::format("poolscope: {}: {}, so LD_PRELOAD cannot load poolscope into it: it runs as "
                       "usual and no report is written\n",
                       OneLine(command[0]), obstacle);
  }
  Flush(out, err);
  ChildResult child =
      RunChild({command, library, BuildOptions(pool == "on", extra, report), "", ""});
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

// ---------------------------------------------------------------------------------------------
// compare and diff

// --fail-on-leak judges the program's own lost blocks, a figure pooling does not change: definitely
// plus indirectly lost (memcheck's errors by default) when both reports were scanned for
// reachability; else leak_check.program_leak_blocks when both reports have it (leak_exitcode was set:
// start-up blocks and stdio's buffers left out), else logical.live_blocks. Never the detector view's
// figures: those leave out the program's blocks that sit in pools, so they drop when pooling is on
// although the program leaks exactly as much.
std::optional<int64_t> LostBlocks(const nlohmann::json& report) {
  const nlohmann::json* scanned = report.contains("reachability") ? &report["reachability"] : nullptr;
  if (scanned == nullptr || !scanned->value("scanned", false)) return std::nullopt;
  std::optional<int64_t> definite = Count(report, "reachability.definitely_lost.blocks");
  std::optional<int64_t> indirect = Count(report, "reachability.indirectly_lost.blocks");
  if (!definite || !indirect) return std::nullopt;
  return *definite + *indirect;
}

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

int Compare(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagParser flags(args, 2, "poolscope compare");
  std::string options, lib, report_dir;
  bool fail_on_leak = false;
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
        flags.Value({"--report-dir"}, &report_dir)) {
      continue;
    }
    if (flags.Switch({"--fail-on-leak"})) {
      fail_on_leak = true;
      continue;
    }
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
  if (report_dir.empty()) {
    report_dir = MakeTempDirectory();
  } else {
    struct stat info;
    if (stat(report_dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
      throw CliError{"--report-dir", report_dir + ": not a directory"};
    }
  }
  report_dir = AbsolutePath(report_dir);

  // The bundled demo by its name, not by its path in Bazel's output tree.
  std::vector<std::string> shown = command;
  if (bundled_demo) shown[0] = "demo_workload";

  struct Side {
    bool pool_on;
    const char* label;
    std::string report;
    std::string output;  // the child's stdout, shown once before the table
    ChildResult child;
    Report loaded;
  };
  Side sides[2] = {
      {false, "run 1 of 2, pooling off", report_dir + "/off.json", report_dir + "/off.stdout", {}, {}},
      {true, "run 2 of 2, pooling on", report_dir + "/on.json", report_dir + "/on.stdout", {}, {}}};
  err << fmt::format("poolscope: comparing {}\n", CommandLine(shown));
  for (Side& side : sides) {
    unlink(side.report.c_str());
    Flush(out, err);
    side.child = RunChild({command, library, BuildOptions(side.pool_on, extra, side.report),
                           side.label, side.output});
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
    out << fmt::format("note: with pooling on the program printed something else: {}\n",
                       sides[1].output);
  }
  if (!printed[0].empty() || printed[1] != printed[0]) out << "\n";
  int first_failure = 0;
  for (const Side& side : sides) {
    if (first_failure == 0) first_failure = side.child.exit_status;
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
  out << fmt::format("reports: {} (off), {} (on)\n\n", sides[0].report, sides[1].report);
  RunFacts facts[2];
  for (int i = 0; i < 2; ++i) {
    facts[i].wall_seconds = sides[i].child.wall_seconds;
    facts[i].peak_rss_kib = sides[i].child.peak_rss_kib;
  }
  out << LedgerTable(sides[0].loaded.doc, facts[0], sides[1].loaded.doc, facts[1], "pooling off",
                     "pooling on");
  for (const Side& side : sides) {
    if (side.child.exit_status != 0) {
      out << fmt::format("note: {} ended with status {}\n", side.label, side.child.exit_status);
    }
  }
  out.flush();
  if (first_failure != 0) return first_failure;
  return fail_on_leak ? LeakExit(sides[0].loaded.doc, sides[1].loaded.doc, err) : kExitOk;
}

// The report operands of diff, report, suppressions and check, with flags in any order (`--` ends
// the flags). `flag` takes the subcommand's own flag at the current argument and says whether it
// did. -h/--help prints `usage` and sets *help.
std::vector<std::string> ReportOperands(FlagParser& flags, const char* usage, bool* help,
                                        std::ostream& out, const std::function<bool()>& flag) {
  std::vector<std::string> files;
  bool operands_only = false;
  while (!flags.Done()) {
    if (!operands_only && flags.AtDoubleDash()) {
      operands_only = true;
      flags.Next();
      continue;
    }
    if (!operands_only && flags.AtFlag()) {
      if (IsHelp(flags.Current())) {
        out << usage;
        *help = true;
        return {};
      }
      if (flag()) continue;
      flags.Unknown();
    }
    files.push_back(flags.Current());
    flags.Next();
  }
  return files;
}

int Diff(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagParser flags(args, 2, "poolscope diff");
  bool fail_on_leak = false;
  bool help = false;
  std::vector<std::string> files = ReportOperands(flags, kDiffUsage, &help, out, [&] {
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
  out << fmt::format("poolscope diff: A = {}, B = {}\n\n", OneLine(files[0]), OneLine(files[1]));
  out << LedgerTable(a.doc, {}, b.doc, {}, label_a, label_b);
  out << "\n" << LeakDiffSection(a.doc, b.doc, 20);
  out.flush();
  return fail_on_leak ? LeakExit(a.doc, b.doc, err) : kExitOk;
}

// ---------------------------------------------------------------------------------------------
// report and suppressions

// Parses "[--format=F] FILE" in any order; returns the file.
std::string OneReportOperand(FlagParser& flags, const char* usage, const char* command,
                             std::string* format, bool* help, std::ostream& out) {
  std::vector<std::string> files = ReportOperands(
      flags, usage, help, out, [&] { return flags.Value({"--format", "-f"}, format); });
  if (*help) return "";
  if (files.empty()) throw CliError{command, "missing operand R.json"};
  if (files.size() > 1) throw CliError{files[1], "unexpected operand (one report at a time)"};
  return files[0];
}

int ReportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  FlagParser flags(args, 2, "poolscope report");
  std::string format = "text";
  bool help = false;
  std::string file = OneReportOperand(flags, kReportUsage, "report", &format, &help, out);
  if (help) return kExitOk;
  if (format != "text" && format != "html" && format != "folded" && format != "json") {
    throw CliError{"--format", fmt::format("expected text, html, folded or json, got '{}'",
                                           OneLine(format))};
  }
  Report report = Load(file);
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

int SuppressionsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  FlagParser flags(args, 2, "poolscope suppressions");
  std::string format_name;
  bool help = false;
  std::string file =
      OneReportOperand(flags, kSuppressionsUsage, "suppressions", &format_name, &help, out);
  if (help) return kExitOk;
  SuppressionFormat format;
  if (format_name.empty()) {
    throw CliError{"--format", "required: lsan, valgrind or heaptrack"};
  }
  if (!ParseSuppressionFormat(format_name, &format)) {
    throw CliError{"--format", fmt::format("expected lsan, valgrind or heaptrack, got '{}'",
                                           OneLine(format_name))};
  }
  Report report = Load(file);
  out << Suppressions(report.doc, file, format);
  return kExitOk;
}

// ---------------------------------------------------------------------------------------------
// check

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

int Dispatch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() < 2) {
    err << kTopUsage;
    return kExitUsage;
  }
  const std::string& command = args[1];
  if (IsHelp(command)) {
    out << kTopUsage;
    return kExitOk;
  }
  if (command == "--version") {
    out << fmt::format("poolscope 0.1 (reads {})\n", kReportSchema);
    return kExitOk;
  }
  if (command == "help") {
    std::vector<std::string> again = {args[0], args.size() > 2 ? args[2] : "--help", "--help"};
    if (args.size() <= 2) again.pop_back();
    return Dispatch(again, out, err);
  }
  if (command == "run") return Run(args, out, err);
  if (command == "attach") return AttachCommand(args, out, err);
  if (command == "compare") return Compare(args, out, err);
  if (command == "diff") return Diff(args, out, err);
  if (command == "report") return ReportCommand(args, out, err);
  if (command == "suppressions") return SuppressionsCommand(args, out, err);
  if (command == "check") return CheckCommand(args, out, err);
  if (command.size() > 1 && command[0] == '-') {
    throw CliError{command.substr(0, command.find('=')), "unknown flag (see poolscope --help)"};
  }
  throw CliError{command, "unknown command (run, attach, compare, diff, report, suppressions, check; see "
                          "poolscope --help)"};
}

}  // namespace

int Main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    return Dispatch(args, out, err);
  } catch (const CliError& error) {
    out.flush();
    err << fmt::format("poolscope: {}: {}\n", OneLine(error.subject), OneLine(error.problem));
  } catch (const std::exception& error) {
    out.flush();
    err << fmt::format("poolscope: internal error: {}\n", OneLine(error.what()));
  } catch (...) {
    out.flush();
    err << "poolscope: internal error\n";
  }
  return kExitUsage;
}

}  // namespace poolscope::tools
