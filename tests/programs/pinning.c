// Two call sites whose 16-byte blocks share pools of 64 bytes (pool_size=64): keep_block's blocks live
// to exit, young_block's die before it, interleaved so that every pool holds one kept block and three
// young ones. At exit each of the N pools is pinned by its one kept block: keep_block pins exactly N
// pools, young_block none, while pooling served all 3N of young_block's allocations.
// The first kept block starts a pool: filler blocks (a third site) are taken until one ends a pool.
// With an argument M, a last phase after the young blocks are freed: peak_block allocates M blocks
// and frees them all before exit, so that the process's real live bytes peak then. The program counts
// the pools those blocks filled (distinct 64-byte pools), which peak_block pinned at the peak and pins
// no more at exit.
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
__attribute__((noinline)) static void peak_block(void** at) { *at = malloc(16); }

// Static, not from malloc: nothing but the pools holds the program's memory at the peak.
#define MAX_PEAK 100000
static void* peak[MAX_PEAK];
static uintptr_t seen[1 << 18];  // the pools met, open addressing (more than twice MAX_PEAK slots)

// Whether the 64-byte pool of `p` is met for the first time.
static int FirstInPool(const void* p) {
  const uintptr_t pool = (uintptr_t)p & ~(uintptr_t)63;
  size_t i = (pool >> 6) * 0x9E3779B97F4A7C15ull >> 46;
  for (; seen[i] != 0; i = (i + 1) & ((1 << 18) - 1)) {
    if (seen[i] == pool) return 0;
  }
  seen[i] = pool;
  return 1;
}

// M blocks from peak_block, all live at once, then freed; prints the pools they filled.
static void Peak(int m) {
  if (m > MAX_PEAK) m = MAX_PEAK;
  for (int i = 0; i < m; ++i) peak_block(&peak[i]);
  int pools = 0;
  for (int i = 0; i < m; ++i) pools += FirstInPool(peak[i]);
  for (int i = 0; i < m; ++i) free(peak[i]);
  printf("peak: %d blocks in %d pools\n", m, pools);
}

int main(int argc, char** argv) {
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
  if (argc > 1) Peak(atoi(argv[1]));
  return 0;
}
