// File: interpose/options.cc
//
// The POOLSCOPE_OPTIONS parser. No allocation: it runs during the process's first malloc.
#include "interpose/options.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace poolscope {
namespace {

struct Parser {
  Options* o;
  WarnFn warn;
  void* ctx;
  int warnings = 0;

  void Warn(const char* fmt, const char* a, const char* b, const char* c) {
    char line[512];
    // A value longer than the line is cut, and the line says so.
    if (snprintf(line, sizeof line, fmt, a, b, c) >= static_cast<int>(sizeof line)) {
      memcpy(line + sizeof line - 4, "...", 4);
    }
    ++warnings;
    if (warn != nullptr) warn(ctx, line);
  }

  // Parses a decimal integer in [lo, hi]; false if it is not one.
  static bool Int(const char* v, long lo, long hi, long* out) {
    if (*v == '\0') return false;
    char* end = nullptr;
    long x = strtol(v, &end, 10);
    if (*end != '\0' || x < lo || x > hi) return false;
    *out = x;
    return true;
  }

  void IntOpt(const char* key, const char* v, long lo, long hi, const char* expect, int* field) {
    long x;
    if (Int(v, lo, hi, &x)) {
      *field = static_cast<int>(x);
      return;
    }
    Warn("bad value '%s' for %s (%s); keeping the default", v, key, expect);
  }

  void Set(const char* key, const char* v) {
    if (strcmp(key, "pool") == 0) return IntOpt(key, v, 0, 1, "expected 0 or 1", &o->pool);
    if (strcmp(key, "pool_size") == 0) {
      long x;
      if (Int(v, -2147483647L, 1048576, &x) && (x < 0 || x >= 8)) {
        o->pool_size = x;
      } else {
        Warn("bad value '%s' for %s (%s); keeping the default", v, key,
             "expected 8..1048576, or a negative number to turn pooling off");
      }
      return;
    }
    if (strcmp(key, "pools") == 0) return IntOpt(key, v, 0, 8, "expected 0..8", &o->pools);
    if (strcmp(key, "tag") == 0) {
      if (strcmp(v, "small") == 0) {
        o->tag = TagMode::kSmall;
      } else if (strcmp(v, "explicit") == 0) {
        o->tag = TagMode::kExplicit;
      } else if (strncmp(v, "caller:", 7) == 0 && v[7] != '\0' && strlen(v + 7) < sizeof o->tag_globs) {
        o->tag = TagMode::kCaller;
        strcpy(o->tag_globs, v + 7);
      } else {
        Warn("bad value '%s' for %s (%s); keeping the default", v, key,
             "expected small, explicit or caller:GLOB[,GLOB]");
      }
      return;
    }
    if (strcmp(key, "malloc_align") == 0) {
      long x;
      if (Int(v, 8, 16, &x) && (x == 8 || x == 16)) {
        o->malloc_align = static_cast<int>(x);
      } else {
        Warn("bad value '%s' for %s (%s); keeping the default", v, key, "expected 8 or 16");
      }
      return;
    }
    if (strcmp(key, "track") == 0) return IntOpt(key, v, 0, 1, "expected 0 or 1", &o->track);
    if (strcmp(key, "stack_depth") == 0) return IntOpt(key, v, 0, 64, "expected 0..64", &o->stack_depth);
    if (strcmp(key, "report") == 0) {
      if (*v != '\0' && strlen(v) < sizeof o->report) {
        strcpy(o->report, v);
      } else {
        Warn("bad value '%s' for %s (%s); keeping the default", v, key,
             "expected a path of at most 1023 bytes, or none");
      }
      return;
    }
    if (strcmp(key, "drain_at_exit") == 0) return IntOpt(key, v, 0, 1, "expected 0 or 1", &o->drain_at_exit);
    if (strcmp(key, "snapshot_interval") == 0) {
      return IntOpt(key, v, 0, 86400, "expected seconds, 0..86400", &o->snapshot_interval);
    }
    if (strcmp(key, "quiet") == 0) return IntOpt(key, v, 0, 1, "expected 0 or 1", &o->quiet);
    if (strcmp(key, "leak_exitcode") == 0) {
      return IntOpt(key, v, 0, 255, "expected an exit status, 0..255", &o->leak_exitcode);
    }
    if (strcmp(key, "leak_kinds") == 0) {
      int kinds = 0;
      bool ok = *v != '\0';
      for (const char* p = v; ok && *p != '\0';) {
        const char* end = strchr(p, ',');
        const size_t n = end != nullptr ? static_cast<size_t>(end - p) : strlen(p);
        auto is = [&](const char* word) { return n == strlen(word) && strncmp(p, word, n) == 0; };
        if (is("definite")) {
          kinds |= kLeakDefinite;
        } else if (is("indirect")) {
          kinds |= kLeakIndirect;
        } else if (is("possible")) {
          kinds |= kLeakPossible;
        } else if (is("reachable")) {
          kinds |= kLeakReachable;
        } else if (is("all")) {
          kinds |= kLeakDefinite | kLeakIndirect | kLeakPossible | kLeakReachable;
        } else {
          ok = false;
        }
        p = end != nullptr ? end + 1 : p + n;
      }
      if (ok) {
        o->leak_kinds = kinds;
      } else {
        Warn("bad value '%s' for %s (%s); keeping the default", v, key,
             "expected a comma-separated list of definite, indirect, possible, reachable, or all");
      }
      return;
    }
    if (strcmp(key, "reachability") == 0) return IntOpt(key, v, 0, 1, "expected 0 or 1", &o->reachability);
    if (strcmp(key, "valgrind") == 0) return IntOpt(key, v, 0, 1, "expected 0 or 1", &o->valgrind);
    if (strcmp(key, "help") == 0) return IntOpt(key, v, 0, 1, "expected 0 or 1", &o->help);
    Warn("unknown option '%s'%s%s; ignored (help=1 lists the options)", key, "", "");
  }
};

}  // namespace

int ParseOptions(const char* text, Options* out, WarnFn warn, void* ctx) {
  Parser parser{out, warn, ctx};
  if (text == nullptr) return 0;
  // The ASAN_OPTIONS convention: ':' separates pairs (',' and whitespace too, except inside values
  // that take lists, where ',' belongs to the value).
  char item[1200];
  const char* s = text;
  while (*s != '\0') {
    while (*s == ':' || *s == ' ' || *s == '\t' || *s == '\n') ++s;
    if (*s == '\0') break;
    size_t n = 0;
    while (s[n] != '\0' && s[n] != ':' && s[n] != ' ' && s[n] != '\t' && s[n] != '\n') ++n;
    // tag=caller:GLOB keeps its colon: "caller" is followed by the glob list.
    if (n == 10 && strncmp(s, "tag=caller", 10) == 0 && s[n] == ':') {
      ++n;
      while (s[n] != '\0' && s[n] != ':' && s[n] != ' ' && s[n] != '\t' && s[n] != '\n') ++n;
    }
    if (n >= sizeof item) {
      parser.Warn("option '%.40s...' is too long; ignored%s%s", s, "", "");
      s += n;
      continue;
    }
    memcpy(item, s, n);
    item[n] = '\0';
    s += n;
    char* eq = strchr(item, '=');
    if (eq == nullptr) {
      parser.Warn("option '%s' has no value (expected key=value); ignored%s%s", item, "", "");
      continue;
    }
    *eq = '\0';
    parser.Set(item, eq + 1);
  }
  return parser.warnings;
}

const char* LeakKindsText(int kinds, char* out, size_t size) {
  static const struct {
    int bit;
    const char* name;
  } names[] = {{kLeakDefinite, "definite"}, {kLeakIndirect, "indirect"}, {kLeakPossible, "possible"},
               {kLeakReachable, "reachable"}};
  size_t used = 0;
  if (size == 0) return out;
  out[0] = '\0';
  for (const auto& n : names) {
    if ((kinds & n.bit) == 0) continue;
    const int w = snprintf(out + used, size - used, "%s%s", used == 0 ? "" : ",", n.name);
    if (w < 0 || static_cast<size_t>(w) >= size - used) break;
    used += static_cast<size_t>(w);
  }
  if (used == 0) snprintf(out, size, "none");
  return out;
}

void DescribeOptions(const Options& o, WarnFn emit, void* ctx) {
  char line[1400];
  char kinds[64];
  const char* tag = o.tag == TagMode::kSmall ? "small" : o.tag == TagMode::kExplicit ? "explicit" : "caller:";
  struct Row {
    const char* key;
    long value;
    const char* text;
    const char* meaning;
  } rows[] = {
      {"pool", o.pool, nullptr, "1 pools small requests; 0 passes every request through"},
      {"pool_size", o.pool_size, nullptr, "usable bytes per pool, 8..1048576; negative turns pooling off"},
      {"pools", o.pools, nullptr, "pools kept per thread cache, 0..8"},
      {"tag", 0, tag, "small | explicit | caller:GLOB[,GLOB]: which requests are pooled"},
      {"malloc_align", o.malloc_align, nullptr, "alignment of pooled malloc blocks: 16, or 8 (size-dependent)"},
      {"track", o.track, nullptr, "1 keeps a table of live blocks for leak accounting; 0 counts only"},
      {"stack_depth", o.stack_depth, nullptr, "frames captured per tracked allocation, 0..64"},
      {"report", 0, o.report, "report path (%p pid, %e executable, %t start time, %% a %) or none"},
      {"drain_at_exit", o.drain_at_exit, nullptr, "1 releases every cached pool at exit"},
      {"snapshot_interval", o.snapshot_interval, nullptr, "seconds between report rewrites; 0 only at exit"},
      {"quiet", o.quiet, nullptr, "1 prints nothing on stderr"},
      {"leak_exitcode", o.leak_exitcode, nullptr, "N > 0: status N from exit() (not _exit) when the program leaks"},
      {"reachability", o.reachability, nullptr, "1 classifies the blocks live at exit as memcheck does (track=1)"},
      {"leak_kinds", 0, LeakKindsText(o.leak_kinds, kinds, sizeof kinds),
       "what leak_exitcode judges after the scan: definite,indirect,possible,reachable or all"},
      {"valgrind", o.valgrind, nullptr, "1 describes pools to memcheck under valgrind"},
      {"help", o.help, nullptr, "1 prints this list at start-up"},
  };
  for (const Row& r : rows) {
    if (r.text != nullptr) {
      snprintf(line, sizeof line, "poolscope: option %s=%s%s  # %s", r.key, r.text,
               (r.key[0] == 't' && o.tag == TagMode::kCaller) ? o.tag_globs : "", r.meaning);
    } else {
      snprintf(line, sizeof line, "poolscope: option %s=%ld  # %s", r.key, r.value, r.meaning);
    }
    emit(ctx, line);
  }
}

}  // namespace poolscope
