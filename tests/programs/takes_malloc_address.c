// A non-PIE program that takes malloc's and free's addresses in its code, as python3 does. The linker
// then gives the executable "canonical PLT" entries: undefined malloc and free symbols with the
// addresses of its PLT slots, which dlsym(RTLD_DEFAULT) returns although every call goes to the real
// definition (own_malloc_test: poolscope must not warn that malloc comes from the program).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void* (*alloc_fn)(size_t);
typedef void (*free_fn)(void*);
alloc_fn volatile alloc_through;
free_fn volatile free_through;

int main(void) {
  alloc_through = malloc;
  free_through = free;
  unsigned sum = 0;
  for (int i = 0; i < 100; ++i) {
    char* p = alloc_through(24);
    if (p == NULL) return 1;
    snprintf(p, 24, "block %d", i);
    sum += (unsigned)strlen(p);
    free_through(p);
  }
  printf("takes malloc's address: %u\n", sum);
  return 0;
}
