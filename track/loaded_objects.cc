// File: track/loaded_objects.cc
#include "track/loaded_objects.h"

#include <string.h>

namespace poolscope {
namespace track {

namespace {

struct ReadState {
  LoadedObject* out;
  size_t capacity;
  size_t count;
};

// The loader rewrites DT_STRTAB to an address on this platform; a value below the load address is
// still an offset into the object.
const char* Pointer(uintptr_t base, ElfW(Addr) value) {
  return reinterpret_cast<const char*>(value < base ? base + value : value);
}

int OnObject(struct dl_phdr_info* info, size_t, void* arg) {
  ReadState* s = static_cast<ReadState*>(arg);
  if (s->count >= s->capacity) {
    ++s->count;
    return 0;
  }
  LoadedObject o;
  o.path = info->dlpi_name != nullptr ? info->dlpi_name : "";
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD) {
      const uintptr_t b = info->dlpi_addr + ph.p_vaddr;
      if (b < lo) lo = b;
      if (b + ph.p_memsz > hi) hi = b + ph.p_memsz;
    } else if (ph.p_type == PT_DYNAMIC) {
      o.dynamic = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + ph.p_vaddr);
    }
  }
  if (hi > lo) {
    o.begin = lo;
    o.end = hi;
  }
  if (o.dynamic != nullptr) {
    ElfW(Xword) soname = 0;
    bool has_soname = false;
    for (const ElfW(Dyn)* d = o.dynamic; d->d_tag != DT_NULL; ++d) {
      if (d->d_tag == DT_STRTAB) o.strtab = Pointer(info->dlpi_addr, d->d_un.d_ptr);
      if (d->d_tag == DT_SONAME) {
        soname = d->d_un.d_val;
        has_soname = true;
      }
    }
    if (o.strtab != nullptr && has_soname) o.soname = o.strtab + soname;
  }
  s->out[s->count++] = o;
  return 0;
}

}  // namespace

size_t ReadLoadedObjects(LoadedObject* out, size_t capacity) {
  ReadState s{out, capacity, 0};
  dl_iterate_phdr(OnObject, &s);
  return s.count;
}

bool NamesObject(const LoadedObject& o, const char* name) {
  if (o.soname != nullptr) return strcmp(o.soname, name) == 0;
  const char* slash = strrchr(o.path, '/');
  const char* base = slash != nullptr ? slash + 1 : o.path;
  return base[0] != '\0' && strcmp(base, name) == 0;
}

namespace {

// Marks (bit `bit` of reached[]) every object reachable over DT_NEEDED from the objects already
// marked, without going through an object in `stop` (bit `stop_bit`); runs to a fixed point.
void Close(const LoadedObject* objs, size_t n, uint8_t* reached, uint8_t bit, uint8_t stop_bit) {
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < n; ++i) {
      if ((reached[i] & bit) == 0 || (reached[i] & stop_bit) != 0) continue;
      ForEachNeeded(objs[i], [&](const char* name) {
        for (size_t j = 0; j < n; ++j) {
          if ((reached[j] & bit) == 0 && NamesObject(objs[j], name)) {
            reached[j] |= bit;
            grew = true;
          }
        }
      });
    }
  }
}

}  // namespace

void MarkLoadedOnlyFor(size_t self, LoadedObject* objs, size_t n, uint8_t* reached) {
  constexpr uint8_t kSelf = 1, kOther = 2, kIsSelf = 4;
  memset(reached, 0, n);
  if (self >= n) return;
  // What poolscope's library needs, directly or not.
  reached[self] = kSelf | kIsSelf;
  Close(objs, n, reached, kSelf, 0);
  // What everything else needs: the objects poolscope does not need are the program's roots.
  for (size_t i = 0; i < n; ++i) {
    if ((reached[i] & kSelf) == 0) reached[i] |= kOther;
  }
  Close(objs, n, reached, kOther, kIsSelf);
  for (size_t i = 0; i < n; ++i) {
    objs[i].only_for_poolscope = i != self && (reached[i] & kSelf) != 0 && (reached[i] & kOther) == 0;
  }
}

const LoadedObject* ObjectContaining(const LoadedObject* objs, size_t n, uintptr_t pc) {
  for (size_t i = 0; i < n; ++i) {
    if (objs[i].begin <= pc && pc < objs[i].end) return &objs[i];
  }
  return nullptr;
}

}  // namespace track
}  // namespace poolscope
