// File: report/leak_diff.h
//
// The part of `poolscope diff` that compares two reports beyond their totals: whether they are of
// the same executable, and their leaks matched by stack, as `heaptrack --diff` matches them.
#ifndef POOLSCOPE_REPORT_LEAK_DIFF_H_
#define POOLSCOPE_REPORT_LEAK_DIFF_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace poolscope::report {

// A one-line warning (no trailing newline) when the two reports' `process.exe` have different base
// names, empty when they match or a report does not name its executable. The same program built
// or installed in two folders (two checkouts, /usr/bin and /usr/local/bin) is still one program,
// so only the base name counts.
std::string ExecutableMismatch(const nlohmann::json& a, const nlohmann::json& b);

// One stack's leaked blocks and bytes in A and in B. A stack is the symbolized frames of its
// `leaks[]` groups, each frame its function and its object's base name (the report's executable
// standing for itself whatever its name, so that two builds of one program under other names
// match); program counters are left out, so two runs of one program match whatever their load
// addresses. The groups of one stack (one per reachability kind) are added up.
struct StackChange {
  std::string key;                  // the frames joined, innermost first
  std::vector<std::string> frames;  // function names, innermost first
  int64_t blocks_a = 0, bytes_a = 0;
  int64_t blocks_b = 0, bytes_b = 0;
  // "new" (only in B), "gone" (only in A), "grown", "shrunk" (bytes), "same".
  const char* Change() const;
};

// Every stack of either report, the largest change in bytes first (ties: larger bytes in B, then
// the key).
std::vector<StackChange> LeakChanges(const nlohmann::json& a, const nlohmann::json& b);

// The text section: a count line per kind of change and the changed stacks, ranked by bytes, at
// most `limit` rows. Says so when a report was not tracked or omitted leak groups.
std::string LeakDiffSection(const nlohmann::json& a, const nlohmann::json& b, size_t limit);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_LEAK_DIFF_H_
