// File: tools/commands.h
//
// The `poolscope` command line: the subcommands run, compare, diff, report, suppressions and check,
// their flags, help texts and exit statuses (docs/cli.md). Every
// error ends in exactly one line on stderr, `poolscope: SUBJECT: problem`, and exit status 2; no
// exception escapes Main.
//
// Thread-safety: Main forks (run, compare); call it from a single-threaded process.
#ifndef POOLSCOPE_TOOLS_COMMANDS_H_
#define POOLSCOPE_TOOLS_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

namespace poolscope::tools {

// Exit statuses of every subcommand but `run` (which passes the program's on).
inline constexpr int kExitOk = 0;
// A difference the caller asked to fail on (--fail-on-leak), or a report `check` finds broken.
inline constexpr int kExitDifference = 1;
inline constexpr int kExitUsage = 2;       // bad usage or unreadable input

// Runs the command line `args` (args[0] is the program name). Normal output goes to `out`,
// diagnostics and progress to `err`.
int Main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_COMMANDS_H_
