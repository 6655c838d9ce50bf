// File: interpose/runtime_alloc.cc
//
// The malloc-family calls of the code linked into libpoolscope.so itself: above all the C++ runtime
// linked in statically (libstdc++.a: its emergency exception pool of about 71 KiB, allocated by its
// initialiser when the library is loaded, and __cxa_demangle's buffers), and poolscope's own files.
// The link (`--wrap=malloc` etc. in interpose/BUILD) sends every such call here instead of to the
// exported entry points. malloc, calloc and realloc are served from poolscope's own mmap'd memory
// (internal.h), so the blocks are in neither ledger, never among leaks, and invisible to a leak
// detector below poolscope; the report counts them in `internal` (mappings and resident bytes).
// free and realloc tell those blocks from the next allocator's by address (poolscope's mappings):
// poolscope's files also free blocks that libc made (strdup) or that libdw handed over, and those go
// to the next allocator under the reentrancy guard, as poolscope's own calls (`internal.passthrough_*`),
// as do the rare aligned requests.
//
// Calls of the program, and of libraries loaded with dlopen (libdw, libelf), reach the exported
// functions as before; the symbolizer makes them under the guard.
//
// Only libpoolscope.so is linked with --wrap; nothing else may link this file (it names __real_*,
// which only --wrap defines).
#include <errno.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "interpose/internal.h"
#include "interpose/thread_state.h"

extern "C" {
void __real_free(void* p);
void* __real_realloc(void* p, size_t n);
void* __real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void** out, size_t align, size_t n);
}

namespace poolscope {
namespace {

// Each block starts 16 bytes into its internal allocation (malloc's alignment); its size is kept there.
constexpr size_t kHeader = 16;

void* Allocate(size_t n) {
  if (n > SIZE_MAX - kHeader) {
    errno = ENOMEM;
    return nullptr;
  }
  char* p = static_cast<char*>(InternalAlloc(n + kHeader));  // zeroed
  if (p == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  memcpy(p, &n, sizeof n);
  return p + kHeader;
}

size_t SizeOf(const void* p) {
  size_t n;
  memcpy(&n, static_cast<const char*>(p) - kHeader, sizeof n);
  return n;
}

void Release(void* p) { InternalFree(static_cast<char*>(p) - kHeader, SizeOf(p) + kHeader); }

// Whether p lies in one of poolscope's own mappings (then Allocate made it).
bool Internal(const void* p) { return InternalContains(p); }

}  // namespace
}  // namespace poolscope

namespace ps = poolscope;

extern "C" {

#define HIDDEN __attribute__((visibility("hidden")))

HIDDEN void* __wrap_malloc(size_t n) { return ps::Allocate(n); }

HIDDEN void* __wrap_calloc(size_t n, size_t m) {
  size_t bytes;
  if (__builtin_mul_overflow(n, m, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return ps::Allocate(bytes);
}

HIDDEN void __wrap_free(void* p) {
  if (p == nullptr) return;
  if (ps::Internal(p)) return ps::Release(p);
  ps::Guard guard(ps::t_state);
  __real_free(p);
}

HIDDEN void* __wrap_realloc(void* p, size_t n) {
  if (p == nullptr) return ps::Allocate(n);
  if (!ps::Internal(p)) {
    ps::Guard guard(ps::t_state);
    return __real_realloc(p, n);
  }
  if (n == 0) {
    ps::Release(p);
    return nullptr;
  }
  void* q = ps::Allocate(n);
  if (q == nullptr) return nullptr;
  const size_t old = ps::SizeOf(p);
  memcpy(q, p, old < n ? old : n);
  ps::Release(p);
  return q;
}

HIDDEN void* __wrap_aligned_alloc(size_t align, size_t n) {
  ps::Guard guard(ps::t_state);
  return __real_aligned_alloc(align, n);
}

HIDDEN int __wrap_posix_memalign(void** out, size_t align, size_t n) {
  ps::Guard guard(ps::t_state);
  return __real_posix_memalign(out, align, n);
}
}
