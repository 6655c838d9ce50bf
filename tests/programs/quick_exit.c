// A program that ends with quick_exit(): its at_quick_exit handler writes a line (stdio is not
// flushed by quick_exit, so with write()), and a 4321-byte block it never freed stays live. The exit
// status is 7. quick_exit_test checks that poolscope still writes its report, with that block in it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void handler(void) {
  static const char line[] = "at_quick_exit handler ran\n";
  if (write(1, line, sizeof line - 1) < 0) abort();
}

__attribute__((noinline)) static char* keep(size_t n) {
  char* p = malloc(n);
  if (p != NULL) memset(p, 1, n);
  return p;
}

int main(void) {
  if (at_quick_exit(handler) != 0) return 1;
  static char* kept;
  kept = keep(4321);
  for (int i = 0; i < 100; ++i) free(keep(24));
  quick_exit(kept != NULL ? 7 : 1);
}
