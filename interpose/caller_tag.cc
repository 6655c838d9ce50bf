// File: interpose/caller_tag.cc
//
// See caller_tag.h.
#include "interpose/caller_tag.h"

#include <errno.h>
#include <link.h>

#include <atomic>
#include <cstddef>
#include <cstring>

#include "interpose/internal.h"
#include "track/populate.h"

namespace poolscope {
namespace {

constexpr int kMaxRanges = 1024;
constexpr int kMaxGlobs = 16;

struct Range {
  uintptr_t lo, hi;
  bool match;
};

POOLSCOPE_LARGE_BSS char g_globs[kMaxGlobs][256];
int g_nglobs = 0;
SpinLock g_lock;
POOLSCOPE_LARGE_BSS Range g_ranges[kMaxRanges];
std::atomic<int> g_nranges{0};
std::atomic<uint64_t> g_loads{0};  // dlpi_adds + dlpi_subs when the ranges were built
std::atomic<uint64_t> g_checks{0};

struct Build {
  int n;
  uint64_t loads;
};

int Collect(struct dl_phdr_info* info, size_t size, void* arg) {
  Build* b = static_cast<Build*>(arg);
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    b->loads = info->dlpi_adds + info->dlpi_subs;
  }
  const char* name = info->dlpi_name;
  if (name == nullptr || name[0] == '\0') {
    // The main program: dl_iterate_phdr gives it no name; match its path as it was started.
    name = program_invocation_name != nullptr ? program_invocation_name : "";
  }
  bool match = false;
  for (int g = 0; g < g_nglobs && !match; ++g) match = GlobMatch(g_globs[g], name);
  for (int i = 0; i < info->dlpi_phnum && b->n < kMaxRanges; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    g_ranges[b->n++] = Range{lo, lo + ph.p_memsz, match};
  }
  return 0;
}

void Rebuild() {
  SpinLockHolder lock(&g_lock);
  Build b = {0, 0};
  dl_iterate_phdr(Collect, &b);
  g_nranges.store(b.n, std::memory_order_release);
  g_loads.store(b.loads, std::memory_order_release);
}

int ReadLoads(struct dl_phdr_info* info, size_t size, void* arg) {
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    *static_cast<uint64_t*>(arg) = info->dlpi_adds + info->dlpi_subs;
  }
  return 1;  // the counters are the same in every entry: one is enough
}

// 1 matching, 0 not matching, -1 in no known object.
int Lookup(uintptr_t a) {
  int n = g_nranges.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (a >= g_ranges[i].lo && a < g_ranges[i].hi) return g_ranges[i].match ? 1 : 0;
  }
  return -1;
}

}  // namespace

bool GlobMatch(const char* p, const char* t) {
  const char* star = nullptr;
  const char* resume = nullptr;
  while (*t != '\0') {
    if (*p == '*') {
      star = p++;
      resume = t;
    } else if (*p == '?' || *p == *t) {
      ++p;
      ++t;
    } else if (star != nullptr) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (*p == '*') ++p;
  return *p == '\0';
}

void CallerTagInit(const char* globs) {
  g_nglobs = 0;
  const char* s = globs;
  while (*s != '\0' && g_nglobs < kMaxGlobs) {
    size_t n = strcspn(s, ",");
    if (n > 0 && n < sizeof g_globs[0]) {
      memcpy(g_globs[g_nglobs], s, n);
      g_globs[g_nglobs][n] = '\0';
      ++g_nglobs;
    }
    s += n;
    if (*s == ',') ++s;
  }
  Rebuild();
}

bool CallerTagged(const void* ra) {
  uintptr_t a = reinterpret_cast<uintptr_t>(ra);
  if ((g_checks.fetch_add(1, std::memory_order_relaxed) & 4095) == 0) {
    uint64_t loads = 0;
    dl_iterate_phdr(ReadLoads, &loads);
    if (loads != g_loads.load(std::memory_order_acquire)) Rebuild();
  }
  int r = Lookup(a);
  if (r < 0) {
    Rebuild();
    r = Lookup(a);
  }
  return r > 0;
}

}  // namespace poolscope
