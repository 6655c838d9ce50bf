// File: track/radix_sort.h
//
// RadixSortBy: sorts records by an unsigned 64-bit key in linear time, for the reachability scan's
// arrays (the live blocks and the pools, millions of 16-byte records at a large program's exit, where
// a comparison sort was a tenth of the scan). A least-significant-digit radix sort over the keys' span:
// the keys less the smallest, less the low bits every key shares (16-byte aligned addresses sort on
// their other bits), in passes of at most 8 bits, each pass stable, so the result is the stable sort.
// Allocates nothing: the caller gives scratch room for n records, and the counts take 1 KiB of stack.
//
// SortNearlyInOrder: for an array whose records are nearly all in order already (the pools, listed in
// the order they were made, which is mostly the order of their addresses): moves the few out of order
// aside, sorts those, and merges them back; one pass over the array and scratch room for the displaced
// records only. At a large program's exit it saves the radix sort's passes and, more, the fresh pages
// of its scratch array, which cost more than the sort on a virtual machine.
#ifndef POOLSCOPE_TRACK_RADIX_SORT_H_
#define POOLSCOPE_TRACK_RADIX_SORT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace poolscope {
namespace track {

// Sorts a[0, n) by key(a[i]), ascending and stable, using tmp[0, n) as scratch (its contents are lost).
// n must be below 2^32. An array already in order is left as it is after one read.
template <typename T, typename Key>
void RadixSortBy(T* a, T* tmp, size_t n, Key key) {
  static_assert(std::is_trivially_copyable<T>::value, "records are moved with plain copies");
  if (n < 2) return;
  const uint64_t first = key(a[0]);
  uint64_t lo = first, hi = first, differ = 0, prev = first;
  bool in_order = true;
  for (size_t i = 1; i < n; ++i) {
    const uint64_t k = key(a[i]);
    lo = k < lo ? k : lo;
    hi = k > hi ? k : hi;
    differ |= k ^ first;  // the bits in which some key differs from the first
    in_order &= prev <= k;
    prev = k;
  }
  if (in_order) return;
  // Bits below `shift` are the same in every key, so they are the same in every key - lo: no pass
  // looks at them. `bits` is the span's width; the passes share it evenly.
  const int shift = __builtin_ctzll(differ);
  const int bits = 64 - __builtin_clzll((hi - lo) >> shift);
  constexpr int kMaxDigit = 8;
  const int passes = (bits + kMaxDigit - 1) / kMaxDigit;
  const int digit = (bits + passes - 1) / passes;
  const uint64_t mask = (uint64_t{1} << digit) - 1;
  uint32_t at[size_t{1} << kMaxDigit];
  T* src = a;
  T* dst = tmp;
  for (int p = 0; p < passes; ++p) {
    const int s = shift + p * digit;
    memset(at, 0, sizeof at[0] << digit);
    for (size_t i = 0; i < n; ++i) ++at[((key(src[i]) - lo) >> s) & mask];
    uint32_t sum = 0;
    for (uint64_t b = 0; b <= mask; ++b) {
      const uint32_t c = at[b];
      at[b] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; ++i) dst[at[((key(src[i]) - lo) >> s) & mask]++] = src[i];
    std::swap(src, dst);
  }
  if (src != a) memcpy(static_cast<void*>(a), src, n * sizeof(T));
}

// Sorts a[0, n) by key(a[i]), ascending, when few records are out of order: those that break the order
// move to side[0, room / 2) (each time a record is below the last one kept, it and the last one kept
// move), are sorted there with side[room / 2, room) as scratch, and are merged back from the end.
// Returns false when more than room / 2 records would move: a[0, n) then holds its records in some
// order, none lost, and the caller sorts in full. Ties end in an unspecified order. n below 2^32.
template <typename T, typename Key>
bool SortNearlyInOrder(T* a, size_t n, Key key, T* side, size_t room) {
  static_assert(std::is_trivially_copyable<T>::value, "records are moved with plain copies");
  if (n < 2) return true;
  const size_t cap = room / 2;
  size_t kept = 1, moved = 0;
  uint64_t top = key(a[0]);
  for (size_t i = 1; i < n; ++i) {
    const uint64_t k = key(a[i]);
    if (top <= k) {
      a[kept++] = a[i];
      top = k;
      continue;
    }
    if (moved + 2 > cap) {
      // a[0, kept) and side[0, moved) hold a[0, i)'s records: put them all back.
      memmove(static_cast<void*>(a + kept), a + i, (n - i) * sizeof(T));
      memcpy(static_cast<void*>(a + kept + (n - i)), side, moved * sizeof(T));
      return false;
    }
    side[moved++] = a[--kept];
    side[moved++] = a[i];
    top = kept > 0 ? key(a[kept - 1]) : 0;
  }
  RadixSortBy(side, side + cap, moved, key);
  // kept + moved == n: fill a from its end with the larger of the two tails.
  size_t i = kept, j = moved, out = n;
  while (j > 0) {
    if (i > 0 && key(a[i - 1]) > key(side[j - 1])) {
      a[--out] = a[--i];
    } else {
      a[--out] = side[--j];
    }
  }
  return true;
}

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_RADIX_SORT_H_
