// File: tests/tools/fake/fake_pool_leak.c
//
// A test-only stand-in for pool memory: a shared library whose constructor allocates one 48-byte
// block through a function named poolscope_pool_alloc (as the preload library allocates every pool)
// and drops the pointer, and one 200-byte block through another function (as a program's own leak
// would be), so valgrind reports both as definitely lost and a precise suppression file must hide
// only the first. Used only by suppressions_tools_test.sh; it is not the preload library.
#include <stdlib.h>
#include <string.h>

__attribute__((noinline, visibility("default"))) void* poolscope_pool_alloc(size_t bytes) {
  void* block = malloc(bytes);
  if (block != NULL) memset(block, 0, bytes);
  __asm__ volatile("" : : "r"(block) : "memory");
  return block;
}

__attribute__((noinline)) static void* ProgramOwnLeak(void) {
  void* block = malloc(200);
  if (block != NULL) memset(block, 1, 200);
  __asm__ volatile("" : : "r"(block) : "memory");
  return block;
}

__attribute__((constructor)) static void FakeStart(void) {
  void* volatile pool = poolscope_pool_alloc(48);
  void* volatile own = ProgramOwnLeak();
  pool = NULL;
  own = NULL;
  (void)pool;
  (void)own;
}
