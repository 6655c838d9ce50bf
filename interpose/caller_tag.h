// File: interpose/caller_tag.h
//
// tag=caller:GLOB[,GLOB]: a request is pooled only when the code that called the allocator lies in a
// loaded object whose path matches one of the globs (`*` any run of characters, `?` one character).
// The executable segments of every loaded object are kept as address ranges, each marked matching or
// not, and rebuilt with dl_iterate_phdr when an address falls in no known object (something was
// dlopen'ed since) and, every 4096 checks, when glibc's count of loads and unloads changed (an object
// dlclose'd and another loaded at its address). dlopen itself is not interposed: glibc resolves a
// dlopen'ed name against its caller's RUNPATH, which a wrapper would change. A check is a scan of the
// ranges, on the slow path only (tag=caller sends every request there).
//
// Thread-safety: CallerTagged may run on any thread; the rebuild takes a spin lock.
#ifndef POOLSCOPE_INTERPOSE_CALLER_TAG_H_
#define POOLSCOPE_INTERPOSE_CALLER_TAG_H_

#include <cstdint>

namespace poolscope {

// `globs`: comma-separated. Called once at start-up.
void CallerTagInit(const char* globs);
// True when `ra` lies in a matching object.
bool CallerTagged(const void* ra);
// Glob match, exposed for tests.
bool GlobMatch(const char* pattern, const char* text);

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_CALLER_TAG_H_
