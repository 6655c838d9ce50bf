/* File: tests/programs/stack_switch.c
 *
 * One thread allocates from 64 stacks in a row, each new (the frames from the allocating function up
 * to the thread's own differ every time), then 1,024 times from one other site, then once more from
 * the 64th stack, and keeps that block: the only leak, 1,077 bytes from f77 (via g77). A tracker
 * that keeps a per-thread memo of its last stack walk judges the 64 as a poor run for the memo and
 * walks the next 1,024 without it; the last allocation must still be put on its own stack, not on
 * the one seen last (stack_switch_test). Built like known_leaks (-O2, no frame pointers).
 * Prints one line; exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* f##k allocates n + k bytes (so no two are the same code), g##k calls f##k; neither is inlined,
 * and the asm after each call keeps it a call, not a jump. */
#define PAIR(k)                                                              \
  __attribute__((noinline)) static void* f##k(size_t n) {                    \
    void* p = malloc(n + k);                                                 \
    __asm__ volatile("" : : "g"(p) : "memory");                              \
    return p;                                                                \
  }                                                                          \
  __attribute__((noinline)) static void* g##k(size_t n) {                    \
    void* p = f##k(n);                                                       \
    __asm__ volatile("" : : "g"(p) : "memory");                              \
    return p;                                                                \
  }
#define EIGHT(X, a) X(a##0) X(a##1) X(a##2) X(a##3) X(a##4) X(a##5) X(a##6) X(a##7)
/* 64 pairs: 0-7, 10-17, ..., 70-77. */
#define ALL(X) EIGHT(X, ) EIGHT(X, 1) EIGHT(X, 2) EIGHT(X, 3) EIGHT(X, 4) EIGHT(X, 5) EIGHT(X, 6) EIGHT(X, 7)
ALL(PAIR)

#define CASE(k) \
  case k:       \
    p = g##k(n); \
    break;

/* Each pair from a call site of its own. */
__attribute__((noinline)) static void* call(int k, size_t n) {
  void* p = NULL;
  switch (k) { ALL(CASE) }
  __asm__ volatile("" : : "g"(p) : "memory");
  return p;
}

__attribute__((noinline)) static void* filler(void) {
  void* p = malloc(8);
  __asm__ volatile("" : : "g"(p) : "memory");
  return p;
}

/* The rounds: the 64 pairs in order, then the last one again. Volatile, so that the compiler keeps
 * one call site of call() for all of them (the last round must repeat the 64th stack exactly). */
static volatile int kOrder[] = {
#define INDEX(k) k,
    ALL(INDEX) 77};
static volatile size_t kSize[65] = {[64] = 1000};
static volatile int kRounds = 65;

static void* kept;

__attribute__((noinline)) static void fill(int i) {
  if (i == kRounds - 1) {
    for (int j = 0; j < 1024; ++j) free(filler());
  }
}

static void* run(void* arg) {
  (void)arg;
  for (int i = 0; i < kRounds; ++i) {
    fill(i);
    void* p = call(kOrder[i], kSize[i] != 0 ? kSize[i] : 8);
    __asm__ volatile("" : "+r"(p));
    if (i == kRounds - 1) {
      kept = p;
    } else {
      free(p);
    }
  }
  return NULL;
}

int main(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, run, NULL) != 0) return 1;
  pthread_join(t, NULL);
  printf("kept %p\n", kept != NULL ? (void*)1 : NULL);
  return 0;
}
