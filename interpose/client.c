/* File: interpose/client.c
 *
 * The client library: the poolscope.h API for programs that may or may not run with libpoolscope.so
 * preloaded. Each call looks the preload library's function up once (dlsym(RTLD_DEFAULT), which finds
 * it only when it is loaded); without it, arenas fall back to malloc/free and tags do nothing.
 * Thread-safe: the lookups are idempotent and published with atomics. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/poolscope.h"

/* The fallback arena: a list of malloc'd blocks. The preload library's arenas are a different type;
 * a program only ever sees one kind, chosen at its first call. */
typedef struct fallback_block {
  struct fallback_block* next;
} fallback_block;
typedef struct fallback_arena {
  fallback_block* blocks;
} fallback_arena;

typedef poolscope_arena* (*open_fn)(void);
typedef void* (*alloc_fn)(poolscope_arena*, size_t, size_t);
typedef void (*close_fn)(poolscope_arena*);
typedef void (*push_fn)(const char*);
typedef void (*pop_fn)(void);
typedef int (*active_fn)(void);

static _Atomic int resolved; /* 0 not yet, 1 preload library present, 2 absent */
static open_fn p_open;
static alloc_fn p_alloc;
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
  r = (p_open && p_alloc && p_close && p_push && p_pop && p_active) ? 1 : 2;
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

static poolscope_arena* poolscope_client_open_first(void);
static void* poolscope_client_alloc_first(poolscope_arena* arena, size_t size, size_t align);
static void poolscope_client_close_first(poolscope_arena* arena);
static _Atomic(open_fn) arena_open = poolscope_client_open_first;
static _Atomic(alloc_fn) arena_alloc = poolscope_client_alloc_first;
static _Atomic(close_fn) arena_close = poolscope_client_close_first;

static poolscope_arena* poolscope_client_open_first(void) {
  open_fn f = resolve() == 1 ? p_open : fallback_open;
  atomic_store_explicit(&arena_open, f, memory_order_release);
  return f();
}

static void* poolscope_client_alloc_first(poolscope_arena* arena, size_t size, size_t align) {
  alloc_fn f = resolve() == 1 ? p_alloc : fallback_alloc;
  atomic_store_explicit(&arena_alloc, f, memory_order_release);
  return f(arena, size, align);
}

static void poolscope_client_close_first(poolscope_arena* arena) {
  close_fn f = resolve() == 1 ? p_close : fallback_close;
  atomic_store_explicit(&arena_close, f, memory_order_release);
  f(arena);
}

void poolscope_tag_push(const char* label) {
  if (resolve() == 1) p_push(label);
}

void poolscope_tag_pop(void) {
  if (resolve() == 1) p_pop();
}

int poolscope_active(void) { return resolve() == 1 ? p_active() : 0; }

poolscope_arena* poolscope_arena_open(void) {
  return atomic_load_explicit(&arena_open, memory_order_acquire)();
}

void* poolscope_arena_alloc(poolscope_arena* arena, size_t size, size_t align) {
  return atomic_load_explicit(&arena_alloc, memory_order_acquire)(arena, size, align);
}

void poolscope_arena_close(poolscope_arena* arena) {
  atomic_load_explicit(&arena_close, memory_order_acquire)(arena);
}
