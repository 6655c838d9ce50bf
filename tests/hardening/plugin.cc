// File: tests/hardening/plugin.cc
//
// libhardening_plugin.so, loaded and unloaded in a loop by `stress dlopen`: allocates in its
// constructor (freed by the destructor dlclose runs), in every call, and in a thread_local (dynamic
// TLS, which glibc's loader allocates through malloc).
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

namespace {
char* g_kept = nullptr;
thread_local int t_calls[16];  // trivially destructible: dlclose really unloads

__attribute__((constructor)) void Load() {
  g_kept = static_cast<char*>(calloc(1, 80));
}
__attribute__((destructor)) void Unload() {
  free(g_kept);
  g_kept = nullptr;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) long hardening_plugin_call(int x) {
  t_calls[x % 16] += 1;
  std::vector<std::string> words;
  for (int i = 0; i < 12; ++i) words.push_back(std::string(static_cast<size_t>(i + x), 'q'));
  long sum = 0;
  for (const auto& w : words) sum += static_cast<long>(w.size());
  char* p = static_cast<char*>(realloc(nullptr, 40));
  memset(p, 1, 40);
  p = static_cast<char*>(realloc(p, 400));
  free(p);
  if (g_kept != nullptr) sum += g_kept[0];
  return sum;
}
