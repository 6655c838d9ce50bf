// File: interpose/options.h
//
// POOLSCOPE_OPTIONS, in the ASAN_OPTIONS convention: "key=value:key=value". An unknown key or a bad
// value produces one warning line and keeps the default; nothing here allocates, so it can run inside
// the first malloc of a process.
#ifndef POOLSCOPE_INTERPOSE_OPTIONS_H_
#define POOLSCOPE_INTERPOSE_OPTIONS_H_

#include <cstddef>

namespace poolscope {

enum class TagMode { kSmall, kExplicit, kCaller };

// leak_kinds: the reachability classes leak_exitcode judges (memcheck's --errors-for-leak-kinds).
enum LeakKindBits : int { kLeakDefinite = 1, kLeakIndirect = 2, kLeakPossible = 4, kLeakReachable = 8 };
// Writes "definite,indirect" and the like (or "none") for a set of bits; returns `out`.
const char* LeakKindsText(int kinds, char* out, size_t size);

struct Options {
  int pool = 1;
  long pool_size = 64;  // 8 .. 1048576; negative turns pooling off
  int pools = 4;        // 0 .. 8
  TagMode tag = TagMode::kSmall;
  char tag_globs[512] = "";  // for tag=caller:GLOB[,GLOB]: the globs, comma-separated
  int malloc_align = 16;     // 16 or 8
  int track = 1;
  int stack_depth = 16;  // 0 .. 64
  char report[1024] = "poolscope.%e.%p.json";
  int drain_at_exit = 0;
  int snapshot_interval = 0;  // seconds, 0 .. 86400
  int quiet = 0;
  int leak_exitcode = 0;  // 0 .. 255
  int reachability = 1;   // classify the blocks live at exit as memcheck does (needs track=1)
  int leak_kinds = kLeakDefinite | kLeakIndirect;  // what leak_exitcode judges, after a scan
  int valgrind = 1;
  int help = 0;

  bool pooling() const { return pool != 0 && pool_size > 0; }
};

// Receives one complete warning line (no trailing newline).
using WarnFn = void (*)(void* ctx, const char* line);

// Parses `text` (may be null) into `out`, which holds the defaults on entry. Returns the number of
// warnings issued.
int ParseOptions(const char* text, Options* out, WarnFn warn, void* ctx);

// Writes "key=value" lines describing every option, with its meaning, for help=1.
void DescribeOptions(const Options& o, WarnFn emit, void* ctx);

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_OPTIONS_H_
