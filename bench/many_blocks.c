/* File: bench/many_blocks.c
 *
 * 5,000,000 small allocations (16 to 96 bytes) from four call sites with different stacks; every
 * second one is freed as the loop goes (the block allocated just before it), so 2,500,000 are live at
 * exit, held in an array. Ends with exit(0), so atexit handlers and the preload library's exit
 * report run. The many-live-blocks benchmark's workload (bench/many_blocks.sh).
 * Usage: many_blocks [N]   (N allocations, default 5000000). Prints nothing. */
#include <stdint.h>
#include <stdlib.h>

/* Four sites, each its own function not inlined, each reached through a different chain, so each
 * block's recorded stack names its site. */
#define SITE(name, base)                                                \
  __attribute__((noinline)) static void* name(size_t extra) {           \
    void* p = malloc((base) + extra);                                    \
    __asm__ volatile("" : : "g"(p) : "memory");                         \
    return p;                                                            \
  }
SITE(site_a, 16)
SITE(site_b, 24)
SITE(site_c, 40)
SITE(site_d, 64)

__attribute__((noinline)) static void* via_one(int k, size_t extra) {
  void* p = k ? site_b(extra) : site_a(extra);
  __asm__ volatile("" : : "g"(p) : "memory");
  return p;
}
__attribute__((noinline)) static void* via_two(int k, size_t extra) {
  void* p = k ? site_d(extra) : site_c(extra);
  __asm__ volatile("" : : "g"(p) : "memory");
  return p;
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 5000000;
  if (n < 2) return 2;
  void** live = malloc((size_t)(n / 2) * sizeof *live);
  if (!live) return 1;
  uint32_t x = 2463534242u; /* xorshift: sizes and sites vary, the same each run */
  long kept = 0;
  void* pending = NULL;
  for (long i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    const size_t extra = x % 33; /* 16..48, 24..56, 40..72, 64..96 bytes */
    const int site = (int)((x >> 8) & 3);
    void* p = site < 2 ? via_one(site, extra) : via_two(site - 2, extra);
    if (!p) return 1;
    if (i & 1) { /* keep one of each pair, free the other */
      if (x & 0x10000) {
        live[kept++] = p;
        free(pending);
      } else {
        live[kept++] = pending;
        free(p);
      }
    } else {
      pending = p;
    }
  }
  __asm__ volatile("" : : "g"(live) : "memory");
  if (kept != n / 2) return 1;
  exit(0); /* not _exit: the exit path (and a preloaded report) runs with every kept block live */
}
