/* Threads that resize real blocks (above the pool size) in a loop, sharing one glibc arena with no
 * thread cache (realloc_race_test sets GLIBC_TUNABLES): a block that realloc moves leaves an address
 * that another thread's realloc or malloc may be handed at once. `realloc_race [ITERS] [THREADS]`:
 * ITERS reallocs on each of THREADS threads (defaults 500,000 and 4), each over its own 8 blocks,
 * all freed at the end. Prints a checksum of the blocks' first bytes, which does not depend on timing. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct Work {
  unsigned long iters;
  unsigned long seed;
  unsigned long sum;
};

static void* Run(void* arg) {
  struct Work* w = arg;
  unsigned char* p[8] = {0};
  size_t sizes[8] = {0};
  unsigned long x = w->seed;
  for (unsigned long i = 0; i < w->iters; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    int k = (int)((x >> 33) % 8);
    size_t sz = 100 + (x >> 40) % 900;
    unsigned char* q = realloc(p[k], sz);
    if (q == NULL) abort();
    if (sizes[k] == 0) q[0] = (unsigned char)i;
    p[k] = q;
    sizes[k] = sz;
    w->sum = w->sum * 31 + q[0] + sz;
  }
  for (int k = 0; k < 8; ++k) free(p[k]);
  return NULL;
}

int main(int argc, char** argv) {
  unsigned long iters = argc > 1 ? strtoul(argv[1], NULL, 10) : 500000;
  int threads = argc > 2 ? atoi(argv[2]) : 4;
  if (threads < 1 || threads > 16) return 2;
  struct Work work[16];
  pthread_t tid[16];
  for (int t = 0; t < threads; ++t) {
    work[t] = (struct Work){iters, (unsigned long)t * 7919 + 1, 0};
    pthread_create(&tid[t], NULL, Run, &work[t]);
  }
  unsigned long total = 0;
  for (int t = 0; t < threads; ++t) {
    pthread_join(tid[t], NULL);
    total = total * 1000003 + work[t].sum;
  }
  printf("threads %d iters %lu checksum %lu\n", threads, iters, total % 1000000007);
  return 0;
}
