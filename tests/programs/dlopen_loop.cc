// File: tests/programs/dlopen_loop.cc
//
// dlopen()s a plugin, calls plugin_call(i), dlclose()s it, LOOPS times (default 50), and prints the
// sum of the results. The dynamic loader allocates and frees link maps, scopes and TLS blocks through
// malloc on every round; the plugin's constructor allocates a block that its destructor frees.
//
// Usage: dlopen_loop PLUGIN_PATH [LOOPS]
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: dlopen_loop PLUGIN_PATH [LOOPS]\n");
    return 2;
  }
  const int loops = argc > 2 ? atoi(argv[2]) : 50;
  long total = 0;
  for (int i = 0; i < loops; ++i) {
    void* handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      fprintf(stderr, "dlopen_loop: %s\n", dlerror());
      return 3;
    }
    using Fn = long (*)(int);
    Fn fn = reinterpret_cast<Fn>(dlsym(handle, "plugin_call"));
    if (fn == nullptr) {
      fprintf(stderr, "dlopen_loop: %s\n", dlerror());
      return 3;
    }
    total += fn(i + 1);
    if (dlclose(handle) != 0) {
      fprintf(stderr, "dlopen_loop: %s\n", dlerror());
      return 3;
    }
  }
  printf("dlopen_loop loops=%d total=%ld\n", loops, total);
  return 0;
}
