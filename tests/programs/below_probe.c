/* File: tests/programs/below_probe.c
 *
 * An allocator for below poolscope (LD_PRELOAD="libpoolscope.so libbelow_probe.so": poolscope's next
 * malloc is this one), over glibc's own entry points. It stands for an allocator that a signal can
 * stop halfway through a call: a request of exactly 77,777 bytes raises SIGTERM on the calling thread
 * from inside the call, before glibc's malloc runs. While a call is inside, this allocator must not be
 * entered again from the same thread (glibc's malloc, stopped between two updates, would corrupt its
 * heap): if it is, it says so on stderr and ends the process with status 99. */
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

extern void* __libc_malloc(size_t);
extern void __libc_free(void*);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);

static __thread int inside;

static void enter(void) {
  if (inside++ > 0) {
    static const char msg[] = "below_probe: the allocator below was entered again while a call was inside it\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(99);
  }
}

static void leave(void) { --inside; }

void* malloc(size_t n) {
  enter();
  if (n == 77777) raise(SIGTERM);
  void* p = __libc_malloc(n);
  leave();
  return p;
}

void free(void* p) {
  enter();
  __libc_free(p);
  leave();
}

void* calloc(size_t n, size_t m) {
  enter();
  void* p = __libc_calloc(n, m);
  leave();
  return p;
}

void* realloc(void* p, size_t n) {
  enter();
  void* q = __libc_realloc(p, n);
  leave();
  return q;
}

void* memalign(size_t align, size_t n) {
  enter();
  void* p = __libc_memalign(align, n);
  leave();
  return p;
}

void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }

int posix_memalign(void** out, size_t align, size_t n) {
  void* p = memalign(align, n);
  if (p == NULL) return 12; /* ENOMEM */
  *out = p;
  return 0;
}
