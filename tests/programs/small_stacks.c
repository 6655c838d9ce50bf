/* File: tests/programs/small_stacks.c
 *
 * Threads made with the smallest stack glibc allows (PTHREAD_STACK_MIN, 16 KiB on x86-64, from which
 * glibc also takes the thread's static TLS and its descriptor), each of which first uses part of its
 * stack (argv[1] bytes, default 4096) and then allocates: sizes below and above the pool size, freed,
 * and one 100-byte block per thread that main keeps (4 threads: the only leak, 400 bytes, allocated in
 * `worker`). Built -O2 without frame pointers. Prints one line; exits 0. */
#include <alloca.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kThreads = 4, kRounds = 500, kBlocks = 64 };

static size_t g_reserve = 4096;

__attribute__((noinline)) static unsigned long churn(volatile char* pad) {
  void* blocks[kBlocks];
  unsigned long sum = 0;
  for (int r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kBlocks; ++i) {
      size_t n = 1 + (size_t)(i * 37 + r) % 300;
      blocks[i] = malloc(n);
      if (blocks[i] == NULL) abort();
      memset(blocks[i], i, n);
    }
    for (int i = 0; i < kBlocks; ++i) {
      sum += ((unsigned char*)blocks[i])[0];
      free(blocks[i]);
    }
  }
  return sum + (unsigned char)pad[0];
}

__attribute__((noinline)) static void* worker(void* arg) {
  /* The program's own use of its stack, written page by page so that it is really there. */
  volatile char* pad = alloca(g_reserve);
  for (size_t i = 0; i < g_reserve; i += 64) pad[i] = (char)i;
  *(unsigned long*)arg = churn(pad);
  return malloc(100);
}

int main(int argc, char** argv) {
  if (argc > 1) g_reserve = strtoul(argv[1], NULL, 10);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN) != 0) return 2;
  void* kept[kThreads];
  unsigned long sums[kThreads];
  unsigned long total = 0;
  for (int t = 0; t < kThreads; ++t) {
    pthread_t thread;
    if (pthread_create(&thread, &attr, worker, &sums[t]) != 0) return 3;
    if (pthread_join(thread, &kept[t]) != 0 || kept[t] == NULL) return 4;
    total += sums[t];
  }
  printf("%d threads of %d bytes of stack, %zu used first: %lu\n", kThreads, (int)PTHREAD_STACK_MIN,
         g_reserve, total);
  return 0;
}
