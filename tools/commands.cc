// File: tools/commands.cc
//
// See commands.h. Each subcommand parses its own flags with the small parser below (flags and
// operands may be mixed; `--` ends the flags; for run and compare the first operand starts the
// command), then does its work. Errors travel as a CliError up to Main, which prints the one line
// and returns 2.
#include "tools/commands.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>

#include <dirent.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "report/find_report.h"
#include "report/format_util.h"
#include "report/html_report.h"
#include "report/identities.h"
#include "report/leak_diff.h"
#include "report/ledger_table.h"
#include "report/report_model.h"
#include "report/suppressions.h"
#include "report/text_report.h"
#include "tools/attach.h"
#include "tools/child_runner.h"
#include "tools/locate.h"
#include "tools/process_tree.h"

namespace poolscope::tools {

using report::Bool;
using report::Count;
using report::ExecutableMismatch;
using report::FoldedStacks;
using report::HtmlComparePage;
using report::HtmlReport;
using report::HtmlTreeReport;
using report::kReportSchema;
using report::LeakDiffSection;
using report::LedgerTable;
using report::LoadReport;
using report::LostBlocks;
using report::OneLine;
using report::ParseSuppressionFormat;
using report::Percent;
using report::PrettyJson;
using report::Report;
using report::RunFacts;
using report::SuppressionFormat;
using report::Suppressions;
using report::TextReport;
using report::Thousands;
using report::Verdict;

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

constexpr char kRunUsage[] = R"(usage: poolscope run [--pool=on|off] [--options=K=V:...] [-o REPORT] [--lib=PATH] [--process=GLOB] [--no-children] -- CMD [ARGS...]

Runs CMD (through execvp, never a shell) with libpoolscope.so preloaded, then prints a short
summary of its report on stderr; CMD's own stdout and stderr are untouched. Every preloaded
descendant of CMD (through fork and exec) writes its own report next to it (REPORT.PID); when
there are any, the summary gives totals over the tree and a table of its processes.

flags:
  --pool=on|off       pooling on (default) or off (pool=1 / pool=0)
  --options=K=V:...   more POOLSCOPE_OPTIONS, appended (e.g. --options=pool_size=128:pools=8)
  -o, --output=PATH   the report file (default: a new temporary directory, named in the summary);
                      a report= key in --options does the same
  --lib=PATH          libpoolscope.so to preload (default: $POOLSCOPE_LIB, then next to poolscope,
                      then ../interpose/ beside it, then the Bazel runfiles tree)
  --process=GLOB      only the processes whose executable (path or base name) matches GLOB, in
                      the totals and the table (repeatable)
  --no-children       only the process poolscope started
  -h, --help          this text

environment given to CMD: LD_PRELOAD=<lib> before any existing entries, POOLSCOPE_OPTIONS
(any existing value first, then pool=, --options, report=), POOLSCOPE_ROOT_PID=<CMD's pid>.

exit status: CMD's exit status, 128+N when a signal N ended it; 127 when CMD was not found, 126
when it could not be executed; 2 for bad usage.
)";

constexpr char kCompareUsage[] = R"(usage: poolscope compare [--options=K=V:...] [--lib=PATH] [--report-dir=DIR] [--fail-on-leak] [--process=GLOB] [--no-children] [--html=FILE] [-- CMD [ARGS...]]

Runs CMD twice with libpoolscope.so preloaded, pooling off (pool=0) then on (pool=1), each with its
own report, and prints one table on stdout: logical and real allocations, real frees, real blocks
live at exit, what a malloc/free-counting leak detector would see, pool figures, wall time and
peak RSS, pooling off | on | change, then a verdict. Progress goes to stderr. With no CMD it runs
the bundled demo workload (threads opening confined arenas, plus a few deliberate leaks).

CMD's stdout is kept in DIR/off.stdout and DIR/on.stdout and shown once, the first run's, before
the table (with a note when the second run printed something else); its stderr is left alone.

When CMD starts other programs (a shell, make, a launcher script), each preloaded process writes
its report (DIR/off.json.PID, DIR/on.json.PID); the table then gives totals over the process tree,
followed by a table of its processes (the top 10 by logical allocations, the two runs' processes
matched by their place in the tree and their executable), and any without a report.

flags:
  --options=K=V:...   more POOLSCOPE_OPTIONS for both runs (not pool= or report=)
  --lib=PATH          libpoolscope.so to preload (found as for `run`)
  --report-dir=DIR    write the reports to DIR/off.json and DIR/on.json (default: a new
                      temporary directory); they stay there for `poolscope diff` and `report`
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

With two folders of reports (the reports of two runs' process trees), the table gives totals over
each tree and a table of their processes matched by place in the tree.

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

constexpr char kReportUsage[] = R"(usage: poolscope report [--format=text|html|folded|json] [--process=GLOB] [--no-children] R.json|FOLDER...

Renders a saved report on stdout. A folder of reports (files *.json and *.json.PID), or several
files, is one process tree: totals, a table of its processes by logical allocations, then each of
the top 10 rendered as one report (html: a section per process; folded: stacks under EXE [PID];
json: an array). Unreadable files among readable ones are named in warnings on stderr.

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
  --process=GLOB    only the processes whose executable matches GLOB (repeatable)
  --no-children     only the root process
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
// process trees

// How many processes the per-process tables show before one line for the rest.
constexpr size_t kProcessesShown = 10;

// The processes still running whose environment names `root_pid` as POOLSCOPE_ROOT_PID: the root's
// descendants that outlived it (their reports, if any, come after poolscope has read the folder).
std::vector<KnownProcess> StillRunning(int64_t root_pid) {
  std::vector<KnownProcess> out;
  const std::string needle = fmt::format("POOLSCOPE_ROOT_PID={}", root_pid);
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (struct dirent* entry = readdir(proc)) {
    std::string name = entry->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream environ_file("/proc/" + name + "/environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(environ_file)), std::istreambuf_iterator<char>());
    bool found = false;
    for (size_t at = 0; at < env.size();) {
      size_t end = env.find('\0', at);
      if (end == std::string::npos) end = env.size();
      if (env.compare(at, end - at, needle) == 0) found = true;
      at = end + 1;
    }
    if (!found) continue;
    KnownProcess p;
    p.pid = std::stoll(name);
    std::ifstream stat_file("/proc/" + name + "/stat");
    std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
    size_t close = stat.rfind(')');
    if (close != std::string::npos) {
      // "pid (comm) state ppid ..."
      char state = 0;
      long long ppid = 0;
      if (std::sscanf(stat.c_str() + close + 1, " %c %lld", &state, &ppid) == 2) {
        if (state == 'Z') continue;  // ended, not yet reaped: its report is written or never will be
        p.parent = ppid;
      }
    }
    char exe[PATH_MAX];
    ssize_t n = readlink(("/proc/" + name + "/exe").c_str(), exe, sizeof exe - 1);
    p.exe = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "";
    p.why = "still running when the root ended";
    out.push_back(std::move(p));
  }
  closedir(proc);
  return out;
}

// The files a report= template can have produced, the root's and its descendants' (`.PID`
// appended when the template has no %p): the entries of its folder that match it, with %p, %e and
// %t as wildcards.
std::vector<std::string> TemplateFiles(const std::string& report_template) {
  size_t slash = report_template.rfind('/');
  std::string folder = slash == std::string::npos ? "." : report_template.substr(0, slash);
  if (folder.empty()) folder = "/";
  std::string name = report_template.substr(slash == std::string::npos ? 0 : slash + 1);
  std::string pattern;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == '%' && i + 1 < name.size() && (name[i + 1] == 'p' || name[i + 1] == 'e' || name[i + 1] == 't')) {
      pattern += '*';
      ++i;
    } else if (c == '%' && i + 1 < name.size() && name[i + 1] == '%') {
      pattern += '%';
      ++i;
    } else if (c == '*' || c == '?' || c == '[' || c == '\\') {
      pattern += '\\';
      pattern += c;
    } else {
      pattern += c;
    }
  }
  std::vector<std::string> files;
  DIR* dir = opendir(folder.c_str());
  if (dir == nullptr) return files;
  while (struct dirent* entry = readdir(dir)) {
    std::string file = entry->d_name;
    if (file.find(".tmp.") != std::string::npos) continue;
    bool match = fnmatch(pattern.c_str(), file.c_str(), 0) == 0;
    size_t dot = file.rfind('.');
    if (!match && dot != std::string::npos && dot + 1 < file.size() &&
        file.find_first_not_of("0123456789", dot + 1) == std::string::npos) {
      match = fnmatch(pattern.c_str(), file.substr(0, dot).c_str(), 0) == 0;
    }
    if (match) files.push_back(folder + "/" + file);
  }
  closedir(dir);
  std::sort(files.begin(), files.end());
  return files;
}

// The processes of the tree of `root_pid` that left a start marker in `folder` (the library's
// ".poolscope-started.ROOT.PID", holding "PARENT EXE"); every such marker is removed. A process among
// them that wrote no report ended without one.
std::vector<KnownProcess> StartMarkers(const std::string& report_template, int64_t root_pid) {
  size_t slash = report_template.rfind('/');
  std::string folder = slash == std::string::npos ? "." : report_template.substr(0, slash);
  if (folder.empty()) folder = "/";
  const std::string prefix = fmt::format(".poolscope-started.{}.", root_pid);
  std::vector<KnownProcess> out;
  DIR* dir = opendir(folder.c_str());
  if (dir == nullptr) return out;
  while (struct dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string path = folder + "/" + name;
    std::ifstream file(path);
    KnownProcess p;
    p.pid = std::stoll(pid);
    long long parent = 0;
    if (file >> parent) p.parent = parent;
    std::getline(file >> std::ws, p.exe);
    p.why = "no report: it ended without writing one (killed by a signal other than SIGTERM, SIGINT "
            "or SIGHUP, or it exec'd a program the preload cannot reach)";
    out.push_back(std::move(p));
    unlink(path.c_str());
  }
  closedir(dir);
  std::sort(out.begin(), out.end(), [](const KnownProcess& a, const KnownProcess& b) { return a.pid < b.pid; });
  return out;
}

// Removes what an earlier run left at `report` and `report`.PID, for a path without `%`: a template
// with `%p`, `%e` or `%t` names each run's files apart (and a run reads only its own tree's).
void RemoveTreeReports(const std::string& report) {
  if (report.find('%') != std::string::npos) return;
  for (const std::string& file : TemplateFiles(report)) unlink(file.c_str());
}

// The files that could not be read, then each report whose identities do not hold (checked per
// report, as `poolscope check` does), its first broken identity named.
void PrintWarnings(const ProcessTree& tree, std::ostream& err) {
  for (const std::string& warning : tree.warnings) err << "poolscope: warning: " << warning << "\n";
  for (const TreeProcess& p : tree.processes) {
    if (p.doc.is_null()) continue;
    report::CheckResult result = report::CheckReport(p.doc);
    if (result.ok()) continue;
    err << fmt::format("poolscope: warning: {}: {}{}\n", OneLine(p.path),
                       result.broken.empty() ? std::string("identities broken") : OneLine(result.broken[0]),
                       result.broken.size() > 1 ? fmt::format(" (and {} more; poolscope check {})",
                                                              result.broken.size() - 1, ShellQuote(p.path))
                                                : std::string());
  }
}

std::string HowItEnded(const ChildResult& child) {
  return child.signal != 0 ? fmt::format("no report: killed by signal {} ({})", child.signal,
                                         OneLine(strsignal(child.signal)))
                           : "no report";
}

// A tree is shown as one when it holds anything but its root's report.
bool IsTree(const ProcessTree& tree) { return tree.processes.size() > 1; }

std::vector<size_t> Selection(const ProcessTree& tree, const std::vector<std::string>& globs,
                              bool root_only) {
  std::vector<size_t> selected = SelectProcesses(tree, globs, root_only);
  if (selected.empty()) {
    std::string what;
    for (const std::string& glob : globs) what += (what.empty() ? "" : ", ") + glob;
    throw CliError{"--process", fmt::format("no process of the tree matches {}", OneLine(what))};
  }
  return selected;
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


bool IsDirectory(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

// The tree of the reports that `operands` (folders of reports and report files) name. Nothing
// readable: a CliError naming the first file and its problem. Some readable: the others are named
// in warnings on `err`.
ProcessTree LoadTreeOperands(const std::vector<std::string>& operands, std::ostream& err) {
  std::vector<std::string> files;
  for (const std::string& operand : operands) {
    if (!IsDirectory(operand)) {
      files.push_back(operand);
      continue;
    }
    std::vector<std::string> in = ReportFilesIn(operand);
    if (in.empty()) {
      if (operands.size() == 1) throw CliError{operand, "no reports in this folder (files named *.json or *.json.PID)"};
      err << fmt::format("poolscope: warning: {}: no reports in this folder\n", OneLine(operand));
    }
    files.insert(files.end(), in.begin(), in.end());
  }
  ProcessTree tree = BuildTree(files, 0, "", {});
  if (tree.processes.empty()) {
    std::string first = tree.warnings.empty() ? "no reports" : tree.warnings[0];
    if (tree.warnings.size() > 1) first += fmt::format(" (and {} more unreadable)", tree.warnings.size() - 1);
    err.flush();
    throw CliError{first.substr(0, first.find(": ")), first.substr(first.find(": ") + 2)};
  }
  return tree;
}

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
  summary += "\n" + ProcessTable(tree, selected, kProcessesShown);
  if (format == "html") {
    std::vector<std::pair<const nlohmann::json*, std::string>> shown;
    for (size_t i : order) shown.push_back({&tree.processes[i].doc, tree.processes[i].path});
    return HtmlTreeReport(where.empty() ? "process tree" : "process tree of " + where, summary, shown);
  }
  std::string out = "poolscope report: " + summary;
  for (size_t i : order) {
    const TreeProcess& p = tree.processes[i];
    out += fmt::format("\n{}\npid {}: {}\n{}\n", std::string(100, '='), p.pid, OneLine(p.exe),
                       std::string(100, '='));
    out += TextReport(p.doc, p.path);
  }
  return out;
}

int Run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagParser flags(args, 2, "poolscope run");
  std::string pool = "on", options, output, lib, glob;
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
    if (flags.Value({"--process"}, &glob)) {
      globs.push_back(glob);
      continue;
    }
    if (flags.Switch({"--no-children"})) {
      no_children = true;
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
  if (report != "none") RemoveTreeReports(report);

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
  std::vector<KnownProcess> running;
  if (child.started && report != "none") {
    running = StillRunning(child.pid);
    for (KnownProcess& p : StartMarkers(report, child.pid)) running.push_back(std::move(p));
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
  ProcessTree tree = BuildTree(TemplateFiles(report), child.pid, HowItEnded(child), running);
  if (IsTree(tree) || !globs.empty() || no_children) {
    std::string folder = report.substr(0, report.rfind('/'));
    size_t reports = 0;
    for (const TreeProcess& p : tree.processes) reports += p.doc.is_null() ? 0 : 1;
    err << fmt::format("poolscope: {}; {} report{} of the process tree in {}{}\n", status, reports,
                       reports == 1 ? "" : "s", OneLine(folder), temporary ? " (temporary)" : "");
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
    err << fmt::format("poolscope: details: poolscope report {}\n", ShellQuote(folder));
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

// The comparison of two process trees: totals over the selected processes of each, then the
// per-process table, the processes matched by place.
// `--html=FILE` of compare and diff: the table as printed, then both runs' timelines on one chart. A
// file that cannot be written is an error (status 2), after the table on stdout.
void WriteComparePage(const std::string& path, const std::string& title, const std::string& table,
                      const nlohmann::json& before, const std::string& before_label,
                      const nlohmann::json& after, const std::string& after_label, std::ostream& err) {
  if (path.empty()) return;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << HtmlComparePage(title, table, before, before_label, after, after_label);
  f.close();
  if (!f) throw CliError{path, "cannot be written (--html)"};
  err << fmt::format("poolscope: comparison page written to {}\n", path);
}

// The report of a tree's root process, whose timeline a comparison page shows; null without one.
const nlohmann::json& RootDoc(const ProcessTree& tree) {
  static const nlohmann::json kNone;
  for (const TreeProcess& p : tree.processes) {
    if (p.is_root && !p.doc.is_null()) return p.doc;
  }
  return kNone;
}

int CompareTrees(const std::vector<std::string>& shown, const std::string& report_dir,
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
                         report_dir, i == 0 ? "off.json" : "on.json",
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
  out << fmt::format("reports: {}/off.json* ({} processes, pooling off), {}/on.json* ({} processes, "
                     "pooling on)\n",
                     report_dir, reports[0], report_dir, reports[1]);
  out << fmt::format("totals over {}\n\n",
                     no_children ? std::string("the root process only")
                     : which.empty() ? std::string("the whole process tree")
                                     : "the processes matching " + OneLine(which));
  RunFacts facts[2];
  facts[0].wall_seconds = off.wall_seconds;
  facts[1].wall_seconds = on.wall_seconds;
  const std::string table =
      LedgerTable(totals[0], facts[0], totals[1], facts[1], "pooling off", "pooling on") + "\n" +
      ProcessTableOfTwo(trees[0], selected[0], trees[1], selected[1], "off", "on", kProcessesShown);
  out << table;
  if (off.exit_status != 0) out << fmt::format("note: run 1 of 2, pooling off ended with status {}\n", off.exit_status);
  if (on.exit_status != 0) out << fmt::format("note: run 2 of 2, pooling on ended with status {}\n", on.exit_status);
  out.flush();
  WriteComparePage(html, "compare " + CommandLine(shown), table, RootDoc(trees[0]),
                   "pooling off (root process)", RootDoc(trees[1]), "pooling on (root process)", err);
  if (first_failure != 0) return first_failure;
  return fail_on_leak ? LeakExit(totals[0], totals[1], err) : kExitOk;
}

int Compare(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagParser flags(args, 2, "poolscope compare");
  std::string options, lib, report_dir, glob, html;
  std::vector<std::string> globs;
  bool fail_on_leak = false, no_children = false;
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
    if (flags.Value({"--process"}, &glob)) {
      globs.push_back(glob);
      continue;
    }
    if (flags.Switch({"--no-children"})) {
      no_children = true;
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
    std::vector<KnownProcess> running;
  };
  Side sides[2] = {
      {false, "run 1 of 2, pooling off", report_dir + "/off.json", report_dir + "/off.stdout", {}, {}, {}},
      {true, "run 2 of 2, pooling on", report_dir + "/on.json", report_dir + "/on.stdout", {}, {}, {}}};
  err << fmt::format("poolscope: comparing {}\n", CommandLine(shown));
  for (Side& side : sides) {
    RemoveTreeReports(side.report);
    Flush(out, err);
    side.child = RunChild({command, library, BuildOptions(side.pool_on, extra, side.report),
                           side.label, side.output});
    if (side.child.started) {
      side.running = StillRunning(side.child.pid);
      for (KnownProcess& p : StartMarkers(side.report, side.child.pid)) side.running.push_back(std::move(p));
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
    out << fmt::format("note: with pooling on the program printed something else: {}\n",
                       sides[1].output);
  }
  if (!printed[0].empty() || printed[1] != printed[0]) out << "\n";
  int first_failure = 0;
  for (const Side& side : sides) {
    if (first_failure == 0) first_failure = side.child.exit_status;
  }
  ProcessTree trees[2];
  for (int i = 0; i < 2; ++i) {
    trees[i] = BuildTree(TemplateFiles(sides[i].report), sides[i].child.pid,
                         HowItEnded(sides[i].child), sides[i].running);
  }
  if (IsTree(trees[0]) || IsTree(trees[1]) || !globs.empty() || no_children) {
    return CompareTrees(shown, report_dir, trees, sides[0].child, sides[1].child, globs,
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
  out << fmt::format("reports: {} (off), {} (on)\n\n", sides[0].report, sides[1].report);
  RunFacts facts[2];
  for (int i = 0; i < 2; ++i) {
    facts[i].wall_seconds = sides[i].child.wall_seconds;
    facts[i].peak_rss_kib = sides[i].child.peak_rss_kib;
  }
  const std::string table =
      LedgerTable(sides[0].loaded.doc, facts[0], sides[1].loaded.doc, facts[1], "pooling off", "pooling on");
  out << table;
  for (const Side& side : sides) {
    if (side.child.exit_status != 0) {
      out << fmt::format("note: {} ended with status {}\n", side.label, side.child.exit_status);
    }
  }
  out.flush();
  WriteComparePage(html, "compare " + CommandLine(shown), table, sides[0].loaded.doc, "pooling off",
                   sides[1].loaded.doc, "pooling on", err);
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
  std::string html;
  bool fail_on_leak = false;
  bool help = false;
  std::vector<std::string> globs;
  bool no_children = false;
  std::string glob;
  std::vector<std::string> files = ReportOperands(flags, kDiffUsage, &help, out, [&] {
    if (flags.Value({"--process"}, &glob)) {
      globs.push_back(glob);
      return true;
    }
    if (flags.Switch({"--no-children"})) {
      no_children = true;
      return true;
    }
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
    const std::string table =
        LedgerTable(totals[0], {}, totals[1], {}, label_a, label_b) + "\n" +
        ProcessTableOfTwo(trees[0], selected[0], trees[1], selected[1], "A", "B", kProcessesShown) + "\n" +
        LeakDiffSection(totals[0], totals[1], 20);
    out << table;
    out.flush();
    WriteComparePage(html, "diff " + OneLine(files[0]) + " " + OneLine(files[1]), table, RootDoc(trees[0]),
                     label_a + " (root process)", RootDoc(trees[1]), label_b + " (root process)", err);
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
  out << fmt::format("poolscope diff: A = {}, B = {}\n\n", OneLine(files[0]), OneLine(files[1]));
  const std::string table =
      LedgerTable(a.doc, {}, b.doc, {}, label_a, label_b) + "\n" + LeakDiffSection(a.doc, b.doc, 20);
  out << table;
  out.flush();
  WriteComparePage(html, "diff " + OneLine(files[0]) + " " + OneLine(files[1]), table, a.doc, label_a, b.doc,
                   label_b, err);
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

int ReportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagParser flags(args, 2, "poolscope report");
  std::string format = "text", glob;
  std::vector<std::string> globs;
  bool help = false, no_children = false;
  std::vector<std::string> files = ReportOperands(flags, kReportUsage, &help, out, [&] {
    if (flags.Value({"--process"}, &glob)) {
      globs.push_back(glob);
      return true;
    }
    if (flags.Switch({"--no-children"})) {
      no_children = true;
      return true;
    }
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
    out << TreeReport(tree, selected, files.size() == 1 ? files[0] : std::string(), format);
    return kExitOk;
  }
  const std::string& file = files[0];
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
