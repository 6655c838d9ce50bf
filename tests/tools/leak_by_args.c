/* File: tests/tools/leak_by_args.c
 *
 * Leaks from three call sites, as many blocks as its arguments say: A B C leaks A blocks of 100
 * bytes from leak_a, B of 1000 from leak_b, C of 10 from leak_c (diff_test). */
#include <stdlib.h>
#include <string.h>

static void* volatile sink;

__attribute__((noinline)) static void leak(size_t size) {
  void* block = malloc(size);
  memset(block, 1, size);
  sink = block;
}
__attribute__((noinline)) void leak_a(int n) { for (int i = 0; i < n; ++i) leak(100); }
__attribute__((noinline)) void leak_b(int n) { for (int i = 0; i < n; ++i) leak(1000); }
__attribute__((noinline)) void leak_c(int n) { for (int i = 0; i < n; ++i) leak(10); }

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  leak_a(atoi(argv[1]));
  leak_b(atoi(argv[2]));
  leak_c(atoi(argv[3]));
  sink = NULL;
  return 0;
}
