// File: tools/runs.cc
//
// See runs.h.
#include "tools/runs.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/report_model.h"
#include "tools/cli_common.h"
#include "tools/tree_reports.h"

namespace poolscope::tools {

using report::Count;
using report::OneLine;
using report::String;

namespace {

std::string BaseName(const std::string& path) { return path.substr(path.rfind('/') + 1); }

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool AllDigits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

// Whether `folder` holds `name`.PID: a descendant's report of the run whose root wrote `name`.
bool HoldsDescendantOf(const std::string& folder, const std::string& name) {
  DIR* dir = opendir(folder.c_str());
  if (dir == nullptr) return false;
  bool found = false;
  while (struct dirent* entry = readdir(dir)) {
    const std::string file = entry->d_name;
    if (file.size() > name.size() + 1 && file.compare(0, name.size(), name) == 0 && file[name.size()] == '.' &&
        AllDigits(file.substr(name.size() + 1))) {
      found = true;
      break;
    }
  }
  closedir(dir);
  return found;
}

// One run as the refusal names it: its root's executable, root pid and start time.
std::string DescribeRun(const std::string& key, const std::vector<const TreeProcess*>& processes) {
  if (key.empty()) {
    std::string pids;
    for (size_t i = 0; i < processes.size() && i < 3; ++i) {
      pids += fmt::format("{}{}", i == 0 ? "" : ", ", processes[i]->pid);
    }
    if (processes.size() > 3) pids += ", ...";
    return fmt::format("processes preloaded by hand (pid {})", pids);
  }
  const TreeProcess* root = processes.front();
  for (const TreeProcess* p : processes) {
    if (Count(p->doc, "process.root_pid") == p->pid) root = p;
  }
  const int64_t root_pid = Count(root->doc, "process.root_pid").value_or(root->pid);
  std::string when;
  if (std::optional<int64_t> start = Count(root->doc, "process.start_ns")) {
    const time_t seconds = static_cast<time_t>(*start / 1000000000);
    struct tm local;
    char text[16];
    if (localtime_r(&seconds, &local) != nullptr && strftime(text, sizeof text, "%H:%M:%S", &local) > 0) {
      when = std::string(", started ") + text;
    }
  }
  return fmt::format("{} (root pid {}{})", OneLine(BaseName(root->exe.empty() ? "?" : root->exe)), root_pid,
                     when);
}

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  remove(path);
  return 0;
}

}  // namespace

std::string RunFolderTemplate(const std::string& report) {
  const std::string name = BaseName(report);
  const std::string dir = DirName(report);
  constexpr std::string_view kJson = ".json";
  std::string stem = name;
  if (stem.size() > kJson.size() && stem.compare(stem.size() - kJson.size(), kJson.size(), kJson) == 0) {
    stem.resize(stem.size() - kJson.size());
  } else {
    stem += ".d";
  }
  return (dir == "/" ? "" : dir) + "/" + stem;
}

std::string RunKey(const nlohmann::json& doc) {
  if (std::optional<std::string> run = String(doc, "process.run")) return "run " + *run;
  if (std::optional<int64_t> root = Count(doc, "process.root_pid")) return fmt::format("root pid {}", *root);
  return "";
}

void PrepareRunFolder(const std::string& folder, const std::string& name, const std::string& flag) {
  struct stat info;
  if (stat(folder.c_str(), &info) != 0) return;
  if (!S_ISDIR(info.st_mode)) {
    throw CliError{flag, folder + ": not a directory (the folder of the run's reports)"};
  }
  for (const std::string& file : TemplateFiles(folder + "/" + name)) unlink(file.c_str());
}

bool LinkIntoRunFolder(const std::string& root_report, const std::string& folder) {
  mkdir(folder.c_str(), 0777);
  const std::string target = folder + "/" + BaseName(root_report);
  if (target == root_report) return true;
  unlink(target.c_str());
  if (link(root_report.c_str(), target.c_str()) == 0) return true;
  std::ifstream in(root_report, std::ios::binary);
  const int fd = open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (!in || fd < 0) {
    if (fd >= 0) close(fd);
    return false;
  }
  close(fd);
  std::ofstream out(target, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
  out.close();
  return static_cast<bool>(out);
}

void RefuseMixedRuns(const ProcessTree& tree, const std::string& where) {
  std::map<std::string, std::vector<const TreeProcess*>> runs;
  std::vector<std::string> order;  // by the first process of each run (the tree's order: start time)
  for (const TreeProcess& p : tree.processes) {
    if (p.doc.is_null()) continue;
    const std::string key = RunKey(p.doc);
    if (runs.count(key) == 0) order.push_back(key);
    runs[key].push_back(&p);
  }
  if (runs.size() <= 1) return;
  constexpr size_t kNamed = 6;
  std::string names;
  for (size_t i = 0; i < order.size() && i < kNamed; ++i) {
    names += (i == 0 ? "" : ", ") + DescribeRun(order[i], runs[order[i]]);
  }
  if (order.size() > kNamed) names += fmt::format(" and {} more", order.size() - kNamed);
  throw CliError{where, fmt::format("the reports of {} runs, which are never merged: {}; give the folder "
                                    "of one run",
                                    runs.size(), names)};
}

std::vector<std::string> RunFoldersIn(const std::string& folder) {
  std::vector<std::string> out;
  DIR* dir = opendir(folder.c_str());
  if (dir == nullptr) return out;
  while (struct dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = folder + (folder.back() == '/' ? "" : "/") + name;
    if (IsDirectory(path) && !ReportFilesIn(path).empty()) out.push_back(path);
  }
  closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

std::string TreeFolderOf(const std::string& file, const nlohmann::json& doc) {
  const std::optional<int64_t> root = Count(doc, "process.root_pid");
  if (!root || Count(doc, "process.pid") != *root) return "";
  const std::string name = BaseName(file);
  for (const std::string& folder : {DirName(file), RunFolderTemplate(file)}) {
    if (HoldsDescendantOf(folder, name)) return folder;
  }
  return "";
}

void RemoveTemporaryFolder(const std::string& dir) {
  if (dir.empty()) return;
  nftw(dir.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace poolscope::tools
