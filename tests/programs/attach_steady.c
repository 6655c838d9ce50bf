/* Allocates steadily for a few seconds (a fixed number of operations, so that its output does not
 * depend on timing), keeping a window of live blocks of mixed sizes: malloc, free, realloc, calloc
 * and, every 97th, a block above the pool size. Prints a checksum of the blocks' contents and exits
 * with status 3. `attach_steady [OPS] [THREADS]`: OPS operations (default 12,000,000) on each of
 * THREADS threads (default 1, the main thread alone), each with its own window.
 * With STEADY_GAP_FILE set, writes there the longest time (ms) between two batches of 1,000 operations
 * of the main loop: how long the process stood still (an attach stops it).
 * With STEADY_UNTIL_ATTACHED set, each thread, its OPS done, goes on with the same mix of calls on its
 * window (outside the checksum) until libpoolscope.so is in the process and a second and a half more,
 * or 60 s have passed: every thread then still allocates after an attach, however late it comes (the
 * GOT entries are rewritten after the library is loaded, which a loaded machine stretches).
 * With STEADY_STOP_FILE set, each thread goes on so (after the above) until that file exists, or 60 s.
 * With STEADY_CALLS_FILE set, writes there how many blocks the process created in all (malloc, calloc
 * and realloc(NULL) calls): an upper bound for what an attach that came after the first can count. */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kWindow = 1024, kBatch = 1000 };

struct Work {
  unsigned long ops;
  int until_attached;
  const char* stop_file;
  unsigned long seed;
  unsigned long sum;
  unsigned long created;
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

/* One call of the mix on the window: realloc, calloc after a free, or malloc after a free, then the
 * block filled. Returns the block's size; counts the blocks it creates in *created. */
static size_t Step(unsigned long n, unsigned long seed, char** win, size_t* sizes, int* index,
                   unsigned long* created) {
  unsigned long x = (n + seed) * 2654435761u;
  size_t sz = 1 + x % 200;
  if (n % 97 == 0) sz = 4096 + n % 5000;
  int i = (int)((x >> 7) % kWindow);
  switch (n % 4) {
    case 0:
      if (win[i] == NULL) ++*created;
      win[i] = realloc(win[i], sz);
      break;
    case 1: free(win[i]); win[i] = calloc(1, sz); ++*created; break;
    default: free(win[i]); win[i] = malloc(sz); ++*created; break;
  }
  sizes[i] = sz;
  memset(win[i], (int)(n & 0xff), sz);
  *index = i;
  return sz;
}

static void* Run(void* arg) {
  struct Work* w = arg;
  char** win = calloc(kWindow, sizeof *win);
  size_t* sizes = calloc(kWindow, sizeof *sizes);
  unsigned long created = 2;
  unsigned long sum = 0;
  double last = Now();
  for (unsigned long n = 0; n < w->ops; ++n) {
    int i;
    size_t sz = Step(n, w->seed, win, sizes, &i, &created);
    sum = sum * 31 + (unsigned char)win[i][sz / 2] + sz;
    if (n % kBatch == 0) {
      double t = Now();
      if (t - last > w->max_gap) w->max_gap = t - last;
      last = t;
    }
  }
  for (int i = 0; i < kWindow; ++i) {
    if (win[i] != NULL) sum += (unsigned char)win[i][sizes[i] - 1];
  }
  if (w->until_attached || w->stop_file != NULL) {
    const double give_up = Now() + 60;
    double seen = 0;  /* when libpoolscope.so was first seen in the process */
    for (unsigned long n = w->ops;; ++n) {
      int i;
      Step(n, w->seed, win, sizes, &i, &created);
      if (n % kBatch != 0) continue;
      const double t = Now();
      if (t > give_up) break;
      if (w->until_attached) {
        if (seen == 0 && PoolscopeLoaded()) seen = t;
        if (seen == 0 || t - seen <= 1.5) continue;
      }
      if (w->stop_file == NULL || access(w->stop_file, F_OK) == 0) break;
    }
  }
  for (int i = 0; i < kWindow; ++i) free(win[i]);
  free(sizes);
  free(win);
  w->sum = sum;
  w->created = created;
  return NULL;
}

/* Writes `text` to the file the environment variable `var` names, when it is set. */
static void WriteToFileNamedBy(const char* var, const char* text) {
  const char* path = getenv(var);
  if (path == NULL) return;
  FILE* f = fopen(path, "w");
  if (f != NULL) {
    fputs(text, f);
    fclose(f);
  }
}

int main(int argc, char** argv) {
  unsigned long ops = argc > 1 ? strtoul(argv[1], NULL, 10) : 12000000;
  int threads = argc > 2 ? atoi(argv[2]) : 1;
  if (threads < 1 || threads > 64) return 2;
  struct Work work[64];
  pthread_t tid[64];
  for (int t = 0; t < threads; ++t) {
    work[t] = (struct Work){ops, getenv("STEADY_UNTIL_ATTACHED") != NULL, getenv("STEADY_STOP_FILE"),
                            (unsigned long)t * 7919, 0, 0, 0};
    if (t > 0) pthread_create(&tid[t], NULL, Run, &work[t]);
  }
  Run(&work[0]);
  unsigned long total = 0, created = 0;
  for (int t = 0; t < threads; ++t) {
    if (t > 0) pthread_join(tid[t], NULL);
    total = total * 1000003 + work[t].sum;
    created += work[t].created;
  }
  printf("threads %d ops %lu checksum %lu\n", threads, ops, total % 1000000007);
  char text[32];
  snprintf(text, sizeof text, "%.1f\n", work[0].max_gap * 1e3);
  WriteToFileNamedBy("STEADY_GAP_FILE", text);
  snprintf(text, sizeof text, "%lu\n", created);
  WriteToFileNamedBy("STEADY_CALLS_FILE", text);
  return 3;
}
