// File: track/build_id.h
//
// A loaded object's GNU build id, read from its PT_NOTE segments in memory (no file opened, nothing
// allocated: the frame-rule store names its files by it from inside malloc, the symbolizer its debug
// files and symbol caches at report time).
//
// Thread-safety: reads only the loader's program headers and the object's notes.
#ifndef POOLSCOPE_TRACK_BUILD_ID_H_
#define POOLSCOPE_TRACK_BUILD_ID_H_

#include <elf.h>
#include <link.h>

#include <cstddef>
#include <cstring>

namespace poolscope {
namespace track {

struct BuildIdNote {
  const unsigned char* bytes;  // nullptr when the object has none
  size_t n;
};

inline BuildIdNote FindBuildIdNote(const struct dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* const end = p + ph.p_memsz;
    while (end - p >= static_cast<ptrdiff_t>(sizeof(ElfW(Nhdr)))) {
      ElfW(Nhdr) nh;
      memcpy(&nh, p, sizeof nh);
      const char* const name = p + sizeof nh;
      const char* const desc = name + ((nh.n_namesz + 3) & ~size_t{3});
      const char* const next = desc + ((nh.n_descsz + 3) & ~size_t{3});
      if (next > end) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(name, "GNU", 4) == 0 && nh.n_descsz > 0) {
        return BuildIdNote{reinterpret_cast<const unsigned char*>(desc), nh.n_descsz};
      }
      p = next;
    }
  }
  return BuildIdNote{nullptr, 0};
}

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_BUILD_ID_H_
