// File: track/test_debug_info.h
//
// For tests: whether the object holding a given function kept its line tables (.debug_line). Bazel's
// default --strip=sometimes links fastbuild test binaries with -Wl,-S, which drops them; tests then
// skip their file:line checks instead of failing.
#ifndef POOLSCOPE_TRACK_TEST_DEBUG_INFO_H_
#define POOLSCOPE_TRACK_TEST_DEBUG_INFO_H_

#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cstring>

namespace poolscope {
namespace track {

inline bool ObjectHasLineTables(const void* code) {
  Dl_info info;
  if (dladdr(code, &info) == 0 || info.dli_fname == nullptr) return false;
  // The main executable's dli_fname is what argv[0] said, which may not open from here.
  int fd = info.dli_fname[0] != '\0' ? open(info.dli_fname, O_RDONLY | O_CLOEXEC) : -1;
  if (fd < 0) fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  bool found = false;
  size_t shstrndx = 0;
  if (elf != nullptr && elf_getshdrstrndx(elf, &shstrndx) == 0) {
    for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn)) != nullptr;) {
      GElf_Shdr shdr;
      if (gelf_getshdr(scn, &shdr) == nullptr) continue;
      const char* name = elf_strptr(elf, shstrndx, shdr.sh_name);
      if (name != nullptr && strcmp(name, ".debug_line") == 0) found = true;
    }
  }
  if (elf != nullptr) elf_end(elf);
  close(fd);
  return found;
}

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_TEST_DEBUG_INFO_H_
