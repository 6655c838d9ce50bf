// File: interpose/real.h
//
// The next allocator in the chain: glibc, jemalloc, tcmalloc, or another interposer such as heaptrack's
// or valgrind's, found with dlsym(RTLD_NEXT, ...). dlsym allocates while it looks symbols up; those
// calls (and any that arrive before the lookup completes) are served from a static bootstrap buffer that
// free() recognises first and never passes on.
#ifndef POOLSCOPE_INTERPOSE_REAL_H_
#define POOLSCOPE_INTERPOSE_REAL_H_

#include <cstddef>
#include <cstdint>
#include <new>

namespace poolscope {

struct RealFns {
  void* (*malloc)(size_t);
  void (*free)(void*);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  void* (*reallocarray)(void*, size_t, size_t);
  int (*posix_memalign)(void**, size_t, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void* (*memalign)(size_t, size_t);
  void* (*valloc)(size_t);
  void* (*pvalloc)(size_t);
  size_t (*malloc_usable_size)(void*);
  void (*exit_)(int);  // _exit
  void (*exit)(int);   // exit: libc's, which libpoolscope.so's own exit() jumps to
  int (*dlclose)(void*);  // interposed only to learn that code was unmapped
  // C++ operators, by form. Missing forms (no libstdc++ below us) are null.
  void* (*op_new)(size_t);
  void* (*op_new_nothrow)(size_t, const std::nothrow_t&);
  void* (*op_new_aligned)(size_t, std::align_val_t);
  void* (*op_new_aligned_nothrow)(size_t, std::align_val_t, const std::nothrow_t&);
  void* (*op_new_array)(size_t);
  void* (*op_new_array_nothrow)(size_t, const std::nothrow_t&);
  void* (*op_new_array_aligned)(size_t, std::align_val_t);
  void* (*op_new_array_aligned_nothrow)(size_t, std::align_val_t, const std::nothrow_t&);
  void (*op_delete)(void*);
  void (*op_delete_sized)(void*, size_t);
  void (*op_delete_nothrow)(void*, const std::nothrow_t&);
  void (*op_delete_aligned)(void*, std::align_val_t);
  void (*op_delete_sized_aligned)(void*, size_t, std::align_val_t);
  void (*op_delete_aligned_nothrow)(void*, std::align_val_t, const std::nothrow_t&);
  void (*op_delete_array)(void*);
  void (*op_delete_array_sized)(void*, size_t);
  void (*op_delete_array_nothrow)(void*, const std::nothrow_t&);
  void (*op_delete_array_aligned)(void*, std::align_val_t);
  void (*op_delete_array_sized_aligned)(void*, size_t, std::align_val_t);
  void (*op_delete_array_aligned_nothrow)(void*, std::align_val_t, const std::nothrow_t&);
};

extern RealFns g_real;

}  // namespace poolscope

extern "C" {
// libc's exit once ResolveReal has run (else null), for libpoolscope.so's exit() to jump to.
extern void (*poolscope_real_exit)(int);
// The program's callee-saved registers at its call into exit() (rbx, rbp, r12, r13, r14, r15), kept by
// libpoolscope.so's exit(); word 6 is 1 once it has run.
extern uintptr_t poolscope_exit_registers[7];
}

namespace poolscope {

// Looks the next allocator up once; safe to call from any thread, and re-entrantly (dlsym's own
// allocations land in the bootstrap buffer). Returns false if malloc/free could not be found.
bool ResolveReal();
bool RealResolved();
// True while this thread is inside ResolveReal (its allocations must come from the bootstrap buffer).
bool InResolve();

// The bootstrap buffer.
void* BootstrapAlloc(size_t size, size_t align);
inline bool IsBootstrap(const void* p);
size_t BootstrapSize(const void* p);

extern char g_bootstrap[];
constexpr size_t kBootstrapBytes = 256 * 1024;
inline bool IsBootstrap(const void* p) {
  return reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(g_bootstrap) < kBootstrapBytes;
}

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_REAL_H_
