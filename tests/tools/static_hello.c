// A statically linked program (run_test): LD_PRELOAD cannot reach it, so poolscope must say so and
// pass it through. Prints one line and exits 3.
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  char* p = malloc(10);
  printf("static hello %d\n", p != NULL);
  free(p);
  return 3;
}
