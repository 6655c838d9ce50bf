/* A program whose globals are mostly reserve: 64 MiB of .bss of which it writes one page, where it
 * keeps the one block it keeps. Its output: the length of the block's text, read through the page. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char reserve[64 << 20];

int main(void) {
  char* block = malloc(48);
  if (block == NULL) return 1;
  strcpy(block, "kept through .bss");
  memcpy(reserve + (32 << 20), &block, sizeof block);
  char* again;
  memcpy(&again, reserve + (32 << 20), sizeof again);
  printf("%zu\n", strlen(again));
  return 0;
}
