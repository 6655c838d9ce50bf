// A program with an allocator of its own: it defines malloc, free, calloc and realloc, so they come
// before poolscope's in symbol lookup and poolscope sees none of its allocations (own_malloc_test).
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static _Alignas(16) char heap[8 << 20];
static size_t used;

void* malloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n == 0) n = 16;
  if (used + n > sizeof heap) return NULL;
  void* p = heap + used;
  used += n;
  return p;
}
void free(void* p) { (void)p; }
void* calloc(size_t a, size_t b) {
  if (b != 0 && a > (size_t)-1 / b) return NULL;
  void* p = malloc(a * b);
  if (p != NULL) memset(p, 0, a * b);
  return p;
}
void* realloc(void* p, size_t n) {
  void* q = malloc(n);
  if (p != NULL && q != NULL) memmove(q, p, n);  // may read past an old, smaller block: inside heap
  return q;
}

int main(void) {
  int ok = 1;
  for (int i = 0; i < 1000; ++i) {
    char* p = malloc(20);
    if (p == NULL || p < heap || p >= heap + sizeof heap) ok = 0;
    free(p);
  }
  printf("own allocator: %s\n", ok ? "ok" : "not used");
  return ok ? 0 : 1;
}
