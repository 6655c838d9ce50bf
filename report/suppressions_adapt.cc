// File: report/suppressions_adapt.cc
//
// See suppressions_adapt.h. The files as their tools read them:
// - valgrind: lines are taken without leading and trailing blanks; blank lines and lines starting
//   with `#` are skipped anywhere. An entry is `{`, a name, `TOOL[,TOOL]:KIND`, the tool's extra
//   lines (memcheck: `match-leak-kinds: ...` for Leak, the parameter for Param), the stack (frames
//   `fun:GLOB`, `obj:GLOB`, `src:FILE[:LINE]` in newer valgrinds, `...`), then `}`. fun: globs match
//   mangled names.
// - LeakSanitizer and heaptrack_print --suppressions: one `leak:PATTERN` a line, `#` comments.
#include "report/suppressions_adapt.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "report/format_util.h"

namespace poolscope::report {
namespace {

// The entry points poolscope interposes, as memcheck names them (its own replacements, mangled),
// and its preload object, whose functions top every stack memcheck records for a heap block.
constexpr std::string_view kAllocators[] = {
    "malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc", "memalign",
    "valloc", "pvalloc", "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t",
    "_ZnamSt11align_val_tRKSt9nothrow_t",
};
constexpr std::string_view kDeallocators[] = {
    "free", "realloc", "reallocarray", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm",
    "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t", "_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t",
    "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t", "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    "_ZdaPvSt11align_val_tRKSt9nothrow_t",
};
constexpr std::string_view kMemcheckObjects[] = {
    "/usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so",
    "/usr/lib/x86_64-linux-gnu/valgrind/vgpreload_memcheck-amd64-linux.so",
};
// A name that only a pattern for any function (or any object) matches among these.
constexpr std::string_view kProgramFunction = "main";
constexpr std::string_view kProgramObject = "/usr/bin/main";

// The frames libpoolscope.so puts between the allocator below it and the program on the path of a
// block that no pool serves (the only blocks LeakSanitizer and heaptrack below it see of the
// program's), as they name them, and the object.
constexpr std::string_view kPoolscopeFrames[] = {
    "poolscope::AllocSlow(poolscope::Api, unsigned long, void*)",
    "poolscope::MallocTracked(unsigned long, void*)",
    "poolscope::MallocRegular(unsigned long, void*)",
    "poolscope::MallocPooled(unsigned long, void*)",
    "poolscope::Calloc(unsigned long, unsigned long, void*)",
    "poolscope::(anonymous namespace)::CallocSlow(unsigned long, unsigned long, void*)",
    "poolscope::Realloc(poolscope::Api, void*, unsigned long, unsigned long, void*)",
    "poolscope::PosixMemalign(void**, unsigned long, unsigned long, void*)",
    "poolscope::AlignedEntry(poolscope::Api, unsigned long, unsigned long, void*)",
    "poolscope::NewSlow(poolscope::Api, unsigned long, void*)",
    "poolscope::NewForm(poolscope::Api, unsigned long, unsigned long, bool, void*)",
    "libpoolscope.so",
};

constexpr char kMarker[] = "# poolscope suppressions --adapt ";

std::string_view Trim(std::string_view s) {
  const char* blanks = " \t\r\f\v";
  size_t begin = s.find_first_not_of(blanks);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(blanks) - begin + 1);
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

struct Line {
  int number;
  std::string_view raw;   // as in the file
  std::string_view text;  // without the blanks around it
  bool skipped() const { return text.empty() || text[0] == '#'; }
};

std::vector<Line> SplitLines(std::string_view text) {
  std::vector<Line> lines;
  int number = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(at, end - at);
    lines.push_back({++number, raw, Trim(raw)});
    at = end + 1;
  }
  return lines;
}

std::string Quoted(std::string_view text) {
  std::string line = OneLine(std::string(text));
  if (line.size() > 60) line = line.substr(0, 57) + "...";
  return "'" + line + "'";
}

// ---- valgrind -------------------------------------------------------------------------------------

// What a frame line may stand for at the top of a memcheck stack.
struct FrameRole {
  bool allocates = false;  // names a function that poolscope interposes and that allocates
  bool frees = false;      // ... that frees
  bool any = false;        // matches the program's functions as well (`fun:*`)
};

bool IsFrameLine(std::string_view text) {
  return text == "..." || StartsWith(text, "fun:") || StartsWith(text, "obj:") ||
         StartsWith(text, "src:");
}

FrameRole RoleOf(std::string_view frame) {
  FrameRole role;
  if (StartsWith(frame, "fun:")) {
    std::string_view glob = frame.substr(4);
    for (std::string_view name : kAllocators) role.allocates |= ValgrindGlobMatches(glob, name);
    for (std::string_view name : kDeallocators) role.frees |= ValgrindGlobMatches(glob, name);
    role.any = ValgrindGlobMatches(glob, kProgramFunction);
  } else if (StartsWith(frame, "obj:")) {
    std::string_view glob = frame.substr(4);
    for (std::string_view name : kMemcheckObjects) {
      if (ValgrindGlobMatches(glob, name)) role.allocates = role.frees = true;
    }
    role.any = ValgrindGlobMatches(glob, kProgramObject);
  }
  return role;
}

bool Specific(const FrameRole& role) { return (role.allocates || role.frees) && !role.any; }

struct Entry {
  std::string_view name;
  std::string_view kind;                 // TOOL[,TOOL]:KIND
  std::vector<std::string_view> extras;  // the tool's lines before the stack
  std::vector<std::string_view> frames;
};

bool ForMemcheck(std::string_view kind) {
  std::string_view tools = kind.substr(0, kind.find(':'));
  for (size_t at = 0; at <= tools.size();) {
    size_t end = tools.find(',', at);
    if (end == std::string_view::npos) end = tools.size();
    if (Trim(tools.substr(at, end - at)) == "Memcheck") return true;
    at = end + 1;
  }
  return false;
}

// Whether `text`, before the stack, is one of the tool's own lines: memcheck's are the parameter of
// Param and FishyValue (one line) and Leak's optional match-leak-kinds; other tools' are not known
// here, and any line that is not a frame is taken as theirs.
bool ExtraLine(const Entry& entry, std::string_view text) {
  if (!ForMemcheck(entry.kind)) return !IsFrameLine(text);
  std::string_view kind = Trim(entry.kind.substr(entry.kind.find(':') + 1));
  if (kind == "Param" || kind == "FishyValue") return entry.extras.empty();
  return kind == "Leak" && entry.extras.empty() && StartsWith(text, "match-leak-kinds:");
}

bool HasPoolscopeFrame(const Entry& entry) {
  for (std::string_view frame : entry.frames) {
    if (frame == kPoolscopeObjectFrame || frame == kDescribeAllocFrame || frame == kDescribeFreeFrame) {
      return true;
    }
  }
  return false;
}

void AppendCopy(const Entry& entry, const std::string& suffix, const std::vector<std::string_view>& head,
                int poolscope_frames, size_t rest, std::string* out) {
  *out += fmt::format("{{\n   {}/{}\n   {}\n", entry.name, suffix, entry.kind);
  for (std::string_view extra : entry.extras) *out += fmt::format("   {}\n", extra);
  for (std::string_view frame : head) *out += fmt::format("   {}\n", frame);
  for (int i = 0; i < poolscope_frames; ++i) *out += fmt::format("   {}\n", kPoolscopeObjectFrame);
  for (size_t i = rest; i < entry.frames.size(); ++i) *out += fmt::format("   {}\n", entry.frames[i]);
  *out += "}\n";
}

// The copies of `entry` that match its stacks with poolscope preloaded (none when poolscope changes
// nothing of them); *copies counts them.
std::string Copies(const Entry& entry, int* copies) {
  std::string_view kind = Trim(entry.kind.substr(entry.kind.find(':') + 1));
  if (!ForMemcheck(entry.kind) || entry.frames.empty() || HasPoolscopeFrame(entry)) return "";
  FrameRole top = RoleOf(entry.frames[0]);
  const bool leak = kind == "Leak";
  // A leak's stack always starts at the function that allocated the block, so a pattern for any
  // function stands for it there; other kinds start where memcheck found the error.
  if (!Specific(top) && !(leak && top.any)) return "";
  // memcheck reports some entry points as two of its functions (posix_memalign calls its memalign):
  // poolscope's frames follow the last of them.
  size_t run = 1;
  while (run < entry.frames.size() && Specific(RoleOf(entry.frames[run]))) ++run;
  std::vector<std::string_view> head(entry.frames.begin(), entry.frames.begin() + run);
  std::string out;
  int n = 0;
  for (int k = 1; k <= kMaxPoolscopeFrames; ++k, ++n) {
    AppendCopy(entry, fmt::format("poolscope:{}", k), head, k, run, &out);
  }
  if (leak && (top.allocates || top.any)) {
    for (int k = 1; k <= kMaxPoolscopeFrames; ++k, ++n) {
      AppendCopy(entry, fmt::format("poolscope-pooled:{}", k), {kDescribeAllocFrame}, k, run, &out);
    }
  }
  if (kind == "Free" && top.frees) {
    for (int k = 1; k <= kMaxPoolscopeFrames; ++k, ++n) {
      AppendCopy(entry, fmt::format("poolscope-pooled:{}", k), {kDescribeFreeFrame}, k, run, &out);
    }
  }
  // realloc moves a block that outgrows its pool into one from malloc: copies for that, unless the
  // entry's own top frame matches malloc already.
  std::string_view top_glob = entry.frames[0].substr(4);
  const bool realloc_only = StartsWith(entry.frames[0], "fun:") && Specific(top) &&
                            !ValgrindGlobMatches(top_glob, "malloc") &&
                            (ValgrindGlobMatches(top_glob, "realloc") ||
                             ValgrindGlobMatches(top_glob, "reallocarray"));
  if (leak && realloc_only) {
    for (int k = 1; k <= kMaxPoolscopeFrames; ++k, ++n) {
      AppendCopy(entry, fmt::format("poolscope-realloc:{}", k), {"fun:malloc"}, k, run, &out);
    }
  }
  *copies += n;
  return fmt::format("# poolscope: {} copies of '{}' for its stacks with poolscope preloaded\n", n,
                     OneLine(std::string(entry.name))) +
         out;
}

void Fail(AdaptedSuppressions* result, int line, std::string problem) {
  result->text.clear();
  result->error_line = line;
  result->error = std::move(problem);
}

void AdaptValgrind(const std::vector<Line>& lines, const std::string& path, AdaptedSuppressions* result) {
  std::string body;
  int entries = 0, adapted = 0, copies = 0;
  for (size_t i = 0; i < lines.size();) {
    const Line& line = lines[i];
    if (line.skipped()) {
      body += std::string(line.raw) + "\n";
      ++i;
      continue;
    }
    if (line.text != "{") {
      return Fail(result, line.number,
                  fmt::format("expected '{{' to start a valgrind suppression, got {}", Quoted(line.text)));
    }
    // One entry: its lines as they are, then the copies.
    const int open = line.number;
    Entry entry;
    int field = 0;  // 0 name, 1 kind, 2 extras and frames
    size_t j = i + 1;
    bool closed = false;
    for (; j < lines.size(); ++j) {
      const Line& l = lines[j];
      if (l.skipped()) continue;
      if (l.text == "}") {
        if (field < 2) return Fail(result, l.number, "suppression without a name and a TOOL:KIND line");
        if (entry.frames.empty()) {
          return Fail(result, l.number, "suppression without a stack (fun:, obj:, src: or ... lines)");
        }
        closed = true;
        break;
      }
      if (field == 0) {
        entry.name = l.text;
        field = 1;
      } else if (field == 1) {
        if (l.text.find(':') == std::string_view::npos || l.text.find(':') == 0) {
          return Fail(result, l.number,
                      fmt::format("expected TOOL:KIND (such as Memcheck:Leak), got {}", Quoted(l.text)));
        }
        entry.kind = l.text;
        field = 2;
      } else if (entry.frames.empty() && ExtraLine(entry, l.text)) {
        entry.extras.push_back(l.text);
      } else if (IsFrameLine(l.text)) {
        entry.frames.push_back(l.text);
      } else {
        return Fail(result, l.number,
                    fmt::format("expected a frame (fun:, obj:, src: or ...) or '}}', got {}", Quoted(l.text)));
      }
    }
    if (!closed) return Fail(result, open, "the suppression that starts here has no closing '}'");
    for (size_t k = i; k <= j; ++k) body += std::string(lines[k].raw) + "\n";
    const int before = copies;
    body += Copies(entry, &copies);
    if (copies > before) ++adapted;
    ++entries;
    i = j + 1;
  }
  result->text = fmt::format(
      "{}{}: for memcheck with libpoolscope.so preloaded.\n"
      "# Each memcheck entry whose stack starts at a function poolscope interposes (malloc, free,\n"
      "# operator new and their kin) is kept and followed by copies that allow 1 to {} frames of\n"
      "# libpoolscope.so ({}) between that function and its caller, never one of the\n"
      "# program's; an allocation's also by copies for the blocks poolscope's pools serve, which\n"
      "# start at ValgrindDescribeAlloc (valgrind=1), a free's by copies that start at\n"
      "# ValgrindDescribeFree, a realloc's by copies that start at malloc (a block moved out of its\n"
      "# pool). A pooled block's stack does not say which function the program called: a copy for\n"
      "# one caller's malloc also matches its pooled calloc and operator new blocks.\n"
      "# {} of {} entries adapted, {} copies. The pools themselves: poolscope suppressions\n"
      "# --format=valgrind R.json, as a second --suppressions file.\n",
      kMarker, OneLine(path), kMaxPoolscopeFrames, kPoolscopeObjectFrame, adapted, entries, copies);
  result->text += body;
}

// ---- LeakSanitizer and heaptrack ------------------------------------------------------------------

void AdaptLeakPatterns(const std::vector<Line>& lines, const std::string& path,
                       std::optional<SuppressionFormat> format, AdaptedSuppressions* result) {
  std::string body;
  int patterns = 0;
  for (const Line& line : lines) {
    if (line.skipped()) {
      body += std::string(line.raw) + "\n";
      continue;
    }
    if (!StartsWith(line.text, "leak:")) {
      std::string hint = line.text == "{" ? " (a valgrind suppression: --format=valgrind)" : "";
      return Fail(result, line.number,
                  fmt::format("expected leak:PATTERN, got {}{}", Quoted(line.text), hint));
    }
    ++patterns;
    std::string_view pattern = Trim(line.text.substr(5));
    for (std::string_view frame : kPoolscopeFrames) {
      if (!LeakPatternMatches(pattern, frame)) continue;
      std::string what = fmt::format(
          "leak:{} also matches poolscope's own frame {}: with poolscope preloaded it suppresses every "
          "leak allocated through that frame, whatever the program's stack",
          OneLine(std::string(pattern)), frame);
      body += "# poolscope: " + what + "\n";
      result->warnings.push_back(fmt::format("{}: warning: {}", line.number, what));
      break;
    }
    body += std::string(line.raw) + "\n";
  }
  const char* tools = !format.has_value()                      ? "LeakSanitizer or heaptrack"
                      : *format == SuppressionFormat::kHeaptrack ? "heaptrack"
                                                                 : "LeakSanitizer";
  result->text = fmt::format(
      "{}{}: for {} below libpoolscope.so.\n"
      "# The patterns are unchanged: a leak: pattern matches a function, file or object anywhere in\n"
      "# a leak's stack, and poolscope only adds frames of its own to the stacks these tools see (the\n"
      "# program's blocks that pools serve are inside the pools, where they do not see them).\n"
      "# {} patterns. The pools themselves: poolscope suppressions --format=lsan R.json (LeakSanitizer\n"
      "# reads one file: append those lines to this one).\n",
      kMarker, OneLine(path), tools, patterns);
  result->text += body;
}

}  // namespace

bool ValgrindGlobMatches(std::string_view pattern, std::string_view name) {
  // Backtracking over the last `*` (linear in practice).
  size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
      continue;
    }
    if (p < pattern.size()) {
      char want = pattern[p];
      size_t width = 1;
      if (want == '\\' && p + 1 < pattern.size()) {
        want = pattern[p + 1];
        width = 2;
      }
      if ((pattern[p] == '?' && width == 1) || want == name[n]) {
        p += width;
        ++n;
        continue;
      }
    }
    if (star == std::string_view::npos) return false;
    p = star + 1;
    n = ++resume;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool LeakPatternMatches(std::string_view pattern, std::string_view name) {
  if (name.empty()) return false;
  if (pattern == name) return true;
  bool anchored = !pattern.empty() && pattern[0] == '^';
  if (anchored) pattern.remove_prefix(1);
  bool after_star = false;
  while (!pattern.empty()) {
    if (pattern[0] == '*') {
      pattern.remove_prefix(1);
      anchored = false;
      after_star = true;
      continue;
    }
    if (pattern[0] == '$') return name.empty() || after_star;
    if (name.empty()) return false;
    // The literal run up to the next `*` or `$`, found at its first place in what is left (as the
    // tools do: "ab$" does not match "abab").
    size_t end = pattern.find_first_of("*$");
    std::string_view literal = pattern.substr(0, end);
    size_t at = name.find(literal);
    if (at == std::string_view::npos) return false;
    if (anchored && at != 0) return false;
    name.remove_prefix(at + literal.size());
    pattern = end == std::string_view::npos ? std::string_view() : pattern.substr(end);
    anchored = false;
    after_star = false;
  }
  return true;
}

AdaptedSuppressions AdaptSuppressions(std::string_view text, const std::string& path,
                                      std::optional<SuppressionFormat> format) {
  AdaptedSuppressions result;
  std::vector<Line> lines = SplitLines(text);
  const Line* first = nullptr;
  for (const Line& line : lines) {
    if (StartsWith(line.text, kMarker)) {
      Fail(&result, line.number, "already adapted by poolscope suppressions --adapt: adapt the original");
      return result;
    }
    if (first == nullptr && !line.skipped()) first = &line;
  }
  bool valgrind = format.has_value() ? *format == SuppressionFormat::kValgrind
                                     : first != nullptr && first->text == "{";
  if (valgrind) {
    AdaptValgrind(lines, path, &result);
  } else {
    AdaptLeakPatterns(lines, path, format, &result);
  }
  return result;
}

absl::StatusOr<std::string> ReadSuppressionFile(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::NotFoundError("no such file");
    return absl::UnknownError(std::strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) return absl::InvalidArgumentError("is a directory, not a suppression file");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::UnknownError(errno != 0 ? std::strerror(errno) : "cannot open");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError("read error");
  std::string text = std::move(buffer).str();
  if (text.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("a binary file, not a suppression file");
  }
  return text;
}

}  // namespace poolscope::report
