// File: interpose/real.cc
//
// dlsym(RTLD_NEXT) lookup of the next allocator, and the bootstrap buffer; see real.h.
#include "interpose/real.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>

#include "interpose/internal.h"
#include "track/populate.h"

void (*poolscope_real_exit)(int) = nullptr;
uintptr_t poolscope_exit_registers[7] = {};

namespace poolscope {

RealFns g_real;
alignas(64) POOLSCOPE_LARGE_BSS char g_bootstrap[kBootstrapBytes];

namespace {

std::atomic<size_t> g_bootstrap_used{0};
std::atomic<int> g_state{0};  // 0 not yet, 1 resolving, 2 done, 3 failed
thread_local bool t_in_resolve __attribute__((tls_model("initial-exec"))) = false;

template <typename F>
void Lookup(F* slot, const char* name) {
  *slot = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

bool InResolve() { return t_in_resolve; }
bool RealResolved() { return g_state.load(std::memory_order_acquire) == 2; }

void* BootstrapAlloc(size_t size, size_t align) {
  if (align < 16) align = 16;
  // Each block is preceded by 16 bytes holding its size.
  for (;;) {
    size_t used = g_bootstrap_used.load(std::memory_order_relaxed);
    size_t start = (used + 16 + align - 1) & ~(align - 1);
    size_t end = start + ((size + 15) & ~size_t{15});
    if (end > kBootstrapBytes) return nullptr;
    if (g_bootstrap_used.compare_exchange_weak(used, end, std::memory_order_relaxed)) {
      char* p = g_bootstrap + start;
      memcpy(p - 16, &size, sizeof size);
      return p;
    }
  }
}

size_t BootstrapSize(const void* p) {
  size_t size;
  memcpy(&size, static_cast<const char*>(p) - 16, sizeof size);
  return size;
}

bool ResolveReal() {
  int s = g_state.load(std::memory_order_acquire);
  if (s >= 2) return s == 2;
  int expected = 0;
  if (!g_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    if (t_in_resolve) return false;  // re-entered from dlsym: the caller uses the bootstrap buffer
    while (g_state.load(std::memory_order_acquire) == 1) sched_yield();
    return g_state.load(std::memory_order_acquire) == 2;
  }
  t_in_resolve = true;
  RealFns r = {};
  Lookup(&r.malloc, "malloc");
  Lookup(&r.free, "free");
  Lookup(&r.calloc, "calloc");
  Lookup(&r.realloc, "realloc");
  Lookup(&r.reallocarray, "reallocarray");
  Lookup(&r.posix_memalign, "posix_memalign");
  Lookup(&r.aligned_alloc, "aligned_alloc");
  Lookup(&r.memalign, "memalign");
  Lookup(&r.valloc, "valloc");
  Lookup(&r.pvalloc, "pvalloc");
  Lookup(&r.malloc_usable_size, "malloc_usable_size");
  Lookup(&r.exit_, "_exit");
  Lookup(&r.exit, "exit");
  Lookup(&r.dlclose, "dlclose");
  Lookup(&r.op_new, "_Znwm");
  Lookup(&r.op_new_nothrow, "_ZnwmRKSt9nothrow_t");
  Lookup(&r.op_new_aligned, "_ZnwmSt11align_val_t");
  Lookup(&r.op_new_aligned_nothrow, "_ZnwmSt11align_val_tRKSt9nothrow_t");
  Lookup(&r.op_new_array, "_Znam");
  Lookup(&r.op_new_array_nothrow, "_ZnamRKSt9nothrow_t");
  Lookup(&r.op_new_array_aligned, "_ZnamSt11align_val_t");
  Lookup(&r.op_new_array_aligned_nothrow, "_ZnamSt11align_val_tRKSt9nothrow_t");
  Lookup(&r.op_delete, "_ZdlPv");
  Lookup(&r.op_delete_sized, "_ZdlPvm");
  Lookup(&r.op_delete_nothrow, "_ZdlPvRKSt9nothrow_t");
  Lookup(&r.op_delete_aligned, "_ZdlPvSt11align_val_t");
  Lookup(&r.op_delete_sized_aligned, "_ZdlPvmSt11align_val_t");
  Lookup(&r.op_delete_aligned_nothrow, "_ZdlPvSt11align_val_tRKSt9nothrow_t");
  Lookup(&r.op_delete_array, "_ZdaPv");
  Lookup(&r.op_delete_array_sized, "_ZdaPvm");
  Lookup(&r.op_delete_array_nothrow, "_ZdaPvRKSt9nothrow_t");
  Lookup(&r.op_delete_array_aligned, "_ZdaPvSt11align_val_t");
  Lookup(&r.op_delete_array_sized_aligned, "_ZdaPvmSt11align_val_t");
  Lookup(&r.op_delete_array_aligned_nothrow, "_ZdaPvSt11align_val_tRKSt9nothrow_t");
  g_real = r;
  poolscope_real_exit = r.exit;
  t_in_resolve = false;
  bool ok = r.malloc != nullptr && r.free != nullptr && r.calloc != nullptr && r.realloc != nullptr;
  g_state.store(ok ? 2 : 3, std::memory_order_release);
  return ok;
}

}  // namespace poolscope
