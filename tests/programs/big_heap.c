/* File: tests/programs/big_heap.c
 *
 * Holds argv[1] GiB (4 when not given) in live 16 MiB blocks, every byte written (no pointers in
 * them), prints "started" and waits for a signal. The exit scan must read all of it, so a signal's
 * report meets its deadline only if the scan is cut off when it must be (signal_in_allocator_test). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  const size_t gib = argc > 1 ? (size_t)atol(argv[1]) : 4;
  const size_t n = gib * 64;
  void** blocks = malloc(n * sizeof(void*));
  if (blocks == NULL) return 1;
  for (size_t i = 0; i < n; ++i) {
    blocks[i] = malloc((size_t)16 << 20);
    if (blocks[i] == NULL) return 1;
    memset(blocks[i], 0x5a, (size_t)16 << 20);
  }
  printf("started\n");
  fflush(stdout);
  for (;;) pause();
}
