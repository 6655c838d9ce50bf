// File: interpose/glibc_arena.h
//
// glibc's main arena (its struct malloc_state, in libc's data), found in a copy of libc's writable
// segment. The exit scan leaves it out of the roots: the pointers at its top chunk, its last remainder
// and its bins point at chunk headers, which lie in the last 8 bytes of the block before them; read as
// a root, the arena would make that block possibly lost. memcheck replaces the allocator and never
// sees it.
//
// Thread-safety: pure functions of their arguments (and of what `reader` reads).
#ifndef POOLSCOPE_INTERPOSE_GLIBC_ARENA_H_
#define POOLSCOPE_INTERPOSE_GLIBC_ARENA_H_

#include <cstddef>
#include <cstdint>

#include "track/reachability.h"

namespace poolscope {
namespace scan {

// The arena as laid out on x86-64 since glibc 2.27, offsets in bytes: its bins (pairs of pointers,
// 16 bytes each) from kArenaBins to kArenaBinsEnd, its list of arenas (`next`), its size.
constexpr uintptr_t kArenaBins = 112, kArenaBinsEnd = 2144, kArenaNext = 2160, kArenaBytes = 2200;

// Where glibc's main arena starts in [lo, lo + 8 * n) (lo 16-byte aligned), a copy of which is
// words[0, n): the first 16-byte boundary whose would-be arena has at least 16 of its bins empty (each
// a pair of pointers at the pair's own address less 16) and whose list of arenas (`next`: never null,
// the main arena's own address when it is the only one, else through arenas that live in their heaps
// and are read through `reader`) comes back to it within 64 steps. 0 when there is none.
//
// One pass: the empty bins of the would-be arena at each boundary are counted as it slides by 16 bytes
// (a bin enters, one leaves), and only a boundary whose `next` could be an arena's is followed.
inline uintptr_t FindMainArena(uintptr_t lo, const uint64_t* words, size_t n, track::MemoryReader& reader) {
  const uintptr_t hi = lo + 8 * n;
  if (lo + kArenaBytes > hi) return 0;
  auto word = [&](uintptr_t addr) { return words[(addr - lo) / 8]; };
  auto empty_bin = [&](uintptr_t bin) { return word(bin) == bin - 16 && word(bin + 8) == bin - 16 ? 1 : 0; };
  int empty = 0;  // the empty bins of the arena at `a`
  for (uintptr_t bin = lo + kArenaBins; bin < lo + kArenaBinsEnd; bin += 16) empty += empty_bin(bin);
  for (uintptr_t a = lo;; ) {
    uint64_t next = word(a + kArenaNext);
    const bool may_be_next = next != 0 && (next == a || (next % 16 == 0 && (next < lo || next >= hi)));
    if (may_be_next && empty >= 16) {
      for (int step = 0; step < 64 && next != a && next != 0; ++step) {
        if (reader.Read(next + kArenaNext, &next, sizeof next) != sizeof next) next = 0;
      }
      if (next == a) return a;
    }
    if (a + 16 + kArenaBytes > hi) return 0;
    // The window moves on: its first bin leaves, the bin after its last enters.
    empty += empty_bin(a + 16 + kArenaBinsEnd - 16) - empty_bin(a + kArenaBins);
    a += 16;
  }
}

}  // namespace scan
}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_GLIBC_ARENA_H_
