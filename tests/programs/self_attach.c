/* Loads libpoolscope.so into itself as `poolscope attach` has gdb do it in another process, without
 * gdb: sets POOLSCOPE_ATTACH to the options (argv[2]), dlopens the library (argv[1]), removes the
 * variable and calls poolscope_attach_start. From then on its allocator calls go through the
 * library's GOT hooks (interpose/attach.cc), exactly as in an attached process. Then it leaks
 * 3 blocks of 40 bytes through malloc and 2 of 24 through calloc, each from a function of its own,
 * and exits; the library writes the report at exit. Prints "attached N" (N: the GOT entries
 * rewritten, negative when the attach failed) and exits 0, or 1 when the attach failed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

void* volatile kept[5];

__attribute__((noinline)) void leak_by_malloc(int i) { kept[i] = malloc(40); }
__attribute__((noinline)) void leak_by_calloc(int i) { kept[i] = calloc(1, 24); }

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: self_attach LIBPOOLSCOPE OPTIONS\n");
    return 2;
  }
  setenv("POOLSCOPE_ATTACH", argv[2], 1);
  void* lib = dlopen(argv[1], RTLD_NOW);
  unsetenv("POOLSCOPE_ATTACH");
  if (lib == NULL) {
    fprintf(stderr, "self_attach: %s\n", dlerror());
    return 1;
  }
  int (*start)(void) = (int (*)(void))dlsym(lib, "poolscope_attach_start");
  int patched = start != NULL ? start() : -100;
  printf("attached %d\n", patched);
  if (patched <= 0) return 1;
  for (int i = 0; i < 3; ++i) leak_by_malloc(i);
  for (int i = 3; i < 5; ++i) leak_by_calloc(i);
  return 0;
}
