// File: interpose/attach.h
//
// `poolscope attach PID`: libpoolscope.so loaded into a running process (dlopen, called by gdb), which
// then routes the malloc family and every operator new/delete form of every loaded object to itself by
// rewriting their GOT entries (attach.cc). Blocks made before the attach are in no ledger: their
// free, realloc and malloc_usable_size go to the allocator that made them, and are counted here.
#ifndef POOLSCOPE_INTERPOSE_ATTACH_H_
#define POOLSCOPE_INTERPOSE_ATTACH_H_

#include <cstdint>

namespace poolscope {

// What the report says about the attach (the `attach` section and process.attached_ns).
struct AttachInfo {
  uint64_t attached_ns;           // CLOCK_REALTIME when the GOT entries were rewritten
  uint64_t detached_ns;           // 0 unless `attach` was interrupted (^C)
  uint64_t objects_patched;       // loaded objects whose GOT pointed at an allocator function
  uint64_t slots_patched;         // GOT entries rewritten, later dlopens included
  uint64_t preexisting_frees;     // free/delete of a block poolscope did not make
  uint64_t preexisting_reallocs;  // realloc/reallocarray of such a block
  uint64_t preexisting_usable_size;  // malloc_usable_size of such a block
  bool hooks_kept;                // after a detach: the entries still lead here (pooled blocks may be live)
};

// The options text of an attach (POOLSCOPE_ATTACH, read once by the library's constructor), or null
// when the library was preloaded as usual.
const char* AttachOptionsText();
// True when the library was loaded by `poolscope attach`.
bool AttachMode();
// Null unless the attach has started; else a copy of the figures above.
bool AttachReportInfo(AttachInfo* out);
// True while the detach report is being written (its reason is "detach").
bool AttachDetaching();

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_ATTACH_H_
