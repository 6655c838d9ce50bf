// File: interpose/attach.cc
//
// The library's side of `poolscope attach PID` (attach.h). gdb, attached to the process, sets
// POOLSCOPE_ATTACH to the options, calls dlopen on this library (whose constructor initialises it
// from those options: AttachOptionsText) and then poolscope_attach_start, which rewrites the GOT
// entries (R_X86_64_JUMP_SLOT, R_X86_64_GLOB_DAT, and R_X86_64_64 without addend) that name an
// allocator function in every loaded object but this library: they then lead to the hooks below, which
// call this library's exported functions. dlopen is rewritten too, so that objects loaded later get the
// same treatment. Entries are rewritten in two passes, the releasing functions first: a block
// poolscope made is never handed to an allocator that does not know it.
//
// Blocks made before the attach (and blocks made by code that calls the allocator without a GOT entry)
// are foreign: poolscope tells its own from them by the pool map (pooled blocks) and by a set of the
// regular-path blocks it made since the attach (OwnedSet). A foreign block's free, realloc and
// malloc_usable_size go to the next allocator and are counted in AttachInfo, not in the ledgers.
//
// poolscope_attach_detach (called by gdb when `attach` is interrupted) writes the report. Pooling off,
// the entries then get their old values back; pooling on, pooled blocks may still be live, so the hooks
// stay, and pass everything but the pooled blocks' frees straight to the next allocator.
#include "interpose/attach.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "interpose/internal.h"
#include "interpose/owned_set.h"
#include "interpose/real.h"
#include "interpose/shim.h"
#include "interpose/shim_internal.h"
#include "interpose/snapshot.h"
#include "interpose/tracking.h"
#include "track/populate.h"

namespace poolscope {

void WriteDetachReport();  // lifecycle.cc

namespace {

// The regular-path blocks made since the attach.
OwnedSet g_owned;

// ---- state -----------------------------------------------------------------------------------------------

char g_options_text[2048];
bool g_attach_mode = false;
std::atomic<bool> g_started{false};
std::atomic<bool> g_detached{false};
std::atomic<bool> g_detaching{false};
uint64_t g_attached_ns = 0;
uint64_t g_detached_ns = 0;
bool g_hooks_kept = false;
std::atomic<uint64_t> g_pre_frees{0}, g_pre_reallocs{0}, g_pre_usable{0};
uint64_t g_objects_patched = 0, g_slots_patched = 0;
SpinLock g_patch_lock;

// The entries rewritten, with their old values (for the detach with pooling off): internal memory.
struct Patched {
  uintptr_t* slot;
  uintptr_t old;
};
Patched* g_patched = nullptr;
size_t g_npatched = 0, g_patched_cap = 0;

bool Ours(const void* p) { return IsBootstrap(p) || g_pool_map.Find(const_cast<void*>(p)) != nullptr; }

// A block the program gets from poolscope: remembered when it took the regular path.
inline void Own(void* p) {
  if (p != nullptr && !Ours(p)) g_owned.Insert(reinterpret_cast<uintptr_t>(p));
}

// Whether a block handed back must go to poolscope's function: its own (pooled, or regular and made
// since the attach, which is then forgotten), or any block while poolscope itself runs on the thread.
inline bool Release(void* p) {
  if (p == nullptr || t_state.guard > 0 || Ours(p)) return true;
  return g_owned.Remove(reinterpret_cast<uintptr_t>(p));
}

inline bool Detached() { return g_detached.load(std::memory_order_relaxed); }

// ---- this library's exported functions, by name ----------------------------------------------------------

// The same forms as the next allocator's (RealFns, _exit and dlclose included), then _Exit and the
// process's dlopen.
struct OursFns : RealFns {
  void (*Exit_)(int);
  void* (*dlopen)(const char*, int);
};
OursFns g_ours;

// The next allocator's version of an operator (or free, for a runtime without it).
template <typename F, typename... A>
void ForeignDelete(F f, void* p, A... a) {
  if (f != nullptr) {
    f(p, a...);
  } else {
    g_real.free(p);
  }
}

template <typename F, typename... A>
void* ForeignNew(F f, size_t n, A... a) {
  if (f != nullptr) return f(n, a...);
  void* p = g_real.malloc(n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

// ---- the hooks -------------------------------------------------------------------------------------------

void* HookMalloc(size_t n) {
  if (Detached()) return g_real.malloc(n);
  void* p = g_ours.malloc(n);
  if (t_state.guard == 0) Own(p);
  return p;
}

void* HookCalloc(size_t n, size_t m) {
  if (Detached()) return g_real.calloc(n, m);
  void* p = g_ours.calloc(n, m);
  if (t_state.guard == 0) Own(p);
  return p;
}

void* HookAlignedAlloc(size_t a, size_t n) {
  if (Detached()) return g_real.aligned_alloc(a, n);
  void* p = g_ours.aligned_alloc(a, n);
  if (t_state.guard == 0) Own(p);
  return p;
}

void* HookMemalign(size_t a, size_t n) {
  if (Detached()) return g_real.memalign(a, n);
  void* p = g_ours.memalign(a, n);
  if (t_state.guard == 0) Own(p);
  return p;
}

void* HookValloc(size_t n) {
  if (Detached()) return g_real.valloc(n);
  void* p = g_ours.valloc(n);
  if (t_state.guard == 0) Own(p);
  return p;
}

void* HookPvalloc(size_t n) {
  if (Detached()) return g_real.pvalloc(n);
  void* p = g_ours.pvalloc(n);
  if (t_state.guard == 0) Own(p);
  return p;
}

int HookPosixMemalign(void** out, size_t a, size_t n) {
  if (Detached()) return g_real.posix_memalign(out, a, n);
  int rc = g_ours.posix_memalign(out, a, n);
  if (rc == 0 && t_state.guard == 0) Own(*out);
  return rc;
}

void HookFree(void* p) {
  if (!Detached() && Release(p)) return g_ours.free(p);
  if (Ours(p)) return g_ours.free(p);
  if (!Detached()) g_pre_frees.fetch_add(1, std::memory_order_relaxed);
  g_real.free(p);
}

void* HookRealloc(void* p, size_t n) {
  if (p != nullptr && !Ours(p) && (Detached() || (t_state.guard == 0 && !g_owned.Remove(reinterpret_cast<uintptr_t>(p))))) {
    if (!Detached()) g_pre_reallocs.fetch_add(1, std::memory_order_relaxed);
    return g_real.realloc(p, n);
  }
  if (Detached() && p == nullptr) return g_real.realloc(p, n);
  bool was_owned = p != nullptr && !Ours(p);  // (removed from the set above)
  void* q = g_ours.realloc(p, n);
  if (t_state.guard == 0) {
    if (q != nullptr) {
      Own(q);
    } else if (was_owned && n != 0) {
      Own(p);  // failed: the block stays
    }
  }
  return q;
}

void* HookReallocarray(void* p, size_t n, size_t m) {
  if (p != nullptr && !Ours(p) && (Detached() || (t_state.guard == 0 && !g_owned.Remove(reinterpret_cast<uintptr_t>(p))))) {
    if (!Detached()) g_pre_reallocs.fetch_add(1, std::memory_order_relaxed);
    return g_real.reallocarray(p, n, m);
  }
  if (Detached() && p == nullptr) return g_real.reallocarray(p, n, m);
  bool was_owned = p != nullptr && !Ours(p);
  void* q = g_ours.reallocarray(p, n, m);
  if (t_state.guard == 0) {
    if (q != nullptr) {
      Own(q);
    } else if (was_owned && n != 0 && m != 0) {
      Own(p);
    }
  }
  return q;
}

size_t HookUsableSize(void* p) {
  if (p != nullptr && !Detached() && t_state.guard == 0 && !Ours(p) &&
      !g_owned.Contains(reinterpret_cast<uintptr_t>(p))) {
    g_pre_usable.fetch_add(1, std::memory_order_relaxed);
  }
  return g_ours.malloc_usable_size(p);
}

// operator new, every form: pass-through after a detach.
#define POOLSCOPE_NEW_HOOK(name, field, params, args)        \
  void* name params {                                        \
    if (Detached()) return ForeignNew(g_real.field, args);   \
    void* p = g_ours.field(args);                            \
    if (t_state.guard == 0) Own(p);                          \
    return p;                                                \
  }
#define POOLSCOPE_ARGS(...) __VA_ARGS__
POOLSCOPE_NEW_HOOK(HookNew, op_new, (size_t n), n)
POOLSCOPE_NEW_HOOK(HookNewArray, op_new_array, (size_t n), n)
POOLSCOPE_NEW_HOOK(HookNewAligned, op_new_aligned, (size_t n, std::align_val_t al), POOLSCOPE_ARGS(n, al))
POOLSCOPE_NEW_HOOK(HookNewArrayAligned, op_new_array_aligned, (size_t n, std::align_val_t al),
                   POOLSCOPE_ARGS(n, al))
#undef POOLSCOPE_NEW_HOOK

void* HookNewNothrow(size_t n, const std::nothrow_t& nt) noexcept {
  if (Detached()) return g_real.op_new_nothrow ? g_real.op_new_nothrow(n, nt) : g_real.malloc(n);
  void* p = g_ours.op_new_nothrow(n, nt);
  if (t_state.guard == 0) Own(p);
  return p;
}
void* HookNewArrayNothrow(size_t n, const std::nothrow_t& nt) noexcept {
  if (Detached()) return g_real.op_new_array_nothrow ? g_real.op_new_array_nothrow(n, nt) : g_real.malloc(n);
  void* p = g_ours.op_new_array_nothrow(n, nt);
  if (t_state.guard == 0) Own(p);
  return p;
}
void* HookNewAlignedNothrow(size_t n, std::align_val_t al, const std::nothrow_t& nt) noexcept {
  if (Detached()) {
    return g_real.op_new_aligned_nothrow ? g_real.op_new_aligned_nothrow(n, al, nt)
                                         : g_real.aligned_alloc(static_cast<size_t>(al), n);
  }
  void* p = g_ours.op_new_aligned_nothrow(n, al, nt);
  if (t_state.guard == 0) Own(p);
  return p;
}
void* HookNewArrayAlignedNothrow(size_t n, std::align_val_t al, const std::nothrow_t& nt) noexcept {
  if (Detached()) {
    return g_real.op_new_array_aligned_nothrow ? g_real.op_new_array_aligned_nothrow(n, al, nt)
                                               : g_real.aligned_alloc(static_cast<size_t>(al), n);
  }
  void* p = g_ours.op_new_array_aligned_nothrow(n, al, nt);
  if (t_state.guard == 0) Own(p);
  return p;
}

// operator delete, every form.
#define POOLSCOPE_DELETE_HOOK(name, field, params, rest)                \
  void name params noexcept {                                           \
    if (!Detached() && Release(p)) return g_ours.field(p rest);         \
    if (Ours(p)) return g_ours.field(p rest);                           \
    if (!Detached()) g_pre_frees.fetch_add(1, std::memory_order_relaxed); \
    ForeignDelete(g_real.field, p rest);                                \
  }
POOLSCOPE_DELETE_HOOK(HookDelete, op_delete, (void* p), )
POOLSCOPE_DELETE_HOOK(HookDeleteSized, op_delete_sized, (void* p, size_t n), POOLSCOPE_ARGS(, n))
POOLSCOPE_DELETE_HOOK(HookDeleteNothrow, op_delete_nothrow, (void* p, const std::nothrow_t& nt),
                      POOLSCOPE_ARGS(, nt))
POOLSCOPE_DELETE_HOOK(HookDeleteAligned, op_delete_aligned, (void* p, std::align_val_t al), POOLSCOPE_ARGS(, al))
POOLSCOPE_DELETE_HOOK(HookDeleteSizedAligned, op_delete_sized_aligned, (void* p, size_t n, std::align_val_t al),
                      POOLSCOPE_ARGS(, n, al))
POOLSCOPE_DELETE_HOOK(HookDeleteAlignedNothrow, op_delete_aligned_nothrow,
                      (void* p, std::align_val_t al, const std::nothrow_t& nt), POOLSCOPE_ARGS(, al, nt))
POOLSCOPE_DELETE_HOOK(HookDeleteArray, op_delete_array, (void* p), )
POOLSCOPE_DELETE_HOOK(HookDeleteArraySized, op_delete_array_sized, (void* p, size_t n), POOLSCOPE_ARGS(, n))
POOLSCOPE_DELETE_HOOK(HookDeleteArrayNothrow, op_delete_array_nothrow, (void* p, const std::nothrow_t& nt),
                      POOLSCOPE_ARGS(, nt))
POOLSCOPE_DELETE_HOOK(HookDeleteArrayAligned, op_delete_array_aligned, (void* p, std::align_val_t al),
                      POOLSCOPE_ARGS(, al))
POOLSCOPE_DELETE_HOOK(HookDeleteArraySizedAligned, op_delete_array_sized_aligned,
                      (void* p, size_t n, std::align_val_t al), POOLSCOPE_ARGS(, n, al))
POOLSCOPE_DELETE_HOOK(HookDeleteArrayAlignedNothrow, op_delete_array_aligned_nothrow,
                      (void* p, std::align_val_t al, const std::nothrow_t& nt), POOLSCOPE_ARGS(, al, nt))
#undef POOLSCOPE_DELETE_HOOK
#undef POOLSCOPE_ARGS

void PatchAll(int pass);

// dlopen: the objects it loads get their entries rewritten before it returns.
void* HookDlopen(const char* file, int flags) {
  void* h = g_ours.dlopen(file, flags);
  if (h != nullptr && !Detached()) {
    PatchAll(0);
    PatchAll(1);
  }
  return h;
}

// ---- the GOT rewrite -------------------------------------------------------------------------------------

// Pass 0: what releases or resizes a block (and the functions that end the process); pass 1: what
// allocates, and dlopen.
struct Hook {
  const char* name;
  int pass;
  void* hook;
};

Hook g_hooks[] = {
    {"free", 0, reinterpret_cast<void*>(HookFree)},
    {"realloc", 0, reinterpret_cast<void*>(HookRealloc)},
    {"reallocarray", 0, reinterpret_cast<void*>(HookReallocarray)},
    {"malloc_usable_size", 0, reinterpret_cast<void*>(HookUsableSize)},
    {"_ZdlPv", 0, reinterpret_cast<void*>(HookDelete)},
    {"_ZdlPvm", 0, reinterpret_cast<void*>(HookDeleteSized)},
    {"_ZdlPvRKSt9nothrow_t", 0, reinterpret_cast<void*>(HookDeleteNothrow)},
    {"_ZdlPvSt11align_val_t", 0, reinterpret_cast<void*>(HookDeleteAligned)},
    {"_ZdlPvmSt11align_val_t", 0, reinterpret_cast<void*>(HookDeleteSizedAligned)},
    {"_ZdlPvSt11align_val_tRKSt9nothrow_t", 0, reinterpret_cast<void*>(HookDeleteAlignedNothrow)},
    {"_ZdaPv", 0, reinterpret_cast<void*>(HookDeleteArray)},
    {"_ZdaPvm", 0, reinterpret_cast<void*>(HookDeleteArraySized)},
    {"_ZdaPvRKSt9nothrow_t", 0, reinterpret_cast<void*>(HookDeleteArrayNothrow)},
    {"_ZdaPvSt11align_val_t", 0, reinterpret_cast<void*>(HookDeleteArrayAligned)},
    {"_ZdaPvmSt11align_val_t", 0, reinterpret_cast<void*>(HookDeleteArraySizedAligned)},
    {"_ZdaPvSt11align_val_tRKSt9nothrow_t", 0, reinterpret_cast<void*>(HookDeleteArrayAlignedNothrow)},
    {"_exit", 0, nullptr},  // this library's own (the report before the process ends)
    {"_Exit", 0, nullptr},
    {"dlclose", 0, nullptr},
    {"malloc", 1, reinterpret_cast<void*>(HookMalloc)},
    {"calloc", 1, reinterpret_cast<void*>(HookCalloc)},
    {"posix_memalign", 1, reinterpret_cast<void*>(HookPosixMemalign)},
    {"aligned_alloc", 1, reinterpret_cast<void*>(HookAlignedAlloc)},
    {"memalign", 1, reinterpret_cast<void*>(HookMemalign)},
    {"valloc", 1, reinterpret_cast<void*>(HookValloc)},
    {"pvalloc", 1, reinterpret_cast<void*>(HookPvalloc)},
    {"_Znwm", 1, reinterpret_cast<void*>(HookNew)},
    {"_Znam", 1, reinterpret_cast<void*>(HookNewArray)},
    {"_ZnwmRKSt9nothrow_t", 1, reinterpret_cast<void*>(HookNewNothrow)},
    {"_ZnamRKSt9nothrow_t", 1, reinterpret_cast<void*>(HookNewArrayNothrow)},
    {"_ZnwmSt11align_val_t", 1, reinterpret_cast<void*>(HookNewAligned)},
    {"_ZnamSt11align_val_t", 1, reinterpret_cast<void*>(HookNewArrayAligned)},
    {"_ZnwmSt11align_val_tRKSt9nothrow_t", 1, reinterpret_cast<void*>(HookNewAlignedNothrow)},
    {"_ZnamSt11align_val_tRKSt9nothrow_t", 1, reinterpret_cast<void*>(HookNewArrayAlignedNothrow)},
    {"dlopen", 1, reinterpret_cast<void*>(HookDlopen)},
};

const Hook* HookFor(const char* name) {
  // Every name starts with one of these: a quick refusal for the rest.
  switch (name[0]) {
    case 'f': case 'r': case 'm': case '_': case 'c': case 'p': case 'a': case 'v': case 'd': break;
    default: return nullptr;
  }
  for (const Hook& h : g_hooks) {
    if (strcmp(h.name, name) == 0) return &h;
  }
  return nullptr;
}

uintptr_t g_self_base = 0;

bool Remember(uintptr_t* slot, uintptr_t old) {
  if (g_npatched == g_patched_cap) {
    size_t cap = g_patched_cap == 0 ? 256 : g_patched_cap * 2;
    auto* grown = static_cast<Patched*>(InternalAlloc(cap * sizeof(Patched)));
    if (grown == nullptr) return false;
    if (g_patched != nullptr) {
      memcpy(grown, g_patched, g_npatched * sizeof(Patched));
      InternalFree(g_patched, g_patched_cap * sizeof(Patched));
    }
    g_patched = grown;
    g_patched_cap = cap;
  }
  g_patched[g_npatched++] = Patched{slot, old};
  return true;
}

struct PatchRun {
  int pass;
};

// The objects with an entry rewritten (both passes, and later dlopens), each counted once.
constexpr int kMaxObjects = 4096;
POOLSCOPE_LARGE_BSS uintptr_t g_object_bases[kMaxObjects];

void NoteObject(uintptr_t base) {
  for (uint64_t i = 0; i < g_objects_patched && i < kMaxObjects; ++i) {
    if (g_object_bases[i] == base) return;
  }
  if (g_objects_patched < kMaxObjects) g_object_bases[g_objects_patched] = base;
  ++g_objects_patched;
}

int PatchObject(struct dl_phdr_info* info, size_t, void* arg) {
  auto* run = static_cast<PatchRun*>(arg);
  const uintptr_t base = info->dlpi_addr;
  const char* name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  if (base == g_self_base || strstr(name, "linux-vdso") != nullptr || strstr(name, "/ld-linux") != nullptr) {
    return 0;
  }
  const ElfW(Dyn)* dyn = nullptr;
  uintptr_t relro_lo = 0, relro_hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC) dyn = reinterpret_cast<const ElfW(Dyn)*>(base + ph.p_vaddr);
    if (ph.p_type == PT_GNU_RELRO) {
      relro_lo = (base + ph.p_vaddr) & ~uintptr_t{4095};
      relro_hi = (base + ph.p_vaddr + ph.p_memsz) & ~uintptr_t{4095};
    }
  }
  if (dyn == nullptr) return 0;
  auto at = [base](uintptr_t v) { return v < base ? base + v : v; };
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Rela)* rela = nullptr;
  size_t rela_bytes = 0;
  const ElfW(Rela)* jmprel = nullptr;
  size_t jmprel_bytes = 0;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(at(d->d_un.d_ptr)); break;
      case DT_STRTAB: strtab = reinterpret_cast<const char*>(at(d->d_un.d_ptr)); break;
      case DT_RELA: rela = reinterpret_cast<const ElfW(Rela)*>(at(d->d_un.d_ptr)); break;
      case DT_RELASZ: rela_bytes = d->d_un.d_val; break;
      case DT_JMPREL: jmprel = reinterpret_cast<const ElfW(Rela)*>(at(d->d_un.d_ptr)); break;
      case DT_PLTRELSZ: jmprel_bytes = d->d_un.d_val; break;
      default: break;
    }
  }
  if (symtab == nullptr || strtab == nullptr) return 0;
  bool unprotected = false;
  uint64_t patched = 0;
  auto scan = [&](const ElfW(Rela)* r, size_t bytes) {
    if (r == nullptr) return;
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
      const uint32_t type = ELF64_R_TYPE(r[i].r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT && !(type == R_X86_64_64 && r[i].r_addend == 0)) {
        continue;
      }
      const uint32_t sym = ELF64_R_SYM(r[i].r_info);
      if (sym == 0) continue;
      const Hook* h = HookFor(strtab + symtab[sym].st_name);
      if (h == nullptr || h->pass != run->pass || h->hook == nullptr) continue;
      auto* slot = reinterpret_cast<uintptr_t*>(base + r[i].r_offset);
      const uintptr_t want = reinterpret_cast<uintptr_t>(h->hook);
      if (*slot == want) continue;
      const uintptr_t addr = reinterpret_cast<uintptr_t>(slot);
      if (addr >= relro_lo && addr < relro_hi && !unprotected) {
        if (mprotect(reinterpret_cast<void*>(relro_lo), relro_hi - relro_lo, PROT_READ | PROT_WRITE) != 0) return;
        unprotected = true;
      }
      if (!Remember(slot, *slot)) return;
      __atomic_store_n(slot, want, __ATOMIC_RELEASE);
      ++patched;
    }
  };
  scan(jmprel, jmprel_bytes);
  scan(rela, rela_bytes);
  if (unprotected) mprotect(reinterpret_cast<void*>(relro_lo), relro_hi - relro_lo, PROT_READ);
  if (patched != 0) {
    g_slots_patched += patched;
    NoteObject(base);
  }
  return 0;
}

void PatchAll(int pass) {
  SpinLockHolder lock(&g_patch_lock);
  PatchRun run = {pass};
  dl_iterate_phdr(PatchObject, &run);
}

// Puts back every rewritten entry (the detach with pooling off).
void RestoreAll() {
  SpinLockHolder lock(&g_patch_lock);
  for (size_t i = g_npatched; i-- > 0;) {
    uintptr_t* slot = g_patched[i].slot;
    const uintptr_t page = reinterpret_cast<uintptr_t>(slot) & ~uintptr_t{4095};
    // Writable pages stay so; a RELRO page is made writable for the store and read-only again.
    if (mprotect(reinterpret_cast<void*>(page), 4096, PROT_READ | PROT_WRITE) != 0) continue;
    __atomic_store_n(slot, g_patched[i].old, __ATOMIC_RELEASE);
  }
  // (The protections: RELRO pages back to read-only, object by object.)
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void*) -> int {
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_GNU_RELRO || info->dlpi_addr == g_self_base) continue;
          uintptr_t lo = (info->dlpi_addr + ph.p_vaddr) & ~uintptr_t{4095};
          uintptr_t hi = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz) & ~uintptr_t{4095};
          if (hi > lo) mprotect(reinterpret_cast<void*>(lo), hi - lo, PROT_READ);
        }
        return 0;
      },
      nullptr);
}

template <typename F>
bool Lookup(void* self, F* out, const char* name) {
  *out = reinterpret_cast<F>(dlsym(self, name));
  return *out != nullptr;
}

bool ResolveOurs() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&ResolveOurs), &info) == 0) return false;
  g_self_base = reinterpret_cast<uintptr_t>(info.dli_fbase);
  void* self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (self == nullptr) return false;
  OursFns& o = g_ours;
  bool ok = Lookup(self, &o.malloc, "malloc") && Lookup(self, &o.free, "free") &&
            Lookup(self, &o.calloc, "calloc") && Lookup(self, &o.realloc, "realloc") &&
            Lookup(self, &o.reallocarray, "reallocarray") && Lookup(self, &o.posix_memalign, "posix_memalign") &&
            Lookup(self, &o.aligned_alloc, "aligned_alloc") && Lookup(self, &o.memalign, "memalign") &&
            Lookup(self, &o.valloc, "valloc") && Lookup(self, &o.pvalloc, "pvalloc") &&
            Lookup(self, &o.malloc_usable_size, "malloc_usable_size") && Lookup(self, &o.op_new, "_Znwm") &&
            Lookup(self, &o.op_new_nothrow, "_ZnwmRKSt9nothrow_t") &&
            Lookup(self, &o.op_new_aligned, "_ZnwmSt11align_val_t") &&
            Lookup(self, &o.op_new_aligned_nothrow, "_ZnwmSt11align_val_tRKSt9nothrow_t") &&
            Lookup(self, &o.op_new_array, "_Znam") && Lookup(self, &o.op_new_array_nothrow, "_ZnamRKSt9nothrow_t") &&
            Lookup(self, &o.op_new_array_aligned, "_ZnamSt11align_val_t") &&
            Lookup(self, &o.op_new_array_aligned_nothrow, "_ZnamSt11align_val_tRKSt9nothrow_t") &&
            Lookup(self, &o.op_delete, "_ZdlPv") && Lookup(self, &o.op_delete_sized, "_ZdlPvm") &&
            Lookup(self, &o.op_delete_nothrow, "_ZdlPvRKSt9nothrow_t") &&
            Lookup(self, &o.op_delete_aligned, "_ZdlPvSt11align_val_t") &&
            Lookup(self, &o.op_delete_sized_aligned, "_ZdlPvmSt11align_val_t") &&
            Lookup(self, &o.op_delete_aligned_nothrow, "_ZdlPvSt11align_val_tRKSt9nothrow_t") &&
            Lookup(self, &o.op_delete_array, "_ZdaPv") && Lookup(self, &o.op_delete_array_sized, "_ZdaPvm") &&
            Lookup(self, &o.op_delete_array_nothrow, "_ZdaPvRKSt9nothrow_t") &&
            Lookup(self, &o.op_delete_array_aligned, "_ZdaPvSt11align_val_t") &&
            Lookup(self, &o.op_delete_array_sized_aligned, "_ZdaPvmSt11align_val_t") &&
            Lookup(self, &o.op_delete_array_aligned_nothrow, "_ZdaPvSt11align_val_tRKSt9nothrow_t") &&
            Lookup(self, &o.exit_, "_exit") && Lookup(self, &o.Exit_, "_Exit") &&
            Lookup(self, &o.dlclose, "dlclose");
  // dlopen: the process's own (libc's), found from here as any object finds it.
  o.dlopen = reinterpret_cast<void* (*)(const char*, int)>(dlsym(RTLD_DEFAULT, "dlopen"));
  dlclose(self);
  if (!ok || o.dlopen == nullptr) return false;
  for (Hook& h : g_hooks) {
    if (strcmp(h.name, "_exit") == 0) h.hook = reinterpret_cast<void*>(o.exit_);
    if (strcmp(h.name, "_Exit") == 0) h.hook = reinterpret_cast<void*>(o.Exit_);
    if (strcmp(h.name, "dlclose") == 0) h.hook = reinterpret_cast<void*>(o.dlclose);
  }
  return true;
}

}  // namespace

const char* AttachOptionsText() {
  static bool read = false;
  if (!read) {
    read = true;
    const char* text = getenv("POOLSCOPE_ATTACH");
    if (text != nullptr) {
      strncpy(g_options_text, text, sizeof g_options_text - 1);
      g_attach_mode = true;
    }
  }
  return g_attach_mode ? g_options_text : nullptr;
}

bool AttachMode() {
  AttachOptionsText();
  return g_attach_mode;
}

bool AttachDetaching() { return g_detaching.load(std::memory_order_relaxed); }

bool AttachReportInfo(AttachInfo* out) {
  if (!g_started.load(std::memory_order_acquire)) return false;
  out->attached_ns = g_attached_ns;
  out->detached_ns = g_detached_ns;
  out->objects_patched = g_objects_patched;
  out->slots_patched = g_slots_patched;
  out->preexisting_frees = g_pre_frees.load(std::memory_order_relaxed) + g_owned.lost();
  out->preexisting_reallocs = g_pre_reallocs.load(std::memory_order_relaxed);
  out->preexisting_usable_size = g_pre_usable.load(std::memory_order_relaxed);
  out->hooks_kept = g_hooks_kept;
  return true;
}

}  // namespace poolscope

namespace ps = poolscope;

// Called by gdb after the dlopen: rewrites the entries. Returns the number rewritten, or -1 when the
// library was not loaded by `poolscope attach`, -2 when it could not initialise, -3 when this library's
// own functions could not be found, -4 when it had already started.
extern "C" __attribute__((visibility("default"))) int poolscope_attach_start(void) {
  if (!ps::AttachMode()) return -1;
  if (ps::g_init.load(std::memory_order_acquire) != 2) return -2;
  if (ps::g_started.exchange(true)) return -4;
  if (!ps::ResolveOurs()) {
    ps::g_started.store(false);
    return -3;
  }
  ps::g_attached_ns = ps::NowNs();
  // The hooks below add a frame of poolscope's own under every call: stacks start above it.
  if (ps::TrackingOn()) ps::TrackingHooked();
  ps::PatchAll(0);
  ps::PatchAll(1);
  return static_cast<int>(ps::g_slots_patched);
}

// Called by gdb when `attach` is interrupted: the report, then the entries' old values (pooling off)
// or the hooks left in pass-through (pooling on). Returns 0, or -1 when not attached.
extern "C" __attribute__((visibility("default"))) int poolscope_attach_detach(void) {
  if (!ps::g_started.load(std::memory_order_acquire) || ps::g_detached.load()) return -1;
  ps::g_detached_ns = ps::NowNs();
  ps::g_hooks_kept = ps::g_pooling;
  ps::g_detached.store(true, std::memory_order_release);
  ps::g_detaching.store(true);
  ps::WriteDetachReport();
  ps::g_detaching.store(false);
  if (!ps::g_pooling) ps::RestoreAll();
  return 0;
}
