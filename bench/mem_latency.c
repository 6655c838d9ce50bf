/* File: bench/mem_latency.c
 *
 * The time of one load that misses the caches: a chain of dependent loads through a random
 * permutation of 64-byte lines in a buffer of SIZE MiB, so each load waits for the one before.
 * Usage: mem_latency [MIB...] (default 1 8 16 64). Prints one line per size: "MIB MiB: X ns per load".
 *
 * Why it is here: a live-block table that no cache holds costs about this much per lookup, and a
 * tracked free of a block that outlived the thread's young table must finish its lookup before the
 * block goes back to the real allocator (docs/BENCHMARKS.md, addendum 7). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t next_random(uint64_t* state) {
  *state = *state * 6364136223846793005u + 1442695040888963407u;
  return *state >> 17;
}

static double ns_per_load(size_t mib) {
  const size_t lines = mib * 1024 * 1024 / 64;
  size_t* buf = aligned_alloc(64, lines * 64);
  size_t* order = malloc(lines * sizeof(size_t));
  if (buf == NULL || order == NULL) return -1;
  for (size_t i = 0; i < lines; ++i) order[i] = i;
  uint64_t state = 1;
  for (size_t i = lines - 1; i > 0; --i) {
    size_t j = next_random(&state) % (i + 1), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (size_t i = 0; i < lines; ++i) buf[order[i] * 8] = order[(i + 1) % lines] * 8;
  const size_t steps = 20000000;
  struct timespec t0, t1;
  size_t at = 0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (size_t i = 0; i < steps; ++i) at = buf[at];
  clock_gettime(CLOCK_MONOTONIC, &t1);
  __asm__ volatile("" : : "r"(at));
  free(order);
  free(buf);
  return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)steps;
}

int main(int argc, char** argv) {
  static const size_t defaults[] = {1, 8, 16, 64};
  const int n = argc > 1 ? argc - 1 : 4;
  for (int i = 0; i < n; ++i) {
    const size_t mib = argc > 1 ? (size_t)atol(argv[i + 1]) : defaults[i];
    if (mib == 0) {
      fprintf(stderr, "mem_latency: %s: expected a size in MiB\n", argv[i + 1]);
      return 2;
    }
    printf("%zu MiB: %.1f ns per load\n", mib, ns_per_load(mib));
  }
  return 0;
}
