// File: track/granule_filter.h
//
// A quick "no" for the exit scan's word filter. The scan keeps a word when it lies in a block's span
// (root_words.h) or a region of blocks (reachability.cc); the first test, [lowest start, highest end),
// passes nearly every pointer of a process whose heap has one piece low in the address space (the
// program break) and one high (mmap'd chunks beside the shared libraries): pointers into code, the
// libraries' data and stacks then each cost a binary search over the spans. GranuleFilter records
// which 1 MiB granules the spans touch, hashed into 4,096 bits (512 bytes, which stay in L1): a word
// whose granule's bit is clear lies in no span, and a multiply, one load and a bit test turn it away.
// A set bit says nothing (another granule hashed onto it, or a span's edge), so the search still
// decides. (The hash, not the granule's low bits: a stack or a library 2^32 bytes from a chunk would
// otherwise always share its bit.)
//
// Thread-safety: none; built once, then read.
#ifndef POOLSCOPE_TRACK_GRANULE_FILTER_H_
#define POOLSCOPE_TRACK_GRANULE_FILTER_H_

#include <cstddef>
#include <cstdint>

namespace poolscope {
namespace track {

class GranuleFilter {
 public:
  static constexpr unsigned kGranuleShift = 20;  // 1 MiB
  static constexpr uint64_t kBits = 4096;

  GranuleFilter() { Clear(); }

  void Clear() {
    for (uint64_t& w : words_) w = 0;
  }

  // Marks every granule that [begin, end) touches (nothing when end <= begin).
  void Add(uintptr_t begin, uintptr_t end) {
    if (end <= begin) return;
    const uint64_t first = begin >> kGranuleShift, last = (end - 1) >> kGranuleShift;
    if (last - first >= kBits - 1) {
      for (uint64_t& w : words_) w = ~uint64_t{0};
      return;
    }
    for (uint64_t g = first; g <= last; ++g) Set(g);
  }

  // False only when no range added touches x's granule.
  bool MayHold(uint64_t x) const {
    const uint64_t b = Bit(x >> kGranuleShift);
    return (words_[b >> 6] >> (b & 63)) & 1;
  }

 private:
  static uint64_t Bit(uint64_t granule) { return (granule * 0x9e3779b97f4a7c15) >> 52; }  // 12 bits
  void Set(uint64_t granule) {
    const uint64_t b = Bit(granule);
    words_[b >> 6] |= uint64_t{1} << (b & 63);
  }

  uint64_t words_[kBits / 64];
};

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_GRANULE_FILTER_H_
