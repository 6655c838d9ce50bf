// File: track/dynamic_symbol.h
//
// A loaded object's dynamic symbol by name, through its GNU hash table: a few probes, where dladdr
// searches every symbol of the object (about 30 us for libc, which poolscope asks at every start for
// the extent of exit()). Reads only the object's loaded tables; allocates nothing.
//
// Thread-safety: reads only; the object must stay loaded.
#ifndef POOLSCOPE_TRACK_DYNAMIC_SYMBOL_H_
#define POOLSCOPE_TRACK_DYNAMIC_SYMBOL_H_

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

namespace poolscope {
namespace track {

// The dynamic symbol `name` of a loaded object whose value (plus the load bias) is `at`; nullptr when
// the object has no GNU hash table or no such symbol.
inline const ElfW(Sym)* FindDynamicSymbol(const struct dl_phdr_info* info, const char* name, uintptr_t at) {
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
  }
  if (dyn == nullptr) return nullptr;
  uintptr_t symtab = 0, strtab = 0, gnu_hash = 0;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    // The loader relocates these entries in place on x86-64; an offset still below the bias is not.
    uintptr_t v = dyn->d_un.d_ptr;
    if (v < info->dlpi_addr) v += info->dlpi_addr;
    if (dyn->d_tag == DT_SYMTAB) symtab = v;
    if (dyn->d_tag == DT_STRTAB) strtab = v;
    if (dyn->d_tag == DT_GNU_HASH) gnu_hash = v;
  }
  if (symtab == 0 || strtab == 0 || gnu_hash == 0) return nullptr;
  uint32_t h = 5381;
  for (const char* c = name; *c != '\0'; ++c) h = h * 33 + static_cast<unsigned char>(*c);
  const auto* table = reinterpret_cast<const uint32_t*>(gnu_hash);
  const uint32_t nbuckets = table[0], symoffset = table[1], bloom_words = table[2];
  if (nbuckets == 0) return nullptr;
  const auto* buckets = reinterpret_cast<const uint32_t*>(table + 4 + bloom_words * (sizeof(ElfW(Addr)) / 4));
  const uint32_t* chain = buckets + nbuckets;
  const auto* syms = reinterpret_cast<const ElfW(Sym)*>(symtab);
  uint32_t i = buckets[h % nbuckets];
  if (i < symoffset) return nullptr;
  for (;; ++i) {
    const uint32_t hi = chain[i - symoffset];
    const ElfW(Sym)& sym = syms[i];
    if ((hi | 1) == (h | 1) && strcmp(reinterpret_cast<const char*>(strtab + sym.st_name), name) == 0 &&
        sym.st_shndx != SHN_UNDEF && info->dlpi_addr + sym.st_value == at) {
      return &sym;
    }
    if ((hi & 1) != 0) return nullptr;
  }
}

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_DYNAMIC_SYMBOL_H_
