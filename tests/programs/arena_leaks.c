/* File: tests/programs/arena_leaks.c
 *
 * An explicit arena that is never closed, next to arenas that are: the open arena's blocks are live
 * logical blocks at exit, and the report must name who allocated them (arena_leaks_test). Built -O2
 * without frame pointers, like the other leak programs; the functions are noinline and use what they
 * allocate afterwards, so no call is a tail call that would drop their frame.
 *
 * leak_pooled_in_arena: 3 blocks of 16 bytes (a pool serves them when pooling is on).
 * leak_large_in_arena:  1 block of 500 bytes (larger than a pool: the regular path).
 * rounds_of_closed_arenas: 200 arenas opened, filled and closed: nothing of theirs is live at exit.
 * rounds_of_small_arenas: the same with small blocks only (an int and 20 bytes, the inline open and
 * close's rounds when nothing is tracked): nothing of theirs is live at exit either.
 * Prints one line that depends only on the work done. */
#include <stdio.h>
#include <string.h>

#include "interpose/poolscope.h"

static unsigned char* g_kept[4];

__attribute__((noinline)) int leak_pooled_in_arena(poolscope_arena* a) {
  int sum = 0;
  for (int i = 0; i < 3; ++i) {
    g_kept[i] = poolscope_arena_alloc(a, 16, 8);
    if (g_kept[i] == NULL) return -1000;
    memset(g_kept[i], i + 1, 16);
    sum += g_kept[i][15];
  }
  return sum;
}

__attribute__((noinline)) int leak_large_in_arena(poolscope_arena* a) {
  g_kept[3] = poolscope_arena_alloc(a, 500, 8);
  if (g_kept[3] == NULL) return -1000;
  memset(g_kept[3], 9, 500);
  return g_kept[3][499];
}

__attribute__((noinline)) int rounds_of_closed_arenas(void) {
  int sum = 0;
  for (int r = 0; r < 200; ++r) {
    poolscope_arena* a = poolscope_arena_open();
    if (a == NULL) return -1000;
    int* x = poolscope_arena_alloc(a, sizeof(int), sizeof(int));
    char* big = poolscope_arena_alloc(a, 700, 8);
    if (x == NULL || big == NULL) return -1000;
    *x = r;
    big[699] = 1;
    sum += *x % 3 + big[699];
    poolscope_arena_close(a);
  }
  return sum;
}

__attribute__((noinline)) int rounds_of_small_arenas(void) {
  int sum = 0;
  for (int r = 0; r < 200; ++r) {
    poolscope_arena* a = poolscope_arena_open();
    if (a == NULL) return -1000;
    int* x = poolscope_arena_alloc(a, sizeof(int), sizeof(int));
    char* s = poolscope_arena_alloc(a, 20, 1);
    if (x == NULL || s == NULL) return -1000;
    *x = r;
    s[19] = 2;
    sum += *x % 5 + s[19];
    poolscope_arena_close(a);
  }
  return sum;
}

int main(void) {
  int closed = rounds_of_closed_arenas() + rounds_of_small_arenas();
  poolscope_arena* a = poolscope_arena_open();  /* never closed */
  if (a == NULL) return 2;
  int pooled = leak_pooled_in_arena(a);
  int large = leak_large_in_arena(a);
  printf("arena_leaks closed=%d pooled=%d large=%d\n", closed, pooled, large);
  return 0;
}
