// File: track/mix.h
//
// A 64-bit finalizer (xor-shift and multiply rounds): every input bit moves about half of the output
// bits. The stack depot hashes a stack's frames through it; the live table places a key by it.
#ifndef POOLSCOPE_TRACK_MIX_H_
#define POOLSCOPE_TRACK_MIX_H_

#include <cstdint>

namespace poolscope {
namespace track {

inline uint64_t Mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_MIX_H_
