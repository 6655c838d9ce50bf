/* File: tests/tools/allocs_known.c
 *
 * Makes exactly ALLOCS allocations and frees each at once (no stdio, so libc adds none of its
 * own), then reads its standard input to the end, so that it can stand anywhere in a pipeline.
 * Built as tree_prog_A, tree_prog_B, tree_prog_C and tree_prog_0 with 1000, 2000, 3000 and 0
 * allocations (tree_test). */
#include <stdlib.h>
#include <unistd.h>

int main(void) {
  char buffer[256];
  for (int i = 0; i < ALLOCS; ++i) {
    void* volatile block = malloc(16 + (size_t)(i % 32));
    free(block);
  }
  while (read(0, buffer, sizeof buffer) > 0) {
  }
  return 0;
}
