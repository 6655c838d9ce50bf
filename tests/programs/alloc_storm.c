/* File: tests/programs/alloc_storm.c
 *
 * Threads (argv[1], 1 to 8) that malloc and free without end: 64 slots each, a random one replaced at
 * every step by a block of 1 to 600 bytes, or one time in seven of 1,000 to 300,000 bytes (glibc then
 * grows and trims its heaps, or maps), so that a signal sent at any moment is likely to stop a thread
 * inside the allocator. With a second argument "77777", the main thread also makes one request of
 * 77,777 bytes after it starts (below_probe.c raises SIGTERM inside it). Prints "started" once the
 * threads run; never returns on its own. -fno-builtin keeps every malloc and free. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* churn(void* arg) {
  unsigned s = (unsigned)(unsigned long)arg * 2654435761u + 1;
  void* slots[64] = {0};
  for (;;) {
    s = s * 1103515245u + 12345u;
    unsigned i = (s >> 8) % 64;
    free(slots[i]);
    size_t n = (s >> 16) % 7 == 0 ? 1000 + (s >> 12) % 300000 : 1 + (s >> 16) % 600;
    slots[i] = malloc(n);
    if (slots[i] != NULL) memset(slots[i], 1, n < 64 ? n : 64);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  if (threads < 1 || threads > 8) {
    fprintf(stderr, "usage: alloc_storm THREADS [77777]\n");
    return 2;
  }
  pthread_t t[8];
  for (int i = 1; i < threads; ++i) {
    if (pthread_create(&t[i], NULL, churn, (void*)(long)i) != 0) return 1;
  }
  printf("started\n");
  fflush(stdout);
  if (argc > 2) {
    void* volatile p = malloc((size_t)atol(argv[2]));
    free(p);
    printf("survived the signal\n");
    return 3;
  }
  churn(0);
  return 0;
}
