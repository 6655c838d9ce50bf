// File: tools/cli_common.h
//
// What the subcommands of the `poolscope` command share: CliError, the one error every subcommand
// throws up to Main (printed as "poolscope: SUBJECT: PROBLEM", exit status 2), the flag parser
// (flags and operands may be mixed; `--` ends the flags), and the helpers for paths, temporary
// folders, POOLSCOPE_OPTIONS and loading a report.
//
// Thread-safety: FlagParser is a value over its arguments; the rest are functions of their
// arguments and the environment.
#ifndef POOLSCOPE_TOOLS_CLI_COMMON_H_
#define POOLSCOPE_TOOLS_CLI_COMMON_H_

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "report/report_model.h"

namespace poolscope::tools {

// One error: printed as "poolscope: SUBJECT: PROBLEM".
struct CliError {
  std::string subject;
  std::string problem;
};

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

bool IsHelp(const std::string& arg);

// Takes --process=GLOB (repeatable: *globs) or --no-children (*no_children) at the current
// argument of `flags`; says whether it did.
bool ProcessFlags(FlagParser& flags, std::vector<std::string>* globs, bool* no_children);

// The report at `path`, validated; a CliError naming the path and the problem otherwise.
report::Report Load(const std::string& path);

// `arg` as a shell word: unchanged when it needs no quoting, else in single quotes.
std::string ShellQuote(const std::string& arg);

// The command line `argv` as a shell would take it back, on one line.
std::string CommandLine(const std::vector<std::string>& argv);

// `path` made absolute against the working directory (unchanged when it cannot be read).
std::string AbsolutePath(const std::string& path);

// Makes `dir` and any missing parent (as mkdir -p), and checks that files can be made in it: a
// CliError naming `what` (the flag) when not. Called before a program starts, so that its run is not
// lost to a report that cannot be written.
void EnsureWritableDirectory(const std::string& dir, const std::string& what);

// A new directory $TMPDIR/PREFIX.XXXXXX (/tmp without TMPDIR); a CliError when it cannot be made.
std::string MakeTempDirectory(std::string_view prefix);

// The options from --options: checked for key=value syntax; a report= key is taken out into
// *report (the last one wins) and keys in `forbidden` are refused ("KEY= is set by this command",
// then `forbidden_hint`). Returns the remaining entries joined by ':'.
std::string CheckOptions(const std::string& options, std::string* report,
                         std::initializer_list<const char*> forbidden,
                         std::string_view forbidden_hint = "");

// POOLSCOPE_OPTIONS for the child: the caller's own value first, then ours (later keys win).
std::string BuildOptions(bool pool_on, const std::string& extra, const std::string& report);

// libpoolscope.so: `explicit_path` (--lib), else $POOLSCOPE_LIB, else next to `argv0` or in its
// runfiles; a CliError naming where it looked when there is none.
std::string FindLibrary(const std::string& explicit_path, const std::string& argv0);

// Flushes `out`, `err` and the standard streams (before a child writes to the same descriptors).
void Flush(std::ostream& out, std::ostream& err);

bool IsDirectory(const std::string& path);

// The report operands of diff, report, suppressions and check, with flags in any order (`--` ends
// the flags). `flag` takes the subcommand's own flag at the current argument and says whether it
// did. -h/--help prints `usage` and sets *help.
std::vector<std::string> ReportOperands(FlagParser& flags, const char* usage, bool* help,
                                        std::ostream& out, const std::function<bool()>& flag);

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_CLI_COMMON_H_
