// A correct program that churns small blocks: 1,000 blocks of 24 bytes allocated and freed, three times,
// then blocks grown by realloc within and out of the pool size, and a block freed on another thread.
// It has no memory error and frees everything, so memcheck must report none below poolscope either
// (valgrind_errors_test).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* FreeOnThread(void* p) {
  free(p);
  return NULL;
}

int main(void) {
  static void* blocks[1000];
  unsigned long sum = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 1000; ++i) {
      blocks[i] = malloc(24);
      memset(blocks[i], i & 0xff, 24);
    }
    for (int i = 0; i < 1000; ++i) {
      sum += ((unsigned char*)blocks[i])[23];
      free(blocks[i]);
    }
  }
  for (int i = 0; i < 100; ++i) {
    char* p = malloc(8);
    memset(p, 1, 8);
    p = realloc(p, 40);   // within the pool size
    memset(p, 2, 40);
    p = realloc(p, 400);  // out of it
    memset(p, 3, 400);
    sum += (unsigned char)p[399];
    free(p);
  }
  void* q = calloc(4, 8);
  pthread_t t;
  if (pthread_create(&t, NULL, FreeOnThread, q) != 0) return 1;
  pthread_join(t, NULL);
  printf("free_churn: %lu\n", sum);
  return 0;
}
