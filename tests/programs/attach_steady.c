/* Allocates steadily for a few seconds (a fixed number of operations, so that its output does not
 * depend on timing), keeping a window of live blocks of mixed sizes: malloc, free, realloc, calloc
 * and, every 97th, a block above the pool size. Prints a checksum of the blocks' contents and exits
 * with status 3. `attach_steady [OPS] [THREADS]`: OPS operations (default 12,000,000) on each of
 * THREADS threads (default 1, the main thread alone), each with its own window.
 * With STEADY_GAP_FILE set, writes there the longest time (ms) between two batches of 1,000 operations
 * of the main loop: how long the process stood still (an attach stops it).
 * With STEADY_UNTIL_ATTACHED set, each thread, its OPS done, goes on allocating (outside the checksum)
 * until libpoolscope.so is in the process and a second and a half more, or 60 s have passed: every
 * thread then still allocates after an attach, however late it comes (the GOT entries are rewritten
 * after the library is loaded, which a loaded machine stretches). */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kWindow = 1024, kBatch = 1000 };

struct Work {
  unsigned long ops;
  int until_attached;
  unsigned long seed;
  unsigned long sum;
  double max_gap;
};

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

/* Whether libpoolscope.so is among the loaded objects (an attach loads it without RTLD_GLOBAL, so
 * dlsym(RTLD_DEFAULT, ...) does not see its symbols). */
static int FindPoolscope(struct dl_phdr_info* info, size_t size, void* arg) {
  (void)size;
  (void)arg;
  return info->dlpi_name != NULL && strstr(info->dlpi_name, "libpoolscope") != NULL;
}
static int PoolscopeLoaded(void) { return dl_iterate_phdr(FindPoolscope, NULL); }

static void* Run(void* arg) {
  struct Work* w = arg;
  char** win = calloc(kWindow, sizeof *win);
  size_t* sizes = calloc(kWindow, sizeof *sizes);
  unsigned long sum = 0;
  double last = Now();
  for (unsigned long n = 0; n < w->ops; ++n) {
    unsigned long x = (n + w->seed) * 2654435761u;
    size_t sz = 1 + x % 200;
    if (n % 97 == 0) sz = 4096 + n % 5000;
    int i = (int)((x >> 7) % kWindow);
    switch (n % 4) {
      case 0: win[i] = realloc(win[i], sz); break;
      case 1: free(win[i]); win[i] = calloc(1, sz); break;
      default: free(win[i]); win[i] = malloc(sz); break;
    }
    sizes[i] = sz;
    memset(win[i], (int)(n & 0xff), sz);
    sum = sum * 31 + (unsigned char)win[i][sz / 2] + sz;
    if (n % kBatch == 0) {
      double t = Now();
      if (t - last > w->max_gap) w->max_gap = t - last;
      last = t;
    }
  }
  if (w->until_attached) {
    const double give_up = Now() + 60;
    double seen = 0;
    for (unsigned long n = 0;; ++n) {
      char* p = malloc(1 + n % 200);
      memset(p, (int)(n & 0xff), 1 + n % 200);
      /* (The block escapes: without this, GCC at -O2 drops the malloc, memset and free altogether.) */
      __asm__ volatile("" : : "r"(p) : "memory");
      free(p);
      if (n % kBatch != 0) continue;
      const double t = Now();
      if (seen == 0 && PoolscopeLoaded()) seen = t;
      if ((seen != 0 && t - seen > 1.5) || t > give_up) break;
    }
  }
  for (int i = 0; i < kWindow; ++i) {
    if (win[i] != NULL) sum += (unsigned char)win[i][sizes[i] - 1];
    free(win[i]);
  }
  free(sizes);
  free(win);
  w->sum = sum;
  return NULL;
}

int main(int argc, char** argv) {
  unsigned long ops = argc > 1 ? strtoul(argv[1], NULL, 10) : 12000000;
  int threads = argc > 2 ? atoi(argv[2]) : 1;
  if (threads < 1 || threads > 64) return 2;
  struct Work work[64];
  pthread_t tid[64];
  for (int t = 0; t < threads; ++t) {
    work[t] = (struct Work){ops, getenv("STEADY_UNTIL_ATTACHED") != NULL, (unsigned long)t * 7919, 0, 0};
    if (t > 0) pthread_create(&tid[t], NULL, Run, &work[t]);
  }
  Run(&work[0]);
  unsigned long total = 0;
  for (int t = 0; t < threads; ++t) {
    if (t > 0) pthread_join(tid[t], NULL);
    total = total * 1000003 + work[t].sum;
  }
  printf("threads %d ops %lu checksum %lu\n", threads, ops, total % 1000000007);
  const char* gap = getenv("STEADY_GAP_FILE");
  if (gap != NULL) {
    FILE* f = fopen(gap, "w");
    if (f != NULL) {
      fprintf(f, "%.1f\n", work[0].max_gap * 1e3);
      fclose(f);
    }
  }
  return 3;
}
