// File: tools/suppressions.h
//
// `poolscope suppressions`: entries for an existing leak checker (LeakSanitizer, valgrind's
// memcheck, heaptrack) that mark poolscope's pools as expected, so a leak check that passed without
// poolscope still passes with pooling on. Pools are real allocations made by code in
// libpoolscope.so, so the entries match allocation stacks that pass through that object (or
// through a function in the `poolscope::` namespace when symbols are available).
//
// Thread-safety: pure functions.
#ifndef POOLSCOPE_TOOLS_SUPPRESSIONS_H_
#define POOLSCOPE_TOOLS_SUPPRESSIONS_H_

#include <string>

#include "nlohmann/json.hpp"

namespace poolscope::tools {

enum class SuppressionFormat { kLsan, kValgrind, kHeaptrack };

// Parses "lsan", "valgrind" or "heaptrack".
bool ParseSuppressionFormat(const std::string& name, SuppressionFormat* format);

// The suppression file's text, with a comment naming the report and its pool figures.
std::string Suppressions(const nlohmann::json& report, const std::string& path,
                         SuppressionFormat format);

}  // namespace poolscope::tools

#endif  // POOLSCOPE_TOOLS_SUPPRESSIONS_H_
