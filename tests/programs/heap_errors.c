/* File: tests/programs/heap_errors.c
 *
 * Four heap errors in small blocks, each once, for memcheck to find (valgrind_errors_test): a branch on
 * a byte of an 8-byte block never written, a one-byte write past a 5-byte block, a write to a 24-byte
 * block after its free, and a write to the first byte of a malloc(0) block. Memory the program owns stays correct otherwise; prints one line and
 * exits 0. -fno-builtin keeps every malloc and free. */
#include <stdio.h>
#include <stdlib.h>

static char* volatile keep;

int main(void) {
  char* never_written = malloc(8);
  int uninitialised = 0;
  if (never_written[3] == 42) uninitialised = 1; /* a branch on an undefined byte */
  char* small = malloc(5);
  small[0] = 'a';
  small[5] = 'b'; /* one byte past the end */
  char* freed = malloc(24);
  free(freed);
  keep = freed;
  keep[0] = 'c'; /* after the free */
  char* empty = malloc(0);
  keep = empty;
  keep[0] = 'd'; /* a block of 0 bytes has none */
  free(empty);
  printf("heap_errors: %d\n", uninitialised == 2);
  free(never_written);
  free(small);
  return 0;
}
