// File: report/stack_frames.cc
//
// See stack_frames.h.
#include "report/stack_frames.h"

#include <optional>
#include <set>

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/report_model.h"

namespace poolscope::report {
namespace {

using nlohmann::json;

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool StartsWith(const std::string& text, std::string_view prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

bool IsProgramFrame(const json& frame) {
  std::string object = String(frame, "object").value_or("");
  std::string base = Basename(object);
  if (base.rfind("libpoolscope", 0) == 0) return false;
  std::string function = String(frame, "function").value_or("");
  if (function.rfind("poolscope_", 0) == 0 || function.rfind("poolscope::", 0) == 0) return false;
  static const std::set<std::string> kAllocator = {
      "malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign", "aligned_alloc",
      "memalign", "valloc", "pvalloc", "__libc_malloc", "__libc_calloc", "__libc_realloc",
      "__libc_free", "__libc_memalign", "__posix_memalign", "_int_malloc", "tcache_init",
      "malloc_hook_ini"};
  std::string name = function.substr(0, function.find('('));
  if (kAllocator.count(name) != 0) return false;
  if (name.rfind("operator new", 0) == 0 || name.rfind("operator delete", 0) == 0) return false;
  return true;
}

size_t FirstProgramFrame(const json& stack) {
  if (!stack.is_array()) return 0;
  for (size_t i = 0; i < stack.size(); ++i) {
    if (IsProgramFrame(stack[i])) return i;
  }
  return 0;
}

bool IsLibcLoaderOrPoolscopeFrame(const json& frame) {
  const std::string base = Basename(String(frame, "object").value_or(""));
  return StartsWith(base, "libc.so") || StartsWith(base, "ld-linux") ||
         StartsWith(base, "libpoolscope.so");
}

size_t SiteFrame(const json& stack) {
  if (!stack.is_array()) return 0;
  for (size_t i = 0; i < stack.size(); ++i) {
    if (IsProgramFrame(stack[i]) && !IsLibcLoaderOrPoolscopeFrame(stack[i])) return i;
  }
  return FirstProgramFrame(stack);
}

std::string SiteVia(const json& stack) {
  const size_t site = SiteFrame(stack);
  if (site == 0 || site == FirstProgramFrame(stack)) return "";
  return FrameFunction(stack[site - 1]);
}

std::string FrameFunction(const json& frame) {
  if (std::optional<std::string> function = String(frame, "function"); function && !function->empty()) {
    return OneLine(*function);
  }
  if (std::optional<std::string> object = String(frame, "object"); object && !object->empty()) {
    return "[" + OneLine(Basename(*object)) + "]";
  }
  if (std::optional<std::string> address = String(frame, "address")) return OneLine(*address);
  return "??";
}

std::string FrameWhere(const json& frame) {
  std::optional<std::string> file = String(frame, "file");
  if (file && !file->empty()) {
    std::optional<int64_t> line = Count(frame, "line");
    return OneLine(*file) + (line && *line > 0 ? fmt::format(":{}", *line) : "");
  }
  std::optional<std::string> object = String(frame, "object");
  if (object && !object->empty() && String(frame, "function")) return OneLine(*object);
  return "";
}

}  // namespace poolscope::report
