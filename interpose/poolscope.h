// File: interpose/poolscope.h
//
// The poolscope C API: explicit confined arenas and allocation tags.
//
// Link a program against //interpose:client (libpoolscope_client) to call this API whether or not
// libpoolscope.so is preloaded. With the preload library present, arenas carve small blocks from
// per-thread pools and tags route plain mallocs to the thread's implicit arena; without it, arenas fall
// back to malloc/free and tags do nothing.
//
// poolscope_arena_alloc is inline: a block that fits the arena's current pool is carved here, in the
// program, from the part of the arena this header may see (struct poolscope_arena_view, layout
// POOLSCOPE_ARENA_LAYOUT), and counted there; every other request calls poolscope_arena_alloc_call.
// The view is what the library promises for that layout. The client library asks the loaded preload
// library for its layout once (poolscope_impl_arena_layout); when it has none or another, the client
// hands out arenas whose view never admits a block (limit 0), so every allocation is a call. Without
// the preload library, and while poolscope tracks allocation stacks (track=1), the limit is 0 as well.
// Define POOLSCOPE_ARENA_NO_INLINE before including this header to get the plain call instead.
//
// Thread-safety: an arena is confined to the thread that opened it; every call on it must come from that
// thread. Tags are per thread. All functions are async-signal-unsafe, like malloc.
#ifndef POOLSCOPE_INTERPOSE_POOLSCOPE_H_
#define POOLSCOPE_INTERPOSE_POOLSCOPE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct poolscope_arena poolscope_arena;

// The layout of struct poolscope_arena_view and the carve rules below; a library that changes either
// changes this number.
#define POOLSCOPE_ARENA_LAYOUT 1

// The start of every arena handed out (layout 1). Written only by the arena's own thread.
struct poolscope_arena_view {
  char* cur;          // the next free byte of the arena's pool (NULL: no pool yet)
  char* end;          // the pool's end
  uint64_t* counts;   // counts[size]: blocks of `size` bytes carved inline (the thread's ledger)
  size_t limit;       // requests of 1..limit bytes may be carved inline; 0: none
  uint64_t blocks;    // blocks carved from the pool (inline or by the library)
};

// Opens an arena confined to the calling thread. Returns NULL (errno ENOMEM) when out of memory.
// An arena that never allocates never takes a pool.
poolscope_arena* poolscope_arena_open(void);

// Returns `size` zeroed bytes aligned to `align` (a power of two; 0 means 16), valid until the arena
// closes; NULL with errno EINVAL for a bad alignment, ENOMEM when out of memory.
// poolscope_arena_alloc_call is the same, always a call.
void* poolscope_arena_alloc_call(poolscope_arena* arena, size_t size, size_t align);

#ifdef POOLSCOPE_ARENA_NO_INLINE
void* poolscope_arena_alloc(poolscope_arena* arena, size_t size, size_t align);
#else
// Layout 1's carve: blocks start on 8-byte granules and take whole granules; alignments up to 64.
// Pools are zeroed before they are handed to an arena, so a carved block is zero.
static inline __attribute__((always_inline)) void* poolscope_arena_alloc(poolscope_arena* arena, size_t size,
                                                                         size_t align) {
  struct poolscope_arena_view* v = (struct poolscope_arena_view*)arena;
  if (__builtin_expect(arena != NULL && size - 1 < v->limit, 1)) {
    uintptr_t m = align - 1;
    if (align == 0) m = 15;
    if (__builtin_expect(m < 64 && (align & m) == 0, 1)) {
      m |= 7;
      const uintptr_t p = ((uintptr_t)v->cur + m) & ~m;
      const uintptr_t next = p + ((size + 7) & ~(size_t)7);
      if (__builtin_expect(next <= (uintptr_t)v->end, 1)) {  // (no pool: 0 < next, end NULL)
        v->cur = (char*)next;
        ++v->blocks;
        ++v->counts[size];
        return (void*)p;
      }
    }
  }
  return poolscope_arena_alloc_call(arena, size, align);
}
#endif

// Releases every block of the arena at once and invalidates them. NULL is a no-op.
void poolscope_arena_close(poolscope_arena* arena);

// Plain mallocs on this thread are tagged with `label` until the matching poolscope_tag_pop(); scopes
// nest. Only meaningful with tag=explicit (with tag=small every small request is pooled anyway).
void poolscope_tag_push(const char* label);
void poolscope_tag_pop(void);

// Nonzero when the preload library is present and pooling is on in this process.
int poolscope_active(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // POOLSCOPE_INTERPOSE_POOLSCOPE_H_
