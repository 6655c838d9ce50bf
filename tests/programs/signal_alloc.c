/* File: tests/programs/signal_alloc.c
 *
 * Allocations made inside a signal handler (not async-signal-safe, but programs do it): main ->
 * deep_caller (a few frames) -> raise(SIGUSR1) -> on_signal, which keeps one 777-byte block (the only
 * leak) and frees a few others. A stack walk from the allocating frame meets the kernel's signal frame
 * within the first frames; the tracker must hand such a capture to its fallback and still name
 * on_signal and, above the signal frame, deep_caller (signal_alloc_test). Built -O2 without frame
 * pointers. Prints one line; exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* volatile kept;

__attribute__((noinline)) static void on_signal(int sig) {
  (void)sig;
  for (int i = 0; i < 5; ++i) {
    void* p = malloc(40);
    __asm__ volatile("" : : "g"(p) : "memory");
    free(p);
  }
  kept = malloc(777);
}

__attribute__((noinline)) static int deep_caller(int depth) {
  if (depth > 0) {
    int r = deep_caller(depth - 1);
    __asm__ volatile("" : : "g"(r) : "memory");
    return r + 1;
  }
  raise(SIGUSR1);
  return 0;
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) return 1;
  int r = deep_caller(24);
  printf("depth %d kept %d\n", r, kept != NULL);
  return 0;
}
