/* An allocator library as a user may preload ahead of poolscope: it defines malloc, free, calloc and
 * realloc, and hands each call to glibc's own functions. */
#include <stddef.h>

extern void* __libc_malloc(size_t size);
extern void __libc_free(void* p);
extern void* __libc_calloc(size_t n, size_t size);
extern void* __libc_realloc(void* p, size_t size);

void* malloc(size_t size) { return __libc_malloc(size); }
void free(void* p) { __libc_free(p); }
void* calloc(size_t n, size_t size) { return __libc_calloc(n, size); }
void* realloc(void* p, size_t size) { return __libc_realloc(p, size); }
