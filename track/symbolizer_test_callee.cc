// Built by a genrule (see BUILD) into a shared object that keeps its debug info whatever --strip says,
// and dlopen'ed by symbolizer_test: the symbolizer must find these functions' names and lines.
#include <cstdint>

extern "C" {

// On one line: with optimisation the entry's first instruction belongs to the body's line.
int poolscope_callee_entry_line = __LINE__ + 1;
__attribute__((noinline, visibility("default"))) int poolscope_callee_known(int x) { return x * 5 + 2; }

__attribute__((noinline)) static uintptr_t ReturnAddressHere() {
  uintptr_t ra = reinterpret_cast<uintptr_t>(__builtin_extract_return_addr(__builtin_return_address(0)));
  __asm__ volatile("" ::: "memory");
  return ra;
}

// Stores the return address of a call made on the line it returns.
__attribute__((noinline, visibility("default"))) int poolscope_callee_call_site(uintptr_t* ra) {
  *ra = ReturnAddressHere(); return __LINE__;
}

}  // extern "C"
