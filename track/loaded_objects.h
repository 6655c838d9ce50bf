// File: track/loaded_objects.h
//
// The process's loaded objects (dl_iterate_phdr), what each needs (its dynamic section's DT_NEEDED),
// and which of them are loaded only because poolscope is: those that poolscope's own library needs,
// directly or through other objects, and that nothing the program loaded needs. Such an object's
// allocations (libstdc++'s emergency exception pool in a C program) would not exist without poolscope.
//
// An object the program dlopen'ed and poolscope also needs counts as poolscope's: the dynamic section
// does not say who opened an object.
//
// Runs at exit inside the host process: nothing here allocates; names and dynamic sections are read
// in place, and the caller provides the array.
#ifndef POOLSCOPE_TRACK_LOADED_OBJECTS_H_
#define POOLSCOPE_TRACK_LOADED_OBJECTS_H_

#include <link.h>

#include <cstddef>
#include <cstdint>

namespace poolscope {
namespace track {

struct LoadedObject {
  uintptr_t begin = 0;  // lowest and highest address of its PT_LOAD segments
  uintptr_t end = 0;
  const char* path = "";             // as the loader names it; "" for the main program
  const char* soname = nullptr;      // DT_SONAME, nullptr when it has none
  const ElfW(Dyn)* dynamic = nullptr;  // its dynamic section, nullptr when it has none
  const char* strtab = nullptr;        // its DT_STRTAB
  bool only_for_poolscope = false;     // set by MarkLoadedOnlyFor
};

// Reads every loaded object, in the loader's order, into out[0, capacity); returns how many there are
// (a return above capacity: out holds the first capacity).
size_t ReadLoadedObjects(LoadedObject* out, size_t capacity);

// Calls fn(name) for each DT_NEEDED entry of `o`.
template <typename Fn>
void ForEachNeeded(const LoadedObject& o, Fn&& fn) {
  if (o.dynamic == nullptr || o.strtab == nullptr) return;
  for (const ElfW(Dyn)* d = o.dynamic; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_NEEDED) fn(o.strtab + d->d_un.d_val);
  }
}

// Whether `name`, as a DT_NEEDED entry names an object, is `o`: its soname, else its path's last
// component.
bool NamesObject(const LoadedObject& o, const char* name);

// Sets only_for_poolscope on every object that objs[self] needs (transitively) and that no other
// object needs, except through such objects. objs[self] itself is left unmarked. `reached` is the
// caller's scratch of n bytes. Quadratic in n: a process has hundreds of objects at most.
void MarkLoadedOnlyFor(size_t self, LoadedObject* objs, size_t n, uint8_t* reached);

// The object whose PT_LOAD span holds pc, or nullptr.
const LoadedObject* ObjectContaining(const LoadedObject* objs, size_t n, uintptr_t pc);

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_LOADED_OBJECTS_H_
