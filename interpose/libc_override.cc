// File: interpose/libc_override.cc
//
// The exported entry points: the malloc family, every form of operator new and delete, exit, _exit,
// _Exit and dlclose, the functions that set signal dispositions (signals.h), and the poolscope_* C API.
// Forwarding only; the logic is in shim.cc and the files beside it (docs/design.md, "Files"). Only the
// symbols named in exports.lds leave the library.
#include <link.h>
#include <signal.h>

#include <cstddef>
#include <cstdint>
#include <new>

#define POOLSCOPE_ARENA_NO_INLINE  // (this file defines the exported poolscope_arena_alloc)
#include "interpose/poolscope.h"
#include "interpose/real.h"
#include "interpose/shim.h"
#include "interpose/signals.h"
#include "interpose/tracking.h"

using poolscope::Api;
namespace ps = poolscope;

#define RA __builtin_return_address(0)
#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT void* malloc(size_t n) {
  if (void* p = ps::TryPooled(ps::kMalloc, n)) return p;
  if (POOLSCOPE_UNLIKELY(ps::g_tracked_malloc)) return ps::MallocTracked(n, RA);
  return ps::MallocRegular(n, RA);
}
EXPORT void free(void* p) { ps::Free(ps::kFree, p); }
EXPORT void* calloc(size_t n, size_t m) { return ps::Calloc(n, m, RA); }
EXPORT void* realloc(void* p, size_t n) { return ps::Realloc(ps::kRealloc, p, n, 0, RA); }
EXPORT void* reallocarray(void* p, size_t n, size_t m) { return ps::Realloc(ps::kReallocarray, p, n, m, RA); }
EXPORT int posix_memalign(void** out, size_t align, size_t n) { return ps::PosixMemalign(out, align, n, RA); }
EXPORT void* aligned_alloc(size_t align, size_t n) { return ps::AlignedEntry(ps::kAlignedAlloc, align, n, RA); }
EXPORT void* memalign(size_t align, size_t n) { return ps::AlignedEntry(ps::kMemalign, align, n, RA); }
EXPORT void* valloc(size_t n) { return ps::AlignedEntry(ps::kValloc, 0, n, RA); }
EXPORT void* pvalloc(size_t n) { return ps::AlignedEntry(ps::kPvalloc, 0, n, RA); }
EXPORT size_t malloc_usable_size(void* p) { return ps::UsableSize(p); }

#define NEW_ATTR __attribute__((visibility("default")))
NEW_ATTR void* operator new(size_t n) {
  if (void* p = ps::TryPooled(ps::kNew, n)) return p;
  return ps::NewSlow(ps::kNew, n, RA);
}
NEW_ATTR void* operator new[](size_t n) {
  if (void* p = ps::TryPooled(ps::kNewArray, n)) return p;
  return ps::NewSlow(ps::kNewArray, n, RA);
}
NEW_ATTR void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return ps::NewForm(ps::kNew, n, 0, true, RA);
  } catch (...) {
    return nullptr;
  }
}
NEW_ATTR void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  try {
    return ps::NewForm(ps::kNewArray, n, 0, true, RA);
  } catch (...) {
    return nullptr;
  }
}
NEW_ATTR void* operator new(size_t n, std::align_val_t al) {
  return ps::NewForm(ps::kNew, n, static_cast<size_t>(al), false, RA);
}
NEW_ATTR void* operator new[](size_t n, std::align_val_t al) {
  return ps::NewForm(ps::kNewArray, n, static_cast<size_t>(al), false, RA);
}
NEW_ATTR void* operator new(size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  try {
    return ps::NewForm(ps::kNew, n, static_cast<size_t>(al), true, RA);
  } catch (...) {
    return nullptr;
  }
}
NEW_ATTR void* operator new[](size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  try {
    return ps::NewForm(ps::kNewArray, n, static_cast<size_t>(al), true, RA);
  } catch (...) {
    return nullptr;
  }
}

NEW_ATTR void operator delete(void* p) noexcept { ps::Free(ps::kDelete, p); }
NEW_ATTR void operator delete[](void* p) noexcept { ps::Free(ps::kDeleteArray, p); }
NEW_ATTR void operator delete(void* p, size_t n) noexcept { ps::DeleteForm(ps::kDelete, p, n, 0, false); }
NEW_ATTR void operator delete[](void* p, size_t n) noexcept { ps::DeleteForm(ps::kDeleteArray, p, n, 0, false); }
NEW_ATTR void operator delete(void* p, const std::nothrow_t&) noexcept {
  ps::DeleteForm(ps::kDelete, p, 0, 0, true);
}
NEW_ATTR void operator delete[](void* p, const std::nothrow_t&) noexcept {
  ps::DeleteForm(ps::kDeleteArray, p, 0, 0, true);
}
NEW_ATTR void operator delete(void* p, std::align_val_t al) noexcept {
  ps::DeleteForm(ps::kDelete, p, 0, static_cast<size_t>(al), false);
}
NEW_ATTR void operator delete[](void* p, std::align_val_t al) noexcept {
  ps::DeleteForm(ps::kDeleteArray, p, 0, static_cast<size_t>(al), false);
}
NEW_ATTR void operator delete(void* p, size_t n, std::align_val_t al) noexcept {
  ps::DeleteForm(ps::kDelete, p, n, static_cast<size_t>(al), false);
}
NEW_ATTR void operator delete[](void* p, size_t n, std::align_val_t al) noexcept {
  ps::DeleteForm(ps::kDeleteArray, p, n, static_cast<size_t>(al), false);
}
NEW_ATTR void operator delete(void* p, std::align_val_t al, const std::nothrow_t&) noexcept {
  ps::DeleteForm(ps::kDelete, p, 0, static_cast<size_t>(al), true);
}
NEW_ATTR void operator delete[](void* p, std::align_val_t al, const std::nothrow_t&) noexcept {
  ps::DeleteForm(ps::kDeleteArray, p, 0, static_cast<size_t>(al), true);
}

// The C API, under its public names (for programs that look it up themselves) and as poolscope_impl_*
// (what the client library looks up, so the client's own definitions never shadow these). The arena
// functions' two names are one function (aliases), so the client's call lands on the inline path itself.
EXPORT poolscope_arena* poolscope_arena_open(void) { return static_cast<poolscope_arena*>(ps::ArenaOpen(RA)); }
EXPORT void* poolscope_arena_alloc(poolscope_arena* a, size_t size, size_t align) {
  return ps::ArenaAlloc(a, size, align, RA);
}
// For the client library, whose calls are not always jumps: the program's return address, given.
EXPORT poolscope_arena* poolscope_impl_arena_open_at(void* ra) { return static_cast<poolscope_arena*>(ps::ArenaOpen(ra)); }
EXPORT void* poolscope_impl_arena_alloc_at(poolscope_arena* a, size_t size, size_t align, void* ra) {
  return ps::ArenaAlloc(a, size, align, ra);
}
EXPORT void poolscope_arena_close(poolscope_arena* a) { ps::ArenaClose(a); }
EXPORT void* poolscope_arena_alloc_call(poolscope_arena* a, size_t size, size_t align)
    __attribute__((alias("poolscope_arena_alloc")));
// The arena layout programs built with poolscope.h may read and write inline (the client library asks).
EXPORT int poolscope_impl_arena_layout(void) { return POOLSCOPE_ARENA_LAYOUT; }
static_assert(offsetof(ps::pool::Arena, cur) == offsetof(poolscope_arena_view, cur), "layout 1");
static_assert(offsetof(ps::pool::Arena, end) == offsetof(poolscope_arena_view, end), "layout 1");
static_assert(offsetof(ps::pool::Arena, counts) == offsetof(poolscope_arena_view, counts), "layout 1");
static_assert(offsetof(ps::pool::Arena, limit) == offsetof(poolscope_arena_view, limit), "layout 1");
static_assert(offsetof(ps::pool::Arena, pooled_blocks) == offsetof(poolscope_arena_view, blocks), "layout 1");
static_assert(ps::pool::kGranule == 8 && ps::pool::kLine == 64, "layout 1's carve rules");
EXPORT poolscope_arena* poolscope_impl_arena_open(void) __attribute__((alias("poolscope_arena_open")));
EXPORT void* poolscope_impl_arena_alloc(poolscope_arena* a, size_t size, size_t align)
    __attribute__((alias("poolscope_arena_alloc")));
EXPORT void poolscope_impl_arena_close(poolscope_arena* a) __attribute__((alias("poolscope_arena_close")));
EXPORT void poolscope_impl_tag_push(const char*) { ps::TagPush(); }
EXPORT void poolscope_impl_tag_pop(void) { ps::TagPop(); }
EXPORT int poolscope_impl_active(void) { return ps::Active(); }

EXPORT void poolscope_tag_push(const char* label) { poolscope_impl_tag_push(label); }
EXPORT void poolscope_tag_pop(void) { poolscope_impl_tag_pop(); }
EXPORT int poolscope_active(void) { return poolscope_impl_active(); }

// Objects unloaded so far in the process (the loader's count).
static unsigned long long Unloads() {
  unsigned long long subs = 0;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t size, void* arg) {
        if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
          *static_cast<unsigned long long*>(arg) = info->dlpi_subs;
        }
        return 1;
      },
      &subs);
  return subs;
}

// dlclose passes straight through; when it unloaded an object, the stack walk then forgets the frame
// rules it cached, as another object may be mapped where the closed one was (a dlclose that only
// drops a reference, as most do, leaves them). (dlopen is not interposed: see caller_tag.h.)
EXPORT int dlclose(void* handle) {
  if (ps::g_real.dlclose == nullptr && (!ps::ResolveReal() || ps::g_real.dlclose == nullptr)) return -1;
  const unsigned long long before = Unloads();
  int rc = ps::g_real.dlclose(handle);
  if (Unloads() != before) ps::TrackingCodeUnmapped();
  return rc;
}

// exit(): the program's callee-saved registers (rbx, rbp, r12-r15) as they are at its call, kept for
// the exit scan (a detector below reads them in the exit path's frames, which save them), then a jump
// to libc's exit, which leaves no frame of poolscope's between the program's and libc's.
extern "C" {
__attribute__((visibility("hidden"), noreturn, used)) void poolscope_exit_slow(int status) {
  // Before the library resolved libc's exit (a constructor that runs before ours exits).
  ps::ResolveReal();
  poolscope_real_exit = ps::g_real.exit;
  if (poolscope_real_exit != nullptr) poolscope_real_exit(status);
  ps::g_real.exit_(status);
  __builtin_unreachable();
}
}
__asm__(R"(
  .text
  .globl exit
  .type exit, @function
  .p2align 4
exit:
  .cfi_startproc
  movq %rbx, poolscope_exit_registers+0(%rip)
  movq %rbp, poolscope_exit_registers+8(%rip)
  movq %r12, poolscope_exit_registers+16(%rip)
  movq %r13, poolscope_exit_registers+24(%rip)
  movq %r14, poolscope_exit_registers+32(%rip)
  movq %r15, poolscope_exit_registers+40(%rip)
  movq $1, poolscope_exit_registers+48(%rip)
  movq poolscope_real_exit(%rip), %rax
  testq %rax, %rax
  jz 1f
  jmp *%rax
1:
  jmp poolscope_exit_slow
  .cfi_endproc
  .size exit, .-exit
)");

EXPORT void _exit(int status) {
  ps::OnExitCall();
  ps::g_real.exit_(status);
  __builtin_unreachable();
}

EXPORT void _Exit(int status) {
  ps::OnExitCall();
  ps::g_real.exit_(status);
  __builtin_unreachable();
}

// Dispositions of SIGTERM, SIGINT and SIGHUP as the program set them (signals.h); glibc's aliases of
// each function are interposed too.
EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  return ps::Sigaction(sig, act, old);
}
EXPORT int __sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  return ps::Sigaction(sig, act, old);
}
EXPORT sighandler_t signal(int sig, sighandler_t handler) noexcept { return ps::Signal(sig, handler); }
EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) noexcept { return ps::Signal(sig, handler); }
EXPORT sighandler_t ssignal(int sig, sighandler_t handler) noexcept { return ps::Signal(sig, handler); }
EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) noexcept { return ps::SysvSignal(sig, handler); }
EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler) noexcept {
  return ps::SysvSignal(sig, handler);
}
EXPORT sighandler_t sigset(int sig, sighandler_t disp) noexcept { return ps::Sigset(sig, disp); }
EXPORT int sigignore(int sig) noexcept { return ps::Sigignore(sig); }
EXPORT int siginterrupt(int sig, int interrupt) noexcept { return ps::Siginterrupt(sig, interrupt); }

__attribute__((constructor(101))) static void poolscope_load() { ps::OnLoad(); }
__attribute__((destructor(101))) static void poolscope_unload() { ps::OnUnload(); }
