// File: tools/tree_reports.cc
//
// See tree_reports.h.
#include "tools/tree_reports.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

#include <dirent.h>
#include <fnmatch.h>
#include <unistd.h>

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/identities.h"
#include "report/ledger_table.h"
#include "report/report_model.h"
#include "tools/cli_common.h"
#include "tools/runs.h"

namespace poolscope::tools {

using report::Bool;
using report::Bytes;
using report::Count;
using report::LostBlocks;
using report::OneLine;
using report::Percent;
using report::ReachabilityBlocks;
using report::ReachabilityBytes;
using report::Thousands;
using report::Verdict;

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

std::vector<KnownProcess> StartMarkers(const std::string& folder, int64_t root_pid) {
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

void RemoveTreeReports(const std::string& report) {
  if (report.find('%') != std::string::npos) return;
  for (const std::string& file : TemplateFiles(report)) unlink(file.c_str());
}

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

std::string RunSummary(const nlohmann::json& doc) {
  std::string out;
  // First what the program loses, in memcheck's classes, when the report has them.
  if (Bool(doc, "reachability.scanned").value_or(false)) {
    auto blocks = [&](std::string_view kind) { return ReachabilityBlocks(doc, "reachability", kind); };
    auto figure = [&](std::string_view kind) {
      return fmt::format("{} ({})", Thousands(blocks(kind)), Bytes(ReachabilityBytes(doc, "reachability", kind)));
    };
    const std::optional<int64_t> lost = LostBlocks(doc);
    out += fmt::format(
        "poolscope: the program loses {} block{} at exit: definitely lost {}, indirectly lost {}; possibly "
        "lost {}; still reachable {}\n",
        Thousands(lost), lost == 1 ? "" : "s", figure("definitely_lost"), figure("indirectly_lost"),
        figure("possibly_lost"), figure("still_reachable"));
  }
  std::optional<int64_t> logical = Count(doc, "logical.allocs");
  std::optional<int64_t> hits = Count(doc, "pool.hits");
  out += fmt::format("poolscope: {} logical allocations, {} real; {} served from pools ({}); {} "
                     "real blocks live at exit\n",
                     Thousands(logical), Thousands(Count(doc, "real.allocs")), Thousands(hits),
                     Percent(hits, logical), Thousands(Count(doc, "real.live_blocks")));
  out += fmt::format(
      "poolscope: detector view: {} unfreed blocks = {} outside pools + {} pool blocks + {} "
      "internal\n",
      Thousands(Count(doc, "reconciliation.detector_view.unfreed_blocks")),
      Thousands(Count(doc, "reconciliation.detector_view.program_leak_blocks")),
      Thousands(Count(doc, "reconciliation.detector_view.pool_blocks")),
      Thousands(Count(doc, "reconciliation.detector_view.internal_blocks")));
  out += fmt::format("poolscope: {}\n", Verdict(nlohmann::json::object(), doc));
  return out;
}

ProcessTree LoadTreeOperands(const std::vector<std::string>& operands, std::ostream& err) {
  std::vector<std::string> files;
  for (const std::string& operand : operands) {
    if (!IsDirectory(operand)) {
      files.push_back(operand);
      continue;
    }
    std::vector<std::string> in = ReportFilesIn(operand);
    if (in.empty()) {
      // A folder of runs' folders (compare's): each is a run of its own, never merged with the others.
      const std::vector<std::string> runs = RunFoldersIn(operand);
      if (!runs.empty()) {
        std::string names;
        for (const std::string& run : runs) names += (names.empty() ? "" : ", ") + OneLine(run);
        throw CliError{operand, fmt::format("no reports here, but {} folder{} of runs' reports, which are "
                                            "never merged: {}; give one of them",
                                            runs.size(), runs.size() == 1 ? "" : "s", names)};
      }
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
  std::string where;
  for (const std::string& operand : operands) where += (where.empty() ? "" : " ") + operand;
  RefuseMixedRuns(tree, where);
  return tree;
}

}  // namespace poolscope::tools
