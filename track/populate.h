// File: track/populate.h
//
// Faulting in memory that is certain to be written, a batch of pages at a time: one madvise
// (MADV_POPULATE_WRITE) instead of a page fault per page, and never the zero page a page first read
// would map before its first write faulted again. Before Linux 5.14 the advice is refused and pages
// fault in as they are touched.
#ifndef POOLSCOPE_TRACK_POPULATE_H_
#define POOLSCOPE_TRACK_POPULATE_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

// For a zero-initialised array of a page or more at namespace scope (or a static local): places it in
// .lbss, which the linker lays out after the whole of .bss. .bss itself follows the order of the
// objects linked, so each large array would sit between small variables and spread them over many
// pages, each faulted in on its own at start-up (/bin/true under poolscope: 38 faults on .bss, most
// of them for one small variable each, several twice: a page first read maps the zero page, its first
// write faults again). Without them the small variables, about 13 KiB, share a few pages.
#define POOLSCOPE_LARGE_BSS __attribute__((section(".lbss")))

namespace poolscope {
namespace track {

constexpr uintptr_t kPageBytes = 4096;

// Faults in the whole pages of [begin, end) (begin rounded down, end up), but not past `limit`.
inline void PopulateRange(uintptr_t begin, uintptr_t end, uintptr_t limit) {
  const uintptr_t from = begin & ~(kPageBytes - 1);
  uintptr_t to = (end + kPageBytes - 1) & ~(kPageBytes - 1);
  if (to > limit) to = limit;
  if (from < to) madvise(reinterpret_cast<void*>(from), to - from, MADV_POPULATE_WRITE);
}

// For memory written in order: `done` is how far it is faulted in. When [begin, end) reaches past it,
// faults in from `done`, or from begin's page when that is higher (what lies between was written
// otherwise), to `ahead` bytes past end's page (not past `limit`); returns the new `done`.
inline uintptr_t PopulateAhead(uintptr_t done, uintptr_t begin, uintptr_t end, uintptr_t limit, size_t ahead) {
  if (end <= done) return done;
  const uintptr_t page = begin & ~(kPageBytes - 1);
  uintptr_t to = ((end + kPageBytes - 1) & ~(kPageBytes - 1)) + ahead;
  if (to > limit) to = limit;
  PopulateRange(page > done ? page : done, to, limit);
  return to;
}

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_POPULATE_H_
