// File: report/suppressions_adapt.h
//
// `poolscope suppressions --adapt FILE`: an existing suppression file, written for the program run
// without poolscope, rewritten so that it suppresses the same reports with libpoolscope.so preloaded.
//
// valgrind (memcheck): an entry matches a stack frame by frame from its top, and with poolscope
// preloaded every allocation and free the program makes passes through libpoolscope.so's entry points,
// which leave frames of their own between memcheck's function (malloc) and its caller. So every
// memcheck entry whose stack starts at a function poolscope interposes (malloc, free, operator new and
// their kin, as memcheck names them) is kept and followed by copies of it that allow 1 to
// kMaxPoolscopeFrames frames in libpoolscope.so there, as `obj:*/libpoolscope.so` lines, and by copies
// for the stacks that start in poolscope itself: a block a pool serves, described to memcheck with
// valgrind=1, starts at poolscope's ValgrindDescribeAlloc (and its invalid free at
// ValgrindDescribeFree); a realloc that moves a block out of its pool allocates with malloc. An obj:
// line matches only a frame in libpoolscope.so, never one of the program's, so a copy matches a stack
// only where the original matches the same stack without poolscope's frames. (A `...` would also match
// the program's code that poolscope runs: a library's destructors under dlclose, a signal handler.)
// What a copy cannot tell apart: a pooled block's stack does not show which function the program
// called, so an entry for one caller's malloc also matches its pooled calloc or operator new blocks.
//
// LeakSanitizer and heaptrack: a `leak:` pattern matches a function, file or object name anywhere in
// a leak's stack, and poolscope only adds frames of its own, so the patterns stay as they are; a
// pattern that also matches one of poolscope's own frames would suppress every leak allocated through
// it, and is reported.
//
// Thread-safety: pure functions.
#ifndef POOLSCOPE_REPORT_SUPPRESSIONS_ADAPT_H_
#define POOLSCOPE_REPORT_SUPPRESSIONS_ADAPT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "report/suppressions.h"

namespace poolscope::report {

// The most frames of libpoolscope.so a copy allows between memcheck's function and the caller. The
// library puts 1 there on its regular paths and 2 or 3 after ValgrindDescribeAlloc (4 counting it);
// one more leaves room for a build that inlines less. A pool's own allocation has more (its stack
// runs through the pool's creation), so a copy whose top frame is malloc does not reach it.
inline constexpr int kMaxPoolscopeFrames = 4;
// The frame line of a frame in libpoolscope.so.
inline constexpr char kPoolscopeObjectFrame[] = "obj:*/libpoolscope.so";
// The top frame of a pooled block's allocation and of its invalid free with valgrind=1 (mangled).
inline constexpr char kDescribeAllocFrame[] = "fun:_ZN9poolscope*ValgrindDescribeAlloc*";
inline constexpr char kDescribeFreeFrame[] = "fun:_ZN9poolscope*ValgrindDescribeFree*";

struct AdaptedSuppressions {
  std::string text;                   // the adapted file
  std::vector<std::string> warnings;  // one line each, "LINE: text"
  std::string error;                  // not empty: the input is not a suppression file
  int error_line = 0;                 // the line `error` is about (1-based)
};

// Adapts `text`, the contents of the file at `path` (named in the header comment). `format`, when
// set, is what the file must be (lsan and heaptrack: `leak:` lines); otherwise a file whose first
// line that is not blank or a comment is `{` is valgrind's, any other `leak:` lines.
AdaptedSuppressions AdaptSuppressions(std::string_view text, const std::string& path,
                                      std::optional<SuppressionFormat> format);

// The file at `path`; an error saying why it cannot be read otherwise.
absl::StatusOr<std::string> ReadSuppressionFile(const std::string& path);

// LeakSanitizer's pattern match (heaptrack_print uses the same rules): `*` matches any run of
// characters, a leading `^` and a trailing `$` anchor the pattern, which otherwise matches anywhere.
bool LeakPatternMatches(std::string_view pattern, std::string_view name);

// valgrind's match of a fun: or obj: pattern against a whole name: `*` any run, `?` one character.
bool ValgrindGlobMatches(std::string_view pattern, std::string_view name);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_SUPPRESSIONS_ADAPT_H_
