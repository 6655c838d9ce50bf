/* File: bench/malloc_loop.c
 *
 * N pairs of malloc(SIZE) + free, nothing else: the loop of docs/BENCHMARKS.md's per-pair instruction counts.
 * Usage: malloc_loop N [SIZE]   (SIZE defaults to 5). Prints nothing; exits 0. */
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const long n = atol(argv[1]);
  const size_t size = argc > 2 ? (size_t)atol(argv[2]) : 5;
  for (long i = 0; i < n; ++i) {
    void* p = malloc(size);
    __asm__ volatile("" : : "g"(p) : "memory"); /* the block escapes: the pair stays */
    free(p);
  }
  return 0;
}
