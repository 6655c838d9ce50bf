// File: tests/tools/fake/fake_pool_leak.c
//
// A test-only stand-in for pool memory: a shared library, loaded under the name libpoolscope.so,
// whose constructor allocates one 48-byte block and drops the pointer, so valgrind reports it as
// definitely lost with libpoolscope.so in its allocation stack. Used only by
// suppressions_tools_test.sh; it is not the preload library.
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void* FakePoolCreate(void) {
  void* block = malloc(48);
  if (block != NULL) memset(block, 0, 48);
  return block;
}

__attribute__((constructor)) static void FakeStart(void) {
  void* volatile block = FakePoolCreate();
  (void)block;
}
