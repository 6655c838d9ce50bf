/* File: tests/programs/arena_rounds.c
 *
 * The explicit arena API through the client library, checked by the program itself: many
 * open/allocate/close rounds (the pattern the inline paths serve), every block zero when handed out even
 * though the previous round filled its blocks, alignment honoured, nested arenas disjoint, requests
 * that do not fit served and zeroed too. Prints one line and exits 0 when all held, 1 otherwise; works
 * with or without libpoolscope.so preloaded (without it, arenas are calloc + free).
 * With --pooled (the test passes it when poolscope pools plain mallocs), also checks that a new
 * thread's first small malloc, which starts that thread's first pool, is 64-byte aligned: pools are
 * cache-line aligned however the next allocator is asked for them. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/poolscope.h"

static int failures;

static void check(int ok, const char* what, long round) {
  if (!ok && failures++ < 5) fprintf(stderr, "arena_rounds: %s (round %ld)\n", what, round);
}

static int all_zero(const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return 0;
  }
  return 1;
}

static void* first_small_malloc(void* out) {
  void* p = malloc(5);
  *(uintptr_t*)out = (uintptr_t)p;
  free(p);
  return NULL;
}

int main(int argc, char** argv) {
  const long rounds = 100000;
  if (argc > 1 && strcmp(argv[1], "--pooled") == 0) {
    for (int t = 0; t < 8; ++t) {
      uintptr_t p = 0;
      pthread_t th;
      if (pthread_create(&th, NULL, first_small_malloc, &p) != 0) return 2;
      pthread_join(th, NULL);
      check(p != 0 && p % 64 == 0, "a thread's first pool is not 64-byte aligned", t);
    }
  }
  for (long r = 0; r < rounds; ++r) {
    poolscope_arena* a = poolscope_arena_open();
    check(a != NULL, "open failed", r);
    if (a == NULL) break;
    size_t align = (size_t)1 << (r % 7);  /* 1 .. 64 */
    unsigned char* i = poolscope_arena_alloc(a, sizeof(int), _Alignof(int));
    unsigned char* b = poolscope_arena_alloc(a, 20, align);
    check(i != NULL && b != NULL, "alloc failed", r);
    if (i == NULL || b == NULL) break;
    check(((uintptr_t)i % _Alignof(int)) == 0 && ((uintptr_t)b % align) == 0, "misaligned", r);
    check(all_zero(i, sizeof(int)) && all_zero(b, 20), "block not zero", r);
    check(b >= i + sizeof(int) || b + 20 <= i, "blocks overlap", r);
    memset(i, 0xEE, sizeof(int));
    memset(b, 0xEE, 20);
    if (r % 1000 == 0) {
      /* Nested: never shares the outer arena's pool; a block too large for a pool takes the
       * regular path and is freed at close. */
      poolscope_arena* inner = poolscope_arena_open();
      unsigned char* n = poolscope_arena_alloc(inner, 8, 8);
      unsigned char* big = poolscope_arena_alloc(inner, 1000, 16);
      check(n != NULL && big != NULL, "inner alloc failed", r);
      if (n != NULL && big != NULL) {
        check(all_zero(n, 8) && all_zero(big, 1000), "inner block not zero", r);
        check(n + 8 <= i || n >= b + 20 || n + 8 <= b, "inner block inside the outer's", r);
        memset(big, 0xEE, 1000);
        memset(n, 0xEE, 8);
      }
      poolscope_arena_close(inner);
    }
    poolscope_arena_close(a);
  }
  printf("arena_rounds: %ld rounds, %d failures\n", rounds, failures);
  return failures == 0 ? 0 : 1;
}
