// Memory in three phases, for the report's timeline (timeline_test): `pre_ms` of allocation churn
// (one 1,000-byte block allocated and freed at a time), then N blocks allocated and held for
// `hold_ms` of the same churn, then freed, then `post_ms` of churn. The churn keeps the regular
// allocation path busy, where the timeline samples; nothing else allocates: the output is written
// with write(2), not stdio, so the live blocks at exit are those before the first phase.
// Usage: phases N PRE_MS HOLD_MS POST_MS
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long ElapsedMs(const struct timespec* a) {
  struct timespec b;
  clock_gettime(CLOCK_MONOTONIC, &b);
  return (b.tv_sec - a->tv_sec) * 1000 + (b.tv_nsec - a->tv_nsec) / 1000000;
}

static unsigned long Churn(long ms) {
  struct timespec start;
  unsigned long sum = 0;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    char* p = malloc(1000);
    if (p == NULL) abort();
    p[0] = 1;
    sum += (unsigned long)p[0];
    free(p);
  } while (ElapsedMs(&start) < ms);
  return sum;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    static const char kUsage[] = "usage: phases N PRE_MS HOLD_MS POST_MS\n";
    (void)!write(2, kUsage, sizeof kUsage - 1);
    return 2;
  }
  const long n = atol(argv[1]);
  void** blocks = malloc((size_t)n * sizeof(void*));
  if (blocks == NULL) return 1;
  unsigned long sum = Churn(atol(argv[2]));
  for (long i = 0; i < n; ++i) {
    blocks[i] = malloc(i % 2 ? 24 : 200);
    if (blocks[i] == NULL) return 1;
    memset(blocks[i], 1, 24);
  }
  sum += Churn(atol(argv[3]));
  for (long i = 0; i < n; ++i) free(blocks[i]);
  sum += Churn(atol(argv[4]));
  free(blocks);
  char line[64];
  const int len = snprintf(line, sizeof line, "done %ld %lu\n", n, (unsigned long)(sum > 0));
  (void)!write(1, line, (size_t)len);
  return 0;
}
