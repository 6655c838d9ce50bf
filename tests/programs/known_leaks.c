/* File: tests/programs/known_leaks.c
 *
 * Leaks known counts from known functions, and frees everything else it allocates, so a leak report
 * can be checked block for block. Built without frame pointers (-O2 -fomit-frame-pointer), like
 * Debian's own binaries:
 *   leak_config_entries():  3 blocks of 24 bytes (small enough for a pool), through a helper;
 *   leak_session_buffers(): 2 blocks of 200 bytes (too large for a 64-byte pool), three calls deep;
 *   leak_two_on_one_line(): 2 blocks of 48 bytes from two calls on one line (two return addresses
 *                           the source cannot tell apart: one leak group).
 * Also a thread that makes 300 allocations from one site (worker_churn) and ends, for the sites
 * ledger's count of a thread's allocations after it has ended.
 * Prints one line; exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* volatile sink;
static void* volatile sink2;

__attribute__((noinline)) static void* make_entry(int i) {
  char* p = malloc(24);
  if (p != NULL) snprintf(p, 24, "entry-%d", i);
  return p;
}

__attribute__((noinline)) void leak_config_entries(void) {
  for (int i = 0; i < 3; ++i) sink = make_entry(i);  /* each overwritten: lost */
}

__attribute__((noinline)) static void* session_alloc(void) {
  void* p = malloc(200);
  if (p != NULL) memset(p, 0x5A, 200);
  return p;
}

__attribute__((noinline)) static void* session_open(void) { return session_alloc(); }

__attribute__((noinline)) void leak_session_buffers(void) {
  for (int i = 0; i < 2; ++i) sink = session_open();
}

__attribute__((noinline)) void leak_two_on_one_line(void) {
  sink = malloc(48); sink2 = malloc(48);
}

__attribute__((noinline)) static unsigned long churn(int rounds) {
  unsigned long sum = 0;
  for (int i = 0; i < rounds; ++i) {
    char* a = malloc(16 + i % 40);
    char* b = calloc(3, 100);
    if (a == NULL || b == NULL) abort();
    a[0] = (char)i;
    sum += (unsigned char)a[0] + (unsigned char)b[299];
    b = realloc(b, 400);
    free(a);
    free(b);
  }
  return sum;
}

__attribute__((noinline)) static void* worker_churn(void* arg) {
  (void)arg;
  for (int i = 0; i < 300; ++i) {
    sink = malloc(32);
    free(sink);
  }
  sink = NULL;
  return NULL;
}

int main(void) {
  pthread_t worker;
  if (pthread_create(&worker, NULL, worker_churn, NULL) != 0 || pthread_join(worker, NULL) != 0) abort();
  unsigned long sum = churn(1000);
  leak_config_entries();
  leak_session_buffers();
  leak_two_on_one_line();
  sink = NULL;
  sink2 = NULL;
  printf("known_leaks: checksum %lu\n", sum);
  return 0;
}
