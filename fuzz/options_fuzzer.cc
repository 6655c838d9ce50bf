// File: fuzz/options_fuzzer.cc
//
// libFuzzer target: poolscope::ParseOptions (interpose/options.cc) on arbitrary bytes, NUL-terminated.
// After every parse each field must be in its documented range, every string NUL-terminated inside
// its buffer, every warning one line, the warning count the number of warning calls, and parsing the
// same text twice must give the same result.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>

#include "interpose/options.h"

using poolscope::Options;
using poolscope::TagMode;

namespace {

struct Warnings {
  int calls = 0;
};

void Fail(const char* what, const std::string& input) {
  fprintf(stderr, "options_fuzzer: invariant broken: %s\ninput: '%s'\n", what, input.c_str());
  abort();
}

void OnWarn(void* ctx, const char* line) {
  auto* w = static_cast<Warnings*>(ctx);
  ++w->calls;
  size_t n = strnlen(line, 4096);
  if (n >= 4096 || strchr(line, '\n') != nullptr) {
    fprintf(stderr, "options_fuzzer: a warning is not one line: '%s'\n", line);
    abort();
  }
}

void OnDescribe(void* ctx, const char* line) { OnWarn(ctx, line); }

bool Bool01(int v) { return v == 0 || v == 1; }

void CheckRanges(const Options& o, const std::string& in) {
  if (!Bool01(o.pool)) Fail("pool in {0,1}", in);
  if (!(o.pool_size < 0 || (o.pool_size >= 8 && o.pool_size <= 1048576))) Fail("pool_size 8..1048576 or negative", in);
  if (o.pool_size < -2147483647L) Fail("pool_size >= -2147483647", in);
  if (o.pools < 0 || o.pools > 8) Fail("pools 0..8", in);
  if (o.tag != TagMode::kSmall && o.tag != TagMode::kExplicit && o.tag != TagMode::kCaller) Fail("tag enum", in);
  if (memchr(o.tag_globs, '\0', sizeof o.tag_globs) == nullptr) Fail("tag_globs NUL-terminated", in);
  if (o.tag == TagMode::kCaller && o.tag_globs[0] == '\0') Fail("tag=caller has a glob", in);
  if (o.malloc_align != 8 && o.malloc_align != 16) Fail("malloc_align 8 or 16", in);
  if (!Bool01(o.track)) Fail("track in {0,1}", in);
  if (o.stack_depth < 0 || o.stack_depth > 64) Fail("stack_depth 0..64", in);
  if (memchr(o.report, '\0', sizeof o.report) == nullptr) Fail("report NUL-terminated", in);
  if (o.report[0] == '\0') Fail("report non-empty", in);
  if (!Bool01(o.drain_at_exit)) Fail("drain_at_exit in {0,1}", in);
  if (o.snapshot_interval < 0 || o.snapshot_interval > 86400) Fail("snapshot_interval 0..86400", in);
  if (!Bool01(o.quiet)) Fail("quiet in {0,1}", in);
  if (o.leak_exitcode < 0 || o.leak_exitcode > 255) Fail("leak_exitcode 0..255", in);
  if (!Bool01(o.valgrind)) Fail("valgrind in {0,1}", in);
  if (!Bool01(o.help)) Fail("help in {0,1}", in);
  if (o.pooling() != (o.pool != 0 && o.pool_size > 0)) Fail("pooling()", in);
}

bool Same(const Options& a, const Options& b) {
  return a.pool == b.pool && a.pool_size == b.pool_size && a.pools == b.pools && a.tag == b.tag &&
         strcmp(a.tag_globs, b.tag_globs) == 0 && a.malloc_align == b.malloc_align &&
         a.track == b.track && a.stack_depth == b.stack_depth && strcmp(a.report, b.report) == 0 &&
         a.drain_at_exit == b.drain_at_exit && a.snapshot_interval == b.snapshot_interval &&
         a.quiet == b.quiet && a.leak_exitcode == b.leak_exitcode && a.valgrind == b.valgrind &&
         a.help == b.help;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);  // NUL-terminated by c_str()
  Options o;
  Warnings w;
  int n = poolscope::ParseOptions(text.c_str(), &o, OnWarn, &w);
  if (n != w.calls) Fail("return value == number of warning calls", text);
  if (n < 0) Fail("warnings >= 0", text);
  CheckRanges(o, text);
  // Deterministic: the same text parses to the same options, with or without a callback.
  Options again;
  int n2 = poolscope::ParseOptions(text.c_str(), &again, nullptr, nullptr);
  if (n2 != n || !Same(o, again)) Fail("deterministic", text);
  // A second pass over parsed options keeps them in range (options are applied on top of defaults
  // in the library, but nothing forbids layering).
  poolscope::ParseOptions(text.c_str(), &again, nullptr, nullptr);
  CheckRanges(again, text);
  Warnings d;
  poolscope::DescribeOptions(o, OnDescribe, &d);
  if (d.calls != 16) Fail("DescribeOptions emits 16 lines", text);
  return 0;
}
