/* File: tests/programs/fake_old_poolscope.c
 *
 * A stand-in for a preload library whose arenas are not of poolscope.h's layout (arena_inline_test):
 * the poolscope_impl_* functions the client library looks up, over arenas whose first words read, as a
 * struct poolscope_arena_view, like an open pool with room (cur and end around a buffer, a counts
 * array, a limit of 128). A client that handed these arenas to the program's inline path would carve
 * from them without a call; one that wraps them calls for every block. Built twice: without
 * poolscope_impl_arena_layout (a library older than the inline path), and with it and
 * poolscope_impl_arena_alloc_at (-DWITH_LAYOUT), answering $FAKE_LAYOUT (2 when unset). At exit writes "calls=C inline=I" to $FAKE_OUT: the blocks it
 * served by calls, and those counted in its counts array (carved inline). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct fake_arena {
  char* cur;
  char* end;
  uint64_t* counts;
  size_t limit;
  uint64_t blocks;
  size_t used;
  char buf[4096];
} fake_arena;

static uint64_t g_counts[129];
static uint64_t g_calls;

void* poolscope_impl_arena_open(void) {
  fake_arena* a = (fake_arena*)calloc(1, sizeof *a);
  if (a == NULL) return NULL;
  a->cur = a->buf;
  a->end = a->buf + sizeof a->buf;
  a->counts = g_counts;
  a->limit = 128;
  return a;
}

void* poolscope_impl_arena_alloc(void* arena, size_t size, size_t align) {
  fake_arena* a = (fake_arena*)arena;
  if (a == NULL) return NULL;
  ++g_calls;
  if (align == 0) align = 16;
  size_t at = (a->used + align - 1) & ~(align - 1);
  if (at + size > sizeof a->buf) return calloc(1, size); /* (never freed: a test program's few) */
  a->used = at + size;
  return a->buf + at;
}

void poolscope_impl_arena_close(void* arena) { free(arena); }
void poolscope_impl_tag_push(const char* label) { (void)label; }
void poolscope_impl_tag_pop(void) {}
int poolscope_impl_active(void) { return 1; }

#ifdef WITH_LAYOUT
void* poolscope_impl_arena_open_at(void* ra) {
  (void)ra;
  return poolscope_impl_arena_open();
}

void* poolscope_impl_arena_alloc_at(void* arena, size_t size, size_t align, void* ra) {
  (void)ra;
  return poolscope_impl_arena_alloc(arena, size, align);
}

int poolscope_impl_arena_layout(void) {
  const char* v = getenv("FAKE_LAYOUT");
  return v != NULL ? atoi(v) : 2;
}
#endif

__attribute__((destructor)) static void report(void) {
  const char* out = getenv("FAKE_OUT");
  if (out == NULL) return;
  uint64_t inline_blocks = 0;
  for (int i = 0; i < 129; ++i) inline_blocks += g_counts[i];
  FILE* f = fopen(out, "w");
  if (f == NULL) return;
  fprintf(f, "calls=%llu inline=%llu\n", (unsigned long long)g_calls, (unsigned long long)inline_blocks);
  fclose(f);
}
