// File: track/dw_api.h
//
// libdw and libelf for the symbolizer, loaded with dlopen when the first address needs them, and
// held while a Symbolizer uses them.
//
// Thread-safety: AcquireDw and ReleaseDw may be called from any thread (g_dw_lock); Dw() only while
// the caller holds the libraries.
#ifndef POOLSCOPE_TRACK_DW_API_H_
#define POOLSCOPE_TRACK_DW_API_H_

#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

namespace poolscope {
namespace track {

// The functions of libdw and libelf the symbolizer calls, looked up in libdw.so.1 (which brings
// libelf.so.1 with it) when the first address needs them: a process that never symbolizes never maps
// either library, and one whose report finds every answer in the on-disk tables does not either.
#define POOLSCOPE_DW_FUNCTIONS(X) \
  X(dwelf_elf_gnu_build_id) \
  X(dwfl_addrmodule) \
  X(dwfl_begin) \
  X(dwfl_end) \
  X(dwfl_getmodules) \
  X(dwfl_lineinfo) \
  X(dwfl_linux_proc_find_elf) \
  X(dwfl_linux_proc_report) \
  X(dwfl_module_addrname) \
  X(dwfl_module_build_id) \
  X(dwfl_module_getelf) \
  X(dwfl_module_getsrc) \
  X(dwfl_module_getsym_info) \
  X(dwfl_module_getsymtab) \
  X(dwfl_module_getsymtab_first_global) \
  X(dwfl_module_info) \
  X(dwfl_report_begin) \
  X(dwfl_report_end) \
  X(elf_begin) \
  X(elf_compress) \
  X(elf_end) \
  X(elf_getdata) \
  X(elf_getphdrnum) \
  X(elf_getshdrstrndx) \
  X(elf_ndxscn) \
  X(elf_newdata) \
  X(elf_newscn) \
  X(elf_nextscn) \
  X(elf_update) \
  X(gelf_getclass) \
  X(gelf_getehdr) \
  X(gelf_getphdr) \
  X(gelf_getshdr) \
  X(gelf_newehdr) \
  X(gelf_newphdr) \
  X(gelf_update_ehdr) \
  X(gelf_update_phdr) \
  X(gelf_update_shdr)

struct DwApi {
#define POOLSCOPE_DW_MEMBER(name) decltype(&::name) name;
  POOLSCOPE_DW_FUNCTIONS(POOLSCOPE_DW_MEMBER)
#undef POOLSCOPE_DW_MEMBER
};

extern DwApi g_dw;

// Takes a hold on the libraries, loading them if no Symbolizer holds them; false when they cannot be
// loaded (no hold taken).
bool AcquireDw();
// Gives a hold back; the last one closes the libraries.
void ReleaseDw();
// Why the last attempt to load the libraries failed, or nullptr when it did not.
const char* DwUnavailable();

// Only while the caller holds the libraries (AcquireDw).
inline const DwApi& Dw() { return g_dw; }

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_DW_API_H_
