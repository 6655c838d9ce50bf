/* File: interpose/client.c
 *
 * The client library: the poolscope.h API for programs that may or may not run with libpoolscope.so
 * preloaded. Each call looks the preload library's function up once (dlsym(RTLD_DEFAULT), which finds
 * it only when it is loaded); without it, arenas fall back to malloc/free and tags do nothing.
 * Thread-safe: the lookups are idempotent and published with atomics.
 *
 * Every arena handed out starts with struct poolscope_arena_view (poolscope.h), which the program's
 * inline poolscope_arena_alloc reads. The preload library's own arenas do when it says it has
 * POOLSCOPE_ARENA_LAYOUT (poolscope_impl_arena_layout): they are handed out as they are. A preload
 * library without it, or with another, gets its arenas wrapped in one whose view admits nothing, so
 * every allocation reaches it by a call; the fallback arenas' view admits nothing either. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define POOLSCOPE_ARENA_NO_INLINE /* (this file defines the exported poolscope_arena_alloc) */
#include "interpose/poolscope.h"

/* The fallback arena: a list of malloc'd blocks. The preload library's arenas are a different type;
 * a program only ever sees one kind, chosen at its first call. */
typedef struct fallback_block {
  struct fallback_block* next;
} fallback_block;
typedef struct fallback_arena {
  struct poolscope_arena_view view; /* all zero: the inline path always calls */
  fallback_block* blocks;
} fallback_arena;

/* A preload library's arena of another layout, behind a view that admits nothing. */
typedef struct wrapped_arena {
  struct poolscope_arena_view view; /* all zero */
  poolscope_arena* inner;
  struct wrapped_arena* next_free;
} wrapped_arena;

typedef poolscope_arena* (*open_fn)(void);
typedef poolscope_arena* (*open_at_fn)(void*);
typedef void* (*alloc_fn)(poolscope_arena*, size_t, size_t);
typedef void* (*alloc_at_fn)(poolscope_arena*, size_t, size_t, void*);
typedef void (*close_fn)(poolscope_arena*);
typedef void (*push_fn)(const char*);
typedef void (*pop_fn)(void);
typedef int (*active_fn)(void);

typedef int (*layout_fn)(void);

/* 0 not yet; 1 preload library present, its arenas of this header's layout; 2 absent; 3 present, of
 * another layout (or none). */
static _Atomic int resolved;
static open_fn p_open;
static alloc_fn p_alloc;
static alloc_at_fn p_alloc_at;
static open_at_fn p_open_at;
static close_fn p_close;
static push_fn p_push;
static pop_fn p_pop;
static active_fn p_active;

/* The preload library exports its implementation as poolscope_impl_*, so that the definitions below
 * (linked into the program) never shadow it. */
static int resolve(void) {
  int r = atomic_load_explicit(&resolved, memory_order_acquire);
  if (r != 0) return r;
  p_open = (open_fn)dlsym(RTLD_DEFAULT, "poolscope_impl_arena_open");
  p_alloc = (alloc_fn)dlsym(RTLD_DEFAULT, "poolscope_impl_arena_alloc");
  p_close = (close_fn)dlsym(RTLD_DEFAULT, "poolscope_impl_arena_close");
  p_push = (push_fn)dlsym(RTLD_DEFAULT, "poolscope_impl_tag_push");
  p_pop = (pop_fn)dlsym(RTLD_DEFAULT, "poolscope_impl_tag_pop");
  p_active = (active_fn)dlsym(RTLD_DEFAULT, "poolscope_impl_active");
  layout_fn layout = (layout_fn)dlsym(RTLD_DEFAULT, "poolscope_impl_arena_layout");
  p_alloc_at = (alloc_at_fn)dlsym(RTLD_DEFAULT, "poolscope_impl_arena_alloc_at");
  p_open_at = (open_at_fn)dlsym(RTLD_DEFAULT, "poolscope_impl_arena_open_at");
  r = (p_open && p_alloc && p_close && p_push && p_pop && p_active) ? 1 : 2;
  if (r == 1 && (layout == NULL || p_alloc_at == NULL || p_open_at == NULL || layout() != POOLSCOPE_ARENA_LAYOUT)) r = 3;
  atomic_store_explicit(&resolved, r, memory_order_release);
  return r;
}

/* The arena entry points jump through one pointer each: it starts at a first-call function that
 * resolves (resolve() above, so every pointer makes the same choice) and points it at the preload
 * library's function or at the fallback below, for good. Each call is then a load and an indirect
 * jump (JDK-style open/allocate/close loops spend much of their time here otherwise). The first-call
 * functions are named poolscope_*: a tracked allocation's stack may start in one, and the report
 * leaves the client's poolscope_* frames out (ProgramFrames in report_writer.cc). */
static poolscope_arena* fallback_open(void) {
  fallback_arena* a = (fallback_arena*)calloc(1, sizeof *a);
  if (a == NULL) errno = ENOMEM;
  return (poolscope_arena*)a;
}

static void* fallback_alloc(poolscope_arena* arena, size_t size, size_t align) {
  fallback_arena* a = (fallback_arena*)arena;
  if (align == 0) align = 16;
  if (a == NULL || (align & (align - 1)) != 0) {
    errno = EINVAL;
    return NULL;
  }
  /* One malloc per block, as a JDK before 28 does: a header that links the block, then the block. */
  size_t header = align > sizeof(fallback_block) ? align : sizeof(fallback_block);
  if (header < 16) header = 16;
  if (size > SIZE_MAX - header) {
    errno = ENOMEM;
    return NULL;
  }
  void* raw = NULL;
  if (align <= 16) {
    raw = calloc(1, header + size);
  } else if (posix_memalign(&raw, align, header + size) == 0) {
    memset(raw, 0, header + size);
  } else {
    raw = NULL;
  }
  if (raw == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  fallback_block* b = (fallback_block*)raw;
  b->next = a->blocks;
  a->blocks = b;
  return (char*)raw + header;
}

static void fallback_close(poolscope_arena* arena) {
  fallback_arena* a = (fallback_arena*)arena;
  if (a == NULL) return;
  for (fallback_block* b = a->blocks; b != NULL;) {
    fallback_block* next = b->next;
    free(b);
    b = next;
  }
  free(a);
}

/* Wrappers come from pages of their own (not malloc, so the preload library's ledgers see only the
 * program's allocations) and are kept per thread for the next open: an arena is confined to its
 * thread. Pages are never given back. */
static __thread wrapped_arena* free_wrappers;

static wrapped_arena* take_wrapper(void) {
  wrapped_arena* w = free_wrappers;
  if (w == NULL) {
    const size_t page = 4096;
    char* p = (char*)mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    for (size_t off = 0; off + sizeof *w <= page; off += sizeof *w) {
      wrapped_arena* n = (wrapped_arena*)(p + off);
      n->next_free = w;
      w = n;
    }
  }
  free_wrappers = w->next_free;
  return w;
}

static poolscope_arena* wrapped_open(void) {
  wrapped_arena* w = take_wrapper();
  if (w == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  w->inner = p_open();
  if (w->inner == NULL) {
    w->next_free = free_wrappers;
    free_wrappers = w;
    return NULL;
  }
  return (poolscope_arena*)w;
}

static void* wrapped_alloc(poolscope_arena* arena, size_t size, size_t align) {
  return p_alloc(arena == NULL ? NULL : ((wrapped_arena*)arena)->inner, size, align);
}

static void wrapped_close(poolscope_arena* arena) {
  wrapped_arena* w = (wrapped_arena*)arena;
  if (w == NULL) return;
  p_close(w->inner);
  w->inner = NULL;
  w->next_free = free_wrappers;
  free_wrappers = w;
}

/* The program's return address goes to the preload library (a tracked arena captures its stack from
 * the program's frame and counts its blocks by their calls' addresses); the others have no use for it. */
static poolscope_arena* wrapped_open_at(void* ra) {
  (void)ra;
  return wrapped_open();
}

static poolscope_arena* fallback_open_at(void* ra) {
  (void)ra;
  return fallback_open();
}

static void* wrapped_alloc_at(poolscope_arena* arena, size_t size, size_t align, void* ra) {
  (void)ra;
  return wrapped_alloc(arena, size, align);
}

static void* fallback_alloc_at(poolscope_arena* arena, size_t size, size_t align, void* ra) {
  (void)ra;
  return fallback_alloc(arena, size, align);
}

static poolscope_arena* poolscope_client_open_first(void* ra);
static void* poolscope_client_alloc_first(poolscope_arena* arena, size_t size, size_t align, void* ra);
static void poolscope_client_close_first(poolscope_arena* arena);
static _Atomic(open_at_fn) arena_open = poolscope_client_open_first;
static _Atomic(alloc_at_fn) arena_alloc = poolscope_client_alloc_first;
static _Atomic(close_fn) arena_close = poolscope_client_close_first;

static poolscope_arena* poolscope_client_open_first(void* ra) {
  const int r = resolve();
  open_at_fn f = r == 1 ? p_open_at : r == 3 ? wrapped_open_at : fallback_open_at;
  atomic_store_explicit(&arena_open, f, memory_order_release);
  return f(ra);
}

static void* poolscope_client_alloc_first(poolscope_arena* arena, size_t size, size_t align, void* ra) {
  const int r = resolve();
  alloc_at_fn f = r == 1 ? p_alloc_at : r == 3 ? wrapped_alloc_at : fallback_alloc_at;
  atomic_store_explicit(&arena_alloc, f, memory_order_release);
  return f(arena, size, align, ra);
}

static void poolscope_client_close_first(poolscope_arena* arena) {
  const int r = resolve();
  close_fn f = r == 1 ? p_close : r == 3 ? wrapped_close : fallback_close;
  atomic_store_explicit(&arena_close, f, memory_order_release);
  f(arena);
}

void poolscope_tag_push(const char* label) {
  if (resolve() != 2) p_push(label);
}

void poolscope_tag_pop(void) {
  if (resolve() != 2) p_pop();
}

int poolscope_active(void) { return resolve() != 2 ? p_active() : 0; }

poolscope_arena* poolscope_arena_open(void) {
  return atomic_load_explicit(&arena_open, memory_order_acquire)(__builtin_return_address(0));
}

void* poolscope_arena_alloc(poolscope_arena* arena, size_t size, size_t align) {
  return atomic_load_explicit(&arena_alloc, memory_order_acquire)(arena, size, align, __builtin_return_address(0));
}

/* What the inline poolscope_arena_alloc calls for a block it does not carve. */
void* poolscope_arena_alloc_call(poolscope_arena* arena, size_t size, size_t align) {
  return atomic_load_explicit(&arena_alloc, memory_order_acquire)(arena, size, align, __builtin_return_address(0));
}

void poolscope_arena_close(poolscope_arena* arena) {
  atomic_load_explicit(&arena_close, memory_order_acquire)(arena);
}
