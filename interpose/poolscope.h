// File: interpose/poolscope.h
//
// The poolscope C API: explicit confined arenas and allocation tags.
//
// Link a program against //interpose:client (libpoolscope_client) to call this API whether or not
// libpoolscope.so is preloaded. With the preload library present, arenas carve small blocks from
// per-thread pools and tags route plain mallocs to the thread's implicit arena; without it, arenas fall
// back to malloc/free and tags do nothing.
//
// Thread-safety: an arena is confined to the thread that opened it; every call on it must come from that
// thread. Tags are per thread. All functions are async-signal-unsafe, like malloc.
#ifndef POOLSCOPE_INTERPOSE_POOLSCOPE_H_
#define POOLSCOPE_INTERPOSE_POOLSCOPE_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct poolscope_arena poolscope_arena;

// Opens an arena confined to the calling thread. Returns NULL (errno ENOMEM) when out of memory.
// An arena that never allocates never takes a pool.
poolscope_arena* poolscope_arena_open(void);

// Returns `size` zeroed bytes aligned to `align` (a power of two; 0 means 16), valid until the arena
// closes; NULL with errno EINVAL for a bad alignment, ENOMEM when out of memory.
void* poolscope_arena_alloc(poolscope_arena* arena, size_t size, size_t align);

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
