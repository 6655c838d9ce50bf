// File: tools/process_tree.cc
//
// See process_tree.h.
#include "tools/process_tree.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include <dirent.h>
#include <fnmatch.h>
#include <sys/stat.h>

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/ledger_table.h"
#include "report/report_model.h"

namespace poolscope::tools {

using report::Bool;
using report::Count;
using report::Find;
using report::LoadReport;
using report::LostBlocks;
using report::OneLine;
using report::Report;
using report::String;
using report::Thousands;

namespace {

using nlohmann::json;

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool AllDigits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

int64_t StartNs(const TreeProcess& p) {
  return p.doc.is_null() ? INT64_MAX : Count(p.doc, "process.start_ns").value_or(INT64_MAX);
}

// Adds `from` into `into`: integers add, objects merge key by key, equal strings and booleans stay
// (booleans: false wins), anything else that differs or does not add up goes.
void AddInto(json& into, const json& from) {
  if (into.is_object() && from.is_object()) {
    for (auto it = into.begin(); it != into.end();) {
      if (!from.contains(it.key())) {
        it = into.erase(it);
      } else {
        AddInto(*it, from[it.key()]);
        if (it->is_discarded()) {
          it = into.erase(it);
        } else {
          ++it;
        }
      }
    }
    return;
  }
  if (into.is_number_integer() && from.is_number_integer()) {
    into = into.get<int64_t>() + from.get<int64_t>();
    return;
  }
  if (into.is_boolean() && from.is_boolean()) {
    into = into.get<bool>() && from.get<bool>();
    return;
  }
  if (into.is_null() && from.is_null()) return;
  if (into.is_string() && from.is_string() && into == from) return;
  into = json(json::value_t::discarded);
}

constexpr const char* kSummed[] = {"logical",      "real",       "internal", "pool",
                                   "reconciliation", "reachability", "leak_check", "errors"};

// Drops what a sum cannot carry: lists, floats, and the verdict sentence.
void DropUnsummable(json& node) {
  if (!node.is_object()) return;
  for (auto it = node.begin(); it != node.end();) {
    if (it->is_array() || it->is_number_float() || it.key() == "verdict") {
      it = node.erase(it);
    } else {
      DropUnsummable(*it);
      ++it;
    }
  }
}

std::string Cell(const TreeProcess* p, std::string_view path) {
  if (p == nullptr || p->doc.is_null()) return "-";
  return Thousands(Count(p->doc, path));
}

std::string LostCell(const TreeProcess* p) {
  if (p == nullptr || p->doc.is_null()) return "-";
  return Thousands(LostBlocks(p->doc));
}

// A table with right-aligned columns, the third (executable) left-aligned.
std::string Render(const std::vector<std::vector<std::string>>& rows, size_t left_column) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = " ";
    for (size_t i = 0; i < row.size(); ++i) {
      if (i == left_column) {
        line += fmt::format(" {:<{}}", row[i], width[i]);
      } else {
        line += fmt::format(" {:>{}}", row[i], width[i]);
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

// The executable, "(root)" after the root's, and how a report not written at exit came about: a
// signal's name ("[killed by SIGTERM]"), or "[snapshot]" for a process that wrote only snapshots.
std::string Executable(const TreeProcess& p) {
  std::string name = p.exe.empty() ? std::string("?") : OneLine(p.exe);
  if (p.is_root) name += " (root)";
  std::string reason = p.doc.is_null() ? "" : String(p.doc, "process.reason").value_or("");
  if (reason == "signal") {
    name += " [killed by " + OneLine(String(p.doc, "process.signal").value_or("a signal")) + "]";
  } else if (reason == "snapshot") {
    name += " [snapshot]";
  }
  return name;
}

std::string MissingLines(const ProcessTree& tree, const std::vector<size_t>& selected) {
  std::string out;
  for (size_t i : selected) {
    const TreeProcess& p = tree.processes[i];
    if (p.missing.empty()) continue;
    out += fmt::format("  pid {}{}: {}: {}\n", p.pid,
                       p.parent != 0 ? fmt::format(" (parent {})", p.parent) : std::string(),
                       p.exe.empty() ? std::string("?") : OneLine(p.exe), p.missing);
  }
  return out;
}

}  // namespace

std::vector<std::string> ReportFilesIn(const std::string& folder) {
  std::vector<std::string> files;
  DIR* dir = opendir(folder.c_str());
  if (dir == nullptr) return files;
  while (struct dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    size_t at = name.rfind(".json");
    if (at == std::string::npos) continue;
    std::string tail = name.substr(at + 5);
    if (!tail.empty() && !(tail[0] == '.' && AllDigits(tail.substr(1)))) continue;
    std::string path = folder + (folder.back() == '/' ? "" : "/") + name;
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    files.push_back(path);
  }
  closedir(dir);
  std::sort(files.begin(), files.end());
  return files;
}

ProcessTree BuildTree(const std::vector<std::string>& files, int64_t root_pid,
                      const std::string& root_missing, const std::vector<KnownProcess>& known,
                      const std::string& run) {
  ProcessTree tree;
  std::vector<TreeProcess> found;
  for (const std::string& file : files) {
    absl::StatusOr<Report> report = LoadReport(file);
    if (!report.ok()) {
      tree.warnings.push_back(
          fmt::format("{}: {}", OneLine(file), OneLine(std::string(report.status().message()))));
      continue;
    }
    TreeProcess p;
    p.pid = Count(report->doc, "process.pid").value_or(0);
    std::optional<int64_t> root = Count(report->doc, "process.root_pid");
    if (root_pid > 0 && p.pid != root_pid && root.value_or(0) != root_pid) continue;
    if (!run.empty() && String(report->doc, "process.run").value_or(run) != run) continue;
    p.parent = Count(report->doc, "process.parent_pid").value_or(0);
    if (p.parent == 0 && !(root && *root == p.pid)) {
      // A report written without poolscope's command, or before parent_pid existed.
      p.parent = Count(report->doc, "process.ppid").value_or(0);
    }
    p.exe = String(report->doc, "process.exe").value_or("");
    p.path = file;
    p.doc = std::move(report->doc);
    found.push_back(std::move(p));
  }
  // One entry per pid: a process that wrote several reports (snapshots, then its exit report) counts
  // once, by its latest report.
  std::map<int64_t, size_t> by_pid;
  for (TreeProcess& p : found) {
    auto it = by_pid.find(p.pid);
    if (it == by_pid.end()) {
      by_pid[p.pid] = tree.processes.size();
      tree.processes.push_back(std::move(p));
    } else {
      TreeProcess& kept = tree.processes[it->second];
      int64_t kept_end = Count(kept.doc, "process.end_ns").value_or(0);
      if (Count(p.doc, "process.end_ns").value_or(0) > kept_end) kept = std::move(p);
    }
  }
  if (root_pid > 0 && by_pid.count(root_pid) == 0) {
    TreeProcess root;
    root.pid = root_pid;
    root.missing = root_missing.empty() ? "no report" : root_missing;
    by_pid[root_pid] = tree.processes.size();
    tree.processes.push_back(std::move(root));
  }
  for (const KnownProcess& k : known) {
    if (by_pid.count(k.pid) != 0) continue;
    TreeProcess p;
    p.pid = k.pid;
    p.parent = k.parent;
    p.exe = k.exe;
    p.missing = k.why;
    by_pid[k.pid] = tree.processes.size();
    tree.processes.push_back(std::move(p));
  }
  // A parent named by a report under the root that wrote none itself (it died from a signal, or
  // exec'd a program the preload cannot reach, before its child's report was written).
  if (root_pid > 0) {
    int64_t poolscope_pid = 0;
    for (const TreeProcess& p : tree.processes) {
      if (p.pid == root_pid && !p.doc.is_null()) poolscope_pid = Count(p.doc, "process.ppid").value_or(0);
    }
    std::vector<TreeProcess> added;
    for (const TreeProcess& p : tree.processes) {
      if (p.pid == root_pid || p.parent <= 1 || p.parent == poolscope_pid) continue;
      if (by_pid.count(p.parent) != 0) continue;
      TreeProcess parent;
      parent.pid = p.parent;
      parent.parent = root_pid;
      parent.missing = "no report (a process under the root that started others)";
      by_pid[p.parent] = tree.processes.size() + added.size();
      added.push_back(std::move(parent));
    }
    for (TreeProcess& p : added) tree.processes.push_back(std::move(p));
  }
  // The root first, then by start time.
  std::stable_sort(tree.processes.begin(), tree.processes.end(),
                   [&](const TreeProcess& a, const TreeProcess& b) {
                     bool ra = root_pid > 0 && a.pid == root_pid, rb = root_pid > 0 && b.pid == root_pid;
                     if (ra != rb) return ra;
                     return StartNs(a) < StartNs(b);
                   });
  by_pid.clear();
  for (size_t i = 0; i < tree.processes.size(); ++i) by_pid[tree.processes[i].pid] = i;
  // Links. Without a given root, the tops are the processes whose parent is not in the tree; one
  // that is the root_pid its reports name is the root.
  std::vector<size_t> tops;
  for (size_t i = 0; i < tree.processes.size(); ++i) {
    TreeProcess& p = tree.processes[i];
    p.is_root = root_pid > 0 ? p.pid == root_pid
                             : (!p.doc.is_null() && Count(p.doc, "process.root_pid") == p.pid);
    auto parent = by_pid.find(p.parent);
    if (p.is_root || p.parent == p.pid || parent == by_pid.end()) {
      if (root_pid > 0 && !p.is_root) {
        // Under a known root, a process whose parent is outside the tree (reparented when its parent
        // ended) hangs off the root.
        p.parent = root_pid;
        tree.processes[by_pid[root_pid]].children.push_back(i);
      } else {
        if (parent == by_pid.end()) p.parent = 0;
        tops.push_back(i);
      }
      continue;
    }
    parent->second == i ? tops.push_back(i) : tree.processes[parent->second].children.push_back(i);
  }
  // Places: the base names along the path with each step's rank among same-named siblings.
  std::function<void(size_t, const std::string&)> place = [&](size_t i, const std::string& prefix) {
    TreeProcess& p = tree.processes[i];
    p.place = prefix;
    std::map<std::string, int> seen;
    for (size_t c : p.children) {
      std::string name = BaseName(tree.processes[c].exe);
      place(c, fmt::format("{}/{}#{}", prefix, name, seen[name]++));
    }
  };
  std::map<std::string, int> seen;
  for (size_t t : tops) {
    std::string name = BaseName(tree.processes[t].exe);
    place(t, fmt::format("{}#{}", name, seen[name]++));
  }
  return tree;
}

std::vector<size_t> SelectProcesses(const ProcessTree& tree, const std::vector<std::string>& globs,
                                    bool root_only) {
  std::vector<size_t> out;
  for (size_t i = 0; i < tree.processes.size(); ++i) {
    const TreeProcess& p = tree.processes[i];
    if (root_only && !p.is_root) continue;
    bool match = globs.empty();
    for (const std::string& glob : globs) {
      if (fnmatch(glob.c_str(), p.exe.c_str(), 0) == 0 ||
          fnmatch(glob.c_str(), BaseName(p.exe).c_str(), 0) == 0) {
        match = true;
      }
    }
    if (match) out.push_back(i);
  }
  return out;
}

nlohmann::json TreeTotals(const ProcessTree& tree, const std::vector<size_t>& selected) {
  std::vector<const TreeProcess*> reports;
  for (size_t i : selected) {
    if (!tree.processes[i].doc.is_null()) reports.push_back(&tree.processes[i]);
  }
  if (reports.empty()) return json::object();
  if (reports.size() == 1) return reports[0]->doc;
  json total = json::object();
  total["schema"] = reports[0]->doc["schema"];
  const TreeProcess* root = reports[0];
  for (const TreeProcess* p : reports) {
    if (p->is_root) root = p;
  }
  total["process"] = root->doc["process"];
  for (const char* section : kSummed) {
    bool everywhere = true;
    for (const TreeProcess* p : reports) everywhere = everywhere && p->doc.contains(section);
    if (!everywhere) continue;
    json sum = reports[0]->doc[section];
    DropUnsummable(sum);
    for (size_t k = 1; k < reports.size(); ++k) {
      AddInto(sum, reports[k]->doc[section]);
      if (sum.is_discarded()) break;
    }
    if (!sum.is_discarded()) total[section] = std::move(sum);
  }
  // Every process's leak groups, for a diff by stack (groups of one stack add up there).
  json leaks = json::array();
  bool tracked = true;
  int64_t omitted = 0;
  for (const TreeProcess* p : reports) {
    if (const json* groups = Find(p->doc, "leaks"); groups != nullptr && groups->is_array()) {
      for (const json& group : *groups) leaks.push_back(group);
    }
    tracked = tracked && Bool(p->doc, "tracked").value_or(true);
    omitted += Count(p->doc, "leak_groups_omitted").value_or(0);
  }
  total["leaks"] = std::move(leaks);
  total["tracked"] = tracked;
  total["leak_groups_omitted"] = omitted;
  // Peak RSS does not add up as counts do: the largest process's (with its own memory of
  // poolscope's, the same scope), and the sum over the processes (with theirs), both labelled.
  const TreeProcess* largest = nullptr;
  int64_t rss_sum = 0;
  bool rss_everywhere = true;
  for (const TreeProcess* p : reports) {
    const std::optional<int64_t> rss = Count(p->doc, "process.max_rss_kib");
    rss_everywhere = rss_everywhere && rss.has_value();
    rss_sum += rss.value_or(0);
    if (rss && (largest == nullptr || *rss > Count(largest->doc, "process.max_rss_kib").value_or(0))) largest = p;
  }
  if (rss_everywhere && largest != nullptr) {
    json tree = json::object();
    tree["processes"] = static_cast<int64_t>(reports.size());
    tree["largest_exe"] = largest->exe;
    tree["largest_max_rss_kib"] = *Count(largest->doc, "process.max_rss_kib");
    if (std::optional<int64_t> own = Count(largest->doc, "internal.peak_resident_bytes")) {
      tree["largest_peak_resident_bytes"] = *own;
    }
    tree["sum_max_rss_kib"] = rss_sum;
    total["tree"] = std::move(tree);
  }
  return total;
}

std::vector<size_t> ByLogicalAllocations(const ProcessTree& tree, const std::vector<size_t>& selected) {
  std::vector<size_t> out;
  for (size_t i : selected) {
    if (!tree.processes[i].doc.is_null()) out.push_back(i);
  }
  std::stable_sort(out.begin(), out.end(), [&](size_t a, size_t b) {
    int64_t la = Count(tree.processes[a].doc, "logical.allocs").value_or(0);
    int64_t lb = Count(tree.processes[b].doc, "logical.allocs").value_or(0);
    if (la != lb) return la > lb;
    return tree.processes[a].pid < tree.processes[b].pid;
  });
  return out;
}

std::string TextOf(const report::CellTable& table) {
  return table.caption + "\n" + Render(table.rows, table.text_column) + table.after;
}

std::string ProcessTable(const ProcessTree& tree, const std::vector<size_t>& selected, size_t limit) {
  return TextOf(ProcessTableCells(tree, selected, limit));
}

report::CellTable ProcessTableCells(const ProcessTree& tree, const std::vector<size_t>& selected, size_t limit) {
  std::vector<size_t> order = ByLogicalAllocations(tree, selected);
  std::vector<std::vector<std::string>> rows = {
      {"pid", "parent", "executable", "logical allocs", "real allocs", "pool hits", "live at exit",
       "lost blocks"}};
  auto row = [](const TreeProcess& p) {
    return std::vector<std::string>{std::to_string(p.pid),
                                    p.parent != 0 ? std::to_string(p.parent) : "-",
                                    Executable(p),
                                    Cell(&p, "logical.allocs"),
                                    Cell(&p, "real.allocs"),
                                    Cell(&p, "pool.hits"),
                                    Cell(&p, "logical.live_blocks"),
                                    LostCell(&p)};
  };
  int64_t rest[5] = {0, 0, 0, 0, 0};
  size_t rest_count = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const TreeProcess& p = tree.processes[order[k]];
    if (k < limit) {
      rows.push_back(row(p));
      continue;
    }
    ++rest_count;
    rest[0] += Count(p.doc, "logical.allocs").value_or(0);
    rest[1] += Count(p.doc, "real.allocs").value_or(0);
    rest[2] += Count(p.doc, "pool.hits").value_or(0);
    rest[3] += Count(p.doc, "logical.live_blocks").value_or(0);
    rest[4] += LostBlocks(p.doc).value_or(0);
  }
  if (rest_count > 0) {
    rows.push_back({"", "", fmt::format("{} more processes", rest_count), Thousands(rest[0]),
                    Thousands(rest[1]), Thousands(rest[2]), Thousands(rest[3]), Thousands(rest[4])});
  }
  report::CellTable table;
  table.caption = fmt::format("processes: {} with a report, by logical allocations", order.size());
  table.rows = std::move(rows);
  table.text_column = 2;
  std::string missing = MissingLines(tree, selected);
  if (!missing.empty()) table.after = "without a report:\n" + missing;
  return table;
}

std::string ProcessTableOfTwo(const ProcessTree& a, const std::vector<size_t>& selected_a,
                              const ProcessTree& b, const std::vector<size_t>& selected_b,
                              const std::string& label_a, const std::string& label_b, size_t limit) {
  return TextOf(ProcessTableOfTwoCells(a, selected_a, b, selected_b, label_a, label_b, limit));
}

report::CellTable ProcessTableOfTwoCells(const ProcessTree& a, const std::vector<size_t>& selected_a,
                                         const ProcessTree& b, const std::vector<size_t>& selected_b,
                                         const std::string& label_a, const std::string& label_b, size_t limit) {
  // Pair by place; a place only one side has gets a row of its own.
  struct Pair {
    const TreeProcess* a = nullptr;
    const TreeProcess* b = nullptr;
  };
  std::vector<Pair> pairs;
  std::map<std::string, size_t> at;
  for (size_t i : selected_b) {
    if (b.processes[i].doc.is_null()) continue;
    at[b.processes[i].place] = pairs.size();
    pairs.push_back({nullptr, &b.processes[i]});
  }
  for (size_t i : selected_a) {
    if (a.processes[i].doc.is_null()) continue;
    auto it = at.find(a.processes[i].place);
    if (it != at.end() && pairs[it->second].a == nullptr) {
      pairs[it->second].a = &a.processes[i];
    } else {
      pairs.push_back({&a.processes[i], nullptr});
    }
  }
  auto logical = [](const Pair& p) {
    return std::max(p.a ? Count(p.a->doc, "logical.allocs").value_or(0) : 0,
                    p.b ? Count(p.b->doc, "logical.allocs").value_or(0) : 0);
  };
  std::stable_sort(pairs.begin(), pairs.end(),
                   [&](const Pair& x, const Pair& y) { return logical(x) > logical(y); });
  std::vector<std::vector<std::string>> rows = {
      {"pid", "parent", "executable", "logical " + label_a, "logical " + label_b,
       "real " + label_a, "real " + label_b, "pool hits " + label_b, "live " + label_b,
       "lost " + label_b}};
  int64_t rest[7] = {0, 0, 0, 0, 0, 0, 0};
  size_t rest_count = 0;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const Pair& p = pairs[k];
    const TreeProcess& shown = p.b ? *p.b : *p.a;
    if (k < limit) {
      std::string exe = Executable(shown) + (p.a == nullptr   ? fmt::format(" (only {})", label_b)
                                             : p.b == nullptr ? fmt::format(" (only {})", label_a)
                                                              : std::string());
      rows.push_back({std::to_string(shown.pid), shown.parent != 0 ? std::to_string(shown.parent) : "-",
                      exe, Cell(p.a, "logical.allocs"), Cell(p.b, "logical.allocs"),
                      Cell(p.a, "real.allocs"), Cell(p.b, "real.allocs"), Cell(p.b, "pool.hits"),
                      Cell(p.b, "logical.live_blocks"), LostCell(p.b)});
      continue;
    }
    ++rest_count;
    auto add = [](int64_t& into, const TreeProcess* t, std::string_view path) {
      if (t != nullptr) into += Count(t->doc, path).value_or(0);
    };
    add(rest[0], p.a, "logical.allocs");
    add(rest[1], p.b, "logical.allocs");
    add(rest[2], p.a, "real.allocs");
    add(rest[3], p.b, "real.allocs");
    add(rest[4], p.b, "pool.hits");
    add(rest[5], p.b, "logical.live_blocks");
    if (p.b != nullptr) rest[6] += LostBlocks(p.b->doc).value_or(0);
  }
  if (rest_count > 0) {
    std::vector<std::string> row = {"", "", fmt::format("{} more processes", rest_count)};
    for (int64_t v : rest) row.push_back(Thousands(v));
    rows.push_back(row);
  }
  report::CellTable table;
  table.caption = fmt::format("processes: {} places, matched by place in the tree, by logical allocations",
                              pairs.size());
  table.rows = std::move(rows);
  table.text_column = 2;
  std::string missing_a = MissingLines(a, selected_a), missing_b = MissingLines(b, selected_b);
  if (!missing_a.empty()) table.after += fmt::format("without a report ({}):\n{}", label_a, missing_a);
  if (!missing_b.empty()) table.after += fmt::format("without a report ({}):\n{}", label_b, missing_b);
  return table;
}

}  // namespace poolscope::tools
