/* File: tests/programs/bad_frees.c
 *
 * Frees a small (poolable) block twice from free_twice(), and frees a pointer into the middle of
 * another from free_interior(); with poolscope preloaded and pooling on both are caught, reported with
 * the function that made them, and the program goes on: it prints a line and exits 0. (Without
 * poolscope glibc would abort on the double free, so this program only runs preloaded.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void free_twice(char* p) {
  free(p);
  free(p);
}

__attribute__((noinline)) void free_interior(char* p) { free(p + 8); }

int main(void) {
  char* a = malloc(24);
  char* b = malloc(32);
  char* keep = malloc(16);
  if (a == NULL || b == NULL || keep == NULL) return 1;
  strcpy(keep, "still here");
  free_twice(a);
  free_interior(b);
  printf("bad_frees: went on, keep=%s\n", keep);
  free(b);
  free(keep);
  return 0;
}
