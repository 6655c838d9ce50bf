// File: track/sorted_search.h
//
// PartitionPoint: the binary search every sorted array of the scan's uses.
// LowerBoundFrom: std::lower_bound over a sorted array, searched outward from a hint (the index the
// last answer was at). For lookups that come in nearly ascending order, as the report asks for the
// kinds of the pooled blocks while it walks the pools, each costs a few reads near the last answer
// instead of a binary search's ~log2(n) cache misses over the whole array; any hint gives the right
// answer, a far one only costs an exponential search.
#ifndef POOLSCOPE_TRACK_SORTED_SEARCH_H_
#define POOLSCOPE_TRACK_SORTED_SEARCH_H_

#include <cstddef>
#include <cstdint>

namespace poolscope {
namespace track {

// The first i in [lo, hi) for which before(i) is false, or hi: before(i) must hold for a prefix of
// [lo, hi) and not after it (std::partition_point over indices).
template <typename Before>
size_t PartitionPoint(size_t lo, size_t hi, Before before) {
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (before(mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The first i in [0, n) with key(a[i]) >= v, or n; a[0, n) sorted by key. `hint` may be any value.
template <typename T, typename Key>
size_t LowerBoundFrom(const T* a, size_t n, size_t hint, uint64_t v, Key key) {
  if (n == 0) return 0;
  if (hint >= n) hint = n - 1;
  // Narrow to [lo, hi]: key(a[lo - 1]) < v (or lo == 0) and key(a[hi]) >= v (or hi == n), probing at
  // distances 1, 2, 4, ... from the hint.
  size_t lo, hi;
  if (key(a[hint]) < v) {
    lo = hint + 1;
    hi = lo;
    for (size_t step = 1; hi < n && key(a[hi]) < v; step *= 2) {
      lo = hi + 1;
      hi = lo + step < n ? lo + step : n;
    }
  } else {
    hi = hint;
    lo = hi;
    for (size_t step = 1; lo > 0;) {
      const size_t probe = lo > step ? lo - step : 0;
      if (key(a[probe]) < v) {
        lo = probe + 1;
        break;
      }
      hi = lo = probe;
      step *= 2;
    }
  }
  return PartitionPoint(lo, hi, [&](size_t i) { return key(a[i]) < v; });
}

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_SORTED_SEARCH_H_
