// File: interpose/counters.cc
//
// The report's names of the entry points; see counters.h.
#include "interpose/counters.h"

namespace poolscope {

const char* ApiName(int api) {
  static const char* const kNames[] = {
#define POOLSCOPE_API_NAME(e, name) name,
      POOLSCOPE_APIS(POOLSCOPE_API_NAME)
#undef POOLSCOPE_API_NAME
  };
  return api >= 0 && api < kNumApis ? kNames[api] : "unknown";
}

}  // namespace poolscope
