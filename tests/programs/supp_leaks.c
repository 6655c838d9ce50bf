/* File: tests/programs/supp_leaks.c
 *
 * Leaks from several callers, each its own way of allocating, for suppression files written for the
 * program run bare (suppressions_adapt_test). Each caller leaks every block it makes:
 *   small_malloc  5 x malloc(24)             at or below a 64-byte pool: pooled
 *   kept_small    4 x malloc(32)             pooled
 *   small_calloc  2 x calloc(1, 40)          pooled
 *   dup_string    2 x strdup (12 bytes)      pooled (libc's strdup calls malloc)
 *   big_malloc    3 x malloc(200)            too large for a pool
 *   kept_big      2 x malloc(300)            too large
 *   grow          2 x realloc(malloc(24), 300): the block moves out of its pool (realloc)
 *   aligned       2 x posix_memalign(64, 100): too large (memcheck names it memalign, posix_memalign)
 *   inner_alloc   2 x malloc(48), called by outer_call: pooled (a suppression for outer_call's own
 *                 mallocs must not match these)
 * With the argument `frees` it also makes two invalid frees after the leaks:
 *   free_not_heap free() of a global's address (no pool's: poolscope passes it on)
 *   free_twice    free() twice of a malloc(24) block (pooled)
 * Prints nothing; exits 0. */
#include <stdlib.h>
#include <string.h>

int g_not_heap;
void* volatile g_sink;

__attribute__((noinline)) void small_malloc(void) {
  for (int i = 0; i < 5; ++i) g_sink = malloc(24);
}

__attribute__((noinline)) void kept_small(void) {
  for (int i = 0; i < 4; ++i) g_sink = malloc(32);
}

__attribute__((noinline)) void small_calloc(void) {
  for (int i = 0; i < 2; ++i) g_sink = calloc(1, 40);
}

__attribute__((noinline)) void dup_string(void) {
  for (int i = 0; i < 2; ++i) g_sink = strdup("a string 11");
}

__attribute__((noinline)) void big_malloc(void) {
  for (int i = 0; i < 3; ++i) g_sink = malloc(200);
}

__attribute__((noinline)) void kept_big(void) {
  for (int i = 0; i < 2; ++i) g_sink = malloc(300);
}

__attribute__((noinline)) void grow(void) {
  for (int i = 0; i < 2; ++i) g_sink = realloc(malloc(24), 300);
}

__attribute__((noinline)) void aligned(void) {
  for (int i = 0; i < 2; ++i) {
    void* p = NULL;
    if (posix_memalign(&p, 64, 100) == 0) g_sink = p;
  }
}

__attribute__((noinline)) void* inner_alloc(void) { return malloc(48); }

__attribute__((noinline)) void outer_call(void) {
  for (int i = 0; i < 2; ++i) g_sink = inner_alloc();
}

__attribute__((noinline)) void free_not_heap(void) {
  int* volatile not_heap = &g_not_heap;
  free(not_heap);
}

__attribute__((noinline)) void free_twice(void) {
  void* p = malloc(24);
  g_sink = p;
  free(p);
  free(g_sink);
}

int main(int argc, char** argv) {
  small_malloc();
  kept_small();
  small_calloc();
  dup_string();
  big_malloc();
  kept_big();
  grow();
  aligned();
  outer_call();
  if (argc > 1 && strcmp(argv[1], "frees") == 0) {
    free_not_heap();
    free_twice();
  }
  g_sink = NULL;
  return 0;
}
