/* File: tests/programs/small_stacks.c
 *
 * Threads made with the smallest stack glibc allows (PTHREAD_STACK_MIN, 16 KiB on x86-64, from which
 * glibc also takes the thread's static TLS and its descriptor), each of which first uses part of its
 * stack (argv[1] bytes, default 4096) and then allocates: sizes below and above the pool size, freed,
 * and one 100-byte block per thread that main keeps (4 threads: the only leak, 400 bytes, allocated in
 * `worker`). Built -O2 without frame pointers. Prints one line; exits 0. With argv[2] "exit", the last
 * thread prints the line and ends the process itself, exit(3), with its own small stack, keeping its
 * block in a global. */
#include <alloca.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kThreads = 4, kRounds = 500, kBlocks = 64 };

static size_t g_reserve = 4096;
static int g_exit_from_thread;
static void* volatile g_last_kept;

struct Work {
  int last;
  unsigned long sum;
};

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
  struct Work* w = arg;
  w->sum = churn(pad);
  void* kept = malloc(100);
  if (w->last && g_exit_from_thread) {
    g_last_kept = kept;
    printf("%d threads of %d bytes of stack, %zu used first, the last one calls exit(3)\n", kThreads,
           (int)PTHREAD_STACK_MIN, g_reserve);
    exit(3);
  }
  return kept;
}

int main(int argc, char** argv) {
  if (argc > 1) g_reserve = strtoul(argv[1], NULL, 10);
  g_exit_from_thread = argc > 2 && strcmp(argv[2], "exit") == 0;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN) != 0) return 2;
  void* kept[kThreads];
  struct Work work[kThreads];
  unsigned long total = 0;
  for (int t = 0; t < kThreads; ++t) {
    pthread_t thread;
    work[t].last = t == kThreads - 1;
    if (pthread_create(&thread, &attr, worker, &work[t]) != 0) return 5;
    if (pthread_join(thread, &kept[t]) != 0 || kept[t] == NULL) return 4;
    total += work[t].sum;
  }
  printf("%d threads of %d bytes of stack, %zu used first: %lu\n", kThreads, (int)PTHREAD_STACK_MIN,
         g_reserve, total);
  return 0;
}
