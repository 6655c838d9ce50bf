// File: track/cfi.cc
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "track/cfi.h"

#include <dlfcn.h>

namespace poolscope {
namespace track {
namespace cfi {

// Finds the FDE covering pc through the object's .eh_frame_hdr search table.
const uint8_t* FindFde(uintptr_t pc) {
  struct dl_find_object obj;
  if (_dl_find_object(reinterpret_cast<void*>(pc), &obj) != 0 || obj.dlfo_eh_frame == nullptr) {
    return nullptr;
  }
  const uint8_t* hdr = static_cast<const uint8_t*>(obj.dlfo_eh_frame);
  const uintptr_t base = reinterpret_cast<uintptr_t>(hdr);
  if (hdr[0] != 1) return nullptr;
  const uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
  // The table is an array of (initial location, FDE) pairs of 4-byte offsets from the header: the
  // only layout GNU ld and lld write. Anything else: no answer.
  if (table_enc != (kPeDatarel | kPeSdata4) || count_enc == kPeOmit) return nullptr;
  Reader r{hdr + 4, hdr + 4 + 16};
  uintptr_t eh_frame, count;
  if (!r.Pointer(ptr_enc, base, &eh_frame) || !r.Pointer(count_enc, base, &count) || count == 0) {
    return nullptr;
  }
  const int32_t* table = reinterpret_cast<const int32_t*>(r.p);
  const int64_t rel = static_cast<int64_t>(pc - base);
  size_t lo = 0, hi = count;  // the last entry whose start is <= pc
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (table[2 * mid] <= rel) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  if (table[2 * lo] > rel) return nullptr;
  return hdr + table[2 * lo + 1];
}

}  // namespace cfi
}  // namespace track
}  // namespace poolscope
