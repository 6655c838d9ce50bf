// File: tools/commands.cc
//
// See commands.h. Main hands the command line to the subcommand it names (subcommands.h: one file
// per group, each parsing its own flags with cli_common.h's FlagParser). Errors travel as a
// CliError up to Main, which prints the one line and returns 2.
#include "tools/commands.h"

#include <exception>

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/report_model.h"
#include "tools/attach.h"
#include "tools/cli_common.h"
#include "tools/subcommands.h"

namespace poolscope::tools {

using report::kReportSchema;
using report::OneLine;

namespace {

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
  if (command == "run") return RunCommand(args, out, err);
  if (command == "attach") return AttachCommand(args, out, err);
  if (command == "compare") return CompareCommand(args, out, err);
  if (command == "diff") return DiffCommand(args, out, err);
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
