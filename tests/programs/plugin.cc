// File: tests/programs/plugin.cc
//
// libplugin.so, loaded and unloaded in a loop by dlopen_loop. Each load allocates a block in a
// constructor that stays live across calls and is freed in the destructor that dlclose() runs;
// each call allocates and frees through C and C++ entry points and returns a value that depends
// only on its argument. A thread_local counter makes glibc allocate the plugin's dynamic TLS block
// (through malloc, from inside the dynamic loader) on the first call on each thread.
#include <stdlib.h>
#include <string.h>

#include <map>
#include <string>
#include <vector>

namespace {

char* g_kept = nullptr;  // live from load to unload
thread_local int t_calls = 0;

__attribute__((constructor)) void PluginLoad() {
  g_kept = static_cast<char*>(malloc(48));
  if (g_kept != nullptr) memset(g_kept, 7, 48);
}

__attribute__((destructor)) void PluginUnload() {
  free(g_kept);
  g_kept = nullptr;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) long plugin_call(int x) {
  ++t_calls;
  std::map<std::string, std::vector<int>> table;
  for (int i = 0; i < 20; ++i) {
    table[std::to_string(i * x)].assign(static_cast<size_t>(i + 1), i);
  }
  long sum = 0;
  for (const auto& entry : table) {
    for (int v : entry.second) sum += v;
    sum += static_cast<long>(entry.first.size());
  }
  char* scratch = static_cast<char*>(calloc(static_cast<size_t>(x % 50 + 1), 3));
  if (scratch == nullptr) return -1;
  scratch = static_cast<char*>(realloc(scratch, 500));
  if (scratch == nullptr) return -1;
  free(scratch);
  return sum + (g_kept != nullptr ? g_kept[47] : -1000) + t_calls;
}
