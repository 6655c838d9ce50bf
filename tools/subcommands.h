// File: tools/subcommands.h
//
// The subcommands of the `poolscope` command, each called by Main with the whole command line
// (args[0] the program name, args[1] the subcommand). Each returns its exit status (commands.h) and
// throws CliError (cli_common.h) for bad usage and unreadable input.
//
// Thread-safety: RunCommand and CompareCommand fork; call them from a single-threaded process.
#ifndef POOLSCOPE_TOOLS_SUBCOMMANDS_H_
#define POOLSCOPE_TOOLS_SUBCOMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

namespace poolscope::tools {

// `run` (run_command.cc).
int RunCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// `compare` and `diff` (compare_commands.cc).
int CompareCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int DiffCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// `report`, `suppressions` and `check` (report_commands.cc).
int ReportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int SuppressionsCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int CheckCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_SUBCOMMANDS_H_
