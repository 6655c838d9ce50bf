// Two call sites whose 16-byte blocks share pools of 64 bytes (pool_size=64): keep_block's blocks live
// to exit, young_block's die before it, interleaved so that every pool holds one kept block and three
// young ones. At exit each of the N pools is pinned by its one kept block: keep_block pins exactly N
// pools, young_block none, while pooling served all 3N of young_block's allocations.
// The first kept block starts a pool: filler blocks (a third site) are taken until one ends a pool.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N 50

static void* kept[N];
static void* young[3 * N];
static void* fillers[8];
static volatile int three = 3;  // keeps the young loop a loop: one call site, not three

// Each stores its block itself, so that its call of malloc is no tail call: the site is the function's.
__attribute__((noinline)) static void keep_block(int i) { kept[i] = malloc(16); }
__attribute__((noinline)) static void young_block(int i) { young[i] = malloc(16); }
__attribute__((noinline)) static void filler_block(int i) { fillers[i] = malloc(16); }

int main(void) {
  // Until a block ends its 64-byte pool (at offset 48), so that the next carve starts a fresh pool.
  for (int i = 0; i < 8; ++i) {
    filler_block(i);
    if (((uintptr_t)fillers[i] & 63) == 48) break;
  }
  for (int i = 0; i < N; ++i) {
    keep_block(i);
    for (int k = 0; k < three; ++k) young_block(3 * i + k);
  }
  int kept_pool_starts = 0;
  for (int i = 0; i < N; ++i) kept_pool_starts += ((uintptr_t)kept[i] & 63) == 0;
  for (int i = 0; i < 3 * N; ++i) free(young[i]);
  printf("%d kept blocks, %d at a pool's start\n", N, kept_pool_starts);
  return 0;
}
