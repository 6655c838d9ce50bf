// File: tools/cli_common.cc
//
// See cli_common.h.
#include "tools/cli_common.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <sys/stat.h>
#include <unistd.h>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "report/format_util.h"
#include "tools/locate.h"

namespace poolscope::tools {

using report::LoadReport;
using report::OneLine;
using report::Report;

bool IsHelp(const std::string& arg) { return arg == "-h" || arg == "--help"; }

bool ProcessFlags(FlagParser& flags, std::vector<std::string>* globs, bool* no_children) {
  std::string glob;
  if (flags.Value({"--process"}, &glob)) {
    globs->push_back(glob);
    return true;
  }
  if (flags.Switch({"--no-children"})) {
    *no_children = true;
    return true;
  }
  return false;
}

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

void EnsureWritableDirectory(const std::string& dir, const std::string& what) {
  if (dir.empty()) return;
  struct stat info;
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at != dir.size() && dir[at] != '/') continue;
    const std::string prefix = dir.substr(0, at);
    if (stat(prefix.c_str(), &info) == 0) {
      if (!S_ISDIR(info.st_mode)) throw CliError{what, prefix + ": not a directory"};
      continue;
    }
    if (mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST) {
      throw CliError{what, fmt::format("{}: cannot be created: {}", prefix, std::strerror(errno))};
    }
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    throw CliError{what, fmt::format("{}: reports cannot be written there: {}", dir, std::strerror(errno))};
  }
}

std::string MakeTempDirectory(std::string_view prefix) {
  const char* tmp = getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" +
                        std::string(prefix) + ".XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) {
    throw CliError{pattern, fmt::format("cannot create a temporary directory: {}",
                                        std::strerror(errno))};
  }
  return buffer.data();
}

std::string CheckOptions(const std::string& options, std::string* report,
                         std::initializer_list<const char*> forbidden,
                         std::string_view forbidden_hint) {
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
        throw CliError{"--options", fmt::format("{}= is set by this command{}", key, forbidden_hint)};
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

bool IsDirectory(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
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

}  // namespace poolscope::tools
