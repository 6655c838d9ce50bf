// File: track/dw_api.cc
#include "track/dw_api.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <mutex>

namespace poolscope {
namespace track {

DwApi g_dw;

namespace {

// Symbolizers holding the libraries (under g_dw_lock). The first loads them, the last closes them:
// what loading them allocates is given back when the report is written, so that a leak detector
// below poolscope finds none of it live at exit.
std::mutex g_dw_lock;
int g_dw_users = 0;
void* g_dw_handle = nullptr;
// Set when the last attempt to load them failed (g_dw_error says why), cleared when one succeeds.
std::atomic<bool> g_dw_failed{false};
char g_dw_error[300];

bool OpenDw() {
  void* h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);  // the program's lookups never see these names
  if (h == nullptr) {
    const char* why = dlerror();
    snprintf(g_dw_error, sizeof g_dw_error, "%s", why != nullptr ? why : "libdw.so.1: cannot be loaded");
    return false;
  }
  const char* missing = nullptr;
#define POOLSCOPE_DW_LOOKUP(name)                                      \
  g_dw.name = reinterpret_cast<decltype(&::name)>(dlsym(h, #name)); \
  if (g_dw.name == nullptr && missing == nullptr) missing = #name;
  POOLSCOPE_DW_FUNCTIONS(POOLSCOPE_DW_LOOKUP)
#undef POOLSCOPE_DW_LOOKUP
  if (missing != nullptr) {
    snprintf(g_dw_error, sizeof g_dw_error, "libdw.so.1 has no %s", missing);
    dlclose(h);
    return false;
  }
  g_dw_handle = h;
  return true;
}

}  // namespace

// Takes a hold on the libraries, loading them if no Symbolizer holds them; false when they cannot be
// loaded (no hold taken).
bool AcquireDw() {
  std::lock_guard<std::mutex> l(g_dw_lock);
  if (g_dw_users == 0 && !OpenDw()) {
    g_dw_failed = true;
    return false;
  }
  g_dw_failed = false;
  ++g_dw_users;
  return true;
}

void ReleaseDw() {
  std::lock_guard<std::mutex> l(g_dw_lock);
  if (--g_dw_users == 0) {
    dlclose(g_dw_handle);
    g_dw_handle = nullptr;
  }
}

const char* DwUnavailable() { return g_dw_failed ? g_dw_error : nullptr; }

}  // namespace track
}  // namespace poolscope
