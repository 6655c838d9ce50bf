// File: report/suppressions.cc
//
// See suppressions.h. Formats, as their tools read them:
// - LeakSanitizer: one `leak:PATTERN` per line, matched against the function, source file and
//   module (object) name of every frame of a leak's allocation stack; `#` starts a comment.
// - heaptrack_print --suppressions: the same `leak:` format.
// - valgrind memcheck: a `{ name / Memcheck:Leak / match-leak-kinds: ... / frames }` block where a
//   frame is `fun:GLOB` or `obj:GLOB` and `...` matches zero or more frames.
#include "report/suppressions.h"

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/report_model.h"

namespace poolscope::report {
namespace {

using nlohmann::json;

std::string PoolFigures(const json& report) {
  return fmt::format("{} pools created, {} cached and {} in use at exit",
                     Thousands(Count(report, "pool.pools_created")),
                     Thousands(Count(report, "pool.pools_cached_at_exit")),
                     Thousands(Count(report, "pool.pools_in_use_at_exit")));
}

}  // namespace

bool ParseSuppressionFormat(const std::string& name, SuppressionFormat* format) {
  if (name == "lsan") {
    *format = SuppressionFormat::kLsan;
  } else if (name == "valgrind") {
    *format = SuppressionFormat::kValgrind;
  } else if (name == "heaptrack") {
    *format = SuppressionFormat::kHeaptrack;
  } else {
    return false;
  }
  return true;
}

std::string Suppressions(const json& report, const std::string& path, SuppressionFormat format) {
  std::string source = OneLine(path);
  std::string figures = PoolFigures(report);
  switch (format) {
    case SuppressionFormat::kLsan:
    case SuppressionFormat::kHeaptrack: {
      const char* tool = format == SuppressionFormat::kLsan
                             ? "LeakSanitizer (LSAN_OPTIONS=suppressions=FILE)"
                             : "heaptrack_print --suppressions=FILE";
      const char* caveat =
          format == SuppressionFormat::kHeaptrack
              ? "# heaptrack_print 1.4 also needs --disable-builtin-suppressions: with its built-in\n"
                "# suppressions on, a suppression file makes it suppress every leak.\n"
              : "";
      std::string lines;
      for (const char* line : kLeakSuppressions) lines += std::string(line) + "\n";
      return fmt::format(
          "# poolscope: pool memory is expected at exit, not a leak. For {}.\n"
          "# From {}: {}.\n"
          "# Every pool's real allocation is made by ShimBackend::AllocPool in libpoolscope.so, and\n"
          "# nothing else is: the program's own leaks, which also pass through libpoolscope.so's\n"
          "# malloc, stay reported. LeakSanitizer's default unwinder (frame pointers) sees of a\n"
          "# pool's stack only the function below it that calls the allocator, poolscope_pool_alloc\n"
          "# or PoolFromMalloc, which make pools and nothing else.\n"
          "{}"
          "{}",
          tool, source, figures, caveat, lines);
    }
    case SuppressionFormat::kValgrind:
      return fmt::format(
          "# poolscope: pool memory is expected at exit, not a leak.\n"
          "# For valgrind --suppressions=FILE. From {}: {}.\n"
          "# Every pool's real allocation is made by poolscope::(anonymous namespace)::ShimBackend::\n"
          "# AllocPool in libpoolscope.so (with valgrind=1 it also describes the pool to memcheck),\n"
          "# and nothing else is: the program's own leaks, which also pass through libpoolscope.so's\n"
          "# malloc, stay reported. memcheck matches fun: lines against mangled names.\n"
          "{{\n"
          "   poolscope-pool-memory\n"
          "   Memcheck:Leak\n"
          "   match-leak-kinds: reachable,possible,indirect,definite\n"
          "   ...\n"
          "   {}\n"
          "}}\n",
          source, figures, kValgrindFrame);
  }
  return "";
}

}  // namespace poolscope::report
