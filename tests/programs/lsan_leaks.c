/* File: tests/programs/lsan_leaks.c
 *
 * Built with -fsanitize=leak (the shared liblsan, whose initialiser runs from the executable's
 * preinit_array, before libc's, and allocates): drops 100 blocks of 24 bytes and prints one line.
 * poolscope preloaded into it starts before libc has set the environment up (lsan_options_test). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* volatile sink;

__attribute__((noinline)) static void lose(int n) {
  for (int i = 0; i < n; ++i) {
    sink = malloc(24);
    memset(sink, 1, 24);
  }
  sink = NULL;
}

int main(void) {
  lose(100);
  printf("lsan_leaks: done\n");
  return 0;
}
