/* File: bench/arena_loop.c
 *
 * N rounds of the explicit arena pattern (article_bench's arena benchmark), nothing else:
 * poolscope_arena_open, allocate an int (4 bytes, align 4) and 20 bytes (align 1), close; through
 * the client library, so without libpoolscope.so it is calloc + free. For instruction counts under
 * callgrind (LOOP=arena_loop bench/callgrind_pair.sh: instructions per round = (X(2N) - X(N)) / N).
 * Usage: arena_loop N [ignored]. Prints nothing; exits 0. */
#include <stdlib.h>

#include "interpose/poolscope.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const long n = atol(argv[1]);
  for (long i = 0; i < n; ++i) {
    poolscope_arena* a = poolscope_arena_open();
    void* p = poolscope_arena_alloc(a, sizeof(int), _Alignof(int));
    void* q = poolscope_arena_alloc(a, 20, 1);
    __asm__ volatile("" : : "g"(p), "g"(q) : "memory"); /* the blocks escape */
    poolscope_arena_close(a);
  }
  return 0;
}
