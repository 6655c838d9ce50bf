// File: report/leak_diff.cc
#include "report/leak_diff.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "fmt/format.h"
#include "report/format_util.h"

namespace poolscope::report {
namespace {

using nlohmann::json;

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Text(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t Integer(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

const json* Leaks(const json& report) {
  auto it = report.find("leaks");
  return it != report.end() && it->is_array() ? &*it : nullptr;
}

// Exact figures: a change of a few bytes must not round away.
std::string Signed(int64_t value) {
  return (value > 0 ? "+" : value < 0 ? "-" : "") + Thousands(std::llabs(value));
}

}  // namespace

std::string ExecutableMismatch(const json& a, const json& b) {
  const json* pa = a.contains("process") && a["process"].is_object() ? &a["process"] : nullptr;
  const json* pb = b.contains("process") && b["process"].is_object() ? &b["process"] : nullptr;
  if (pa == nullptr || pb == nullptr) return "";
  std::string exe_a = Text(*pa, "exe"), exe_b = Text(*pb, "exe");
  if (exe_a.empty() || exe_b.empty() || BaseName(exe_a) == BaseName(exe_b)) return "";
  return fmt::format(
      "poolscope: diff: warning: the reports are of different executables (A: {}, B: {}); the "
      "figures compare two programs",
      OneLine(exe_a), OneLine(exe_b));
}

const char* StackChange::Change() const {
  if (blocks_a == 0 && bytes_a == 0) return "new";
  if (blocks_b == 0 && bytes_b == 0) return "gone";
  if (bytes_b > bytes_a) return "grown";
  if (bytes_b < bytes_a) return "shrunk";
  return "same";
}

std::vector<StackChange> LeakChanges(const json& a, const json& b) {
  std::map<std::string, StackChange> by_key;
  for (int side = 0; side < 2; ++side) {
    const json& doc = side == 0 ? a : b;
    const json* leaks = Leaks(doc);
    if (leaks == nullptr) continue;
    // The executable's frames are keyed by its role, not its name: two builds of one program under
    // other names (prog_v1, prog_v2) match.
    const json* process = doc.is_object() && doc.contains("process") ? &doc["process"] : nullptr;
    const std::string exe = process != nullptr && process->is_object() ? Text(*process, "exe") : "";
    for (const json& group : *leaks) {
      if (!group.is_object()) continue;
      std::string key;
      std::vector<std::string> frames;
      auto stack = group.find("stack");
      if (stack != group.end() && stack->is_array()) {
        for (const json& frame : *stack) {
          if (!frame.is_object()) continue;
          std::string function = Text(frame, "function");
          if (function.empty()) function = "?";
          const std::string object = Text(frame, "object");
          key += function + "@" + (!exe.empty() && object == exe ? std::string("(executable)") : BaseName(object)) + ";";
          frames.push_back(function);
        }
      }
      StackChange& change = by_key[key];
      change.key = key;
      change.frames = frames;
      (side == 0 ? change.blocks_a : change.blocks_b) += Integer(group, "blocks");
      (side == 0 ? change.bytes_a : change.bytes_b) += Integer(group, "bytes");
    }
  }
  std::vector<StackChange> changes;
  for (auto& [key, change] : by_key) changes.push_back(std::move(change));
  std::stable_sort(changes.begin(), changes.end(), [](const StackChange& x, const StackChange& y) {
    int64_t dx = std::llabs(x.bytes_b - x.bytes_a), dy = std::llabs(y.bytes_b - y.bytes_a);
    if (dx != dy) return dx > dy;
    if (x.bytes_b != y.bytes_b) return x.bytes_b > y.bytes_b;
    return x.key < y.key;
  });
  return changes;
}

std::string LeakDiffSection(const json& a, const json& b, size_t limit) {
  std::string out = "leaks by stack (live at exit, A -> B)\n";
  for (int side = 0; side < 2; ++side) {
    const json& report = side == 0 ? a : b;
    const char* name = side == 0 ? "A" : "B";
    if (report.contains("tracked") && report["tracked"].is_boolean() && !report["tracked"]) {
      out += fmt::format("  note: {} was not tracked (track=0): it lists no leaks\n", name);
    }
    int64_t omitted = Integer(report, "leak_groups_omitted");
    if (omitted > 0) {
      out += fmt::format("  note: {} left out {} leak groups beyond those it lists\n", name,
                         Thousands(omitted));
    }
  }
  std::vector<StackChange> changes = LeakChanges(a, b);
  std::map<std::string, int> counts;
  for (const StackChange& change : changes) ++counts[change.Change()];
  out += fmt::format("  {} new, {} gone, {} grown, {} shrunk, {} unchanged\n", counts["new"],
                     counts["gone"], counts["grown"], counts["shrunk"], counts["same"]);
  std::vector<const StackChange*> shown;
  for (const StackChange& change : changes) {
    if (std::string(change.Change()) != "same") shown.push_back(&change);
  }
  if (shown.empty()) return out + "\n";
  out += fmt::format("  {:<7} {:>12} {:>12} {:>12} {:>9} {:>9}  {}\n", "change", "bytes", "A bytes",
                     "B bytes", "A blocks", "B blocks", "stack (innermost first)");
  size_t rows = 0;
  for (const StackChange* change : shown) {
    if (rows++ == limit) break;
    std::string stack;
    for (size_t i = 0; i < change->frames.size() && i < 4; ++i) {
      stack += (i == 0 ? "" : " < ") + change->frames[i];
    }
    if (change->frames.size() > 4) stack += " < ...";
    if (stack.empty()) stack = "(no stack)";
    out += fmt::format("  {:<7} {:>12} {:>12} {:>12} {:>9} {:>9}  {}\n", change->Change(),
                       Signed(change->bytes_b - change->bytes_a), Thousands(change->bytes_a),
                       Thousands(change->bytes_b), Thousands(change->blocks_a),
                       Thousands(change->blocks_b), OneLine(stack));
  }
  if (shown.size() > limit) {
    out += fmt::format("  ... {} more changed stacks\n", shown.size() - limit);
  }
  return out + "\n";
}

}  // namespace poolscope::report
