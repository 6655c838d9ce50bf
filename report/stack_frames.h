// File: report/stack_frames.h
//
// How the renderers name a stack of a report (`leaks[]`, `sites[]`, `errors.cases[]`: frames
// innermost first, each with `function`, `object`, `file`, `line` where known): which frames are
// the program's own, which one names the call site, and a frame's function and place as text.
// Strings taken from the report go through OneLine(), so a frame cannot break a line-oriented
// output; HTML callers escape them as usual.
//
// Thread-safety: pure functions.
#ifndef POOLSCOPE_REPORT_STACK_FRAMES_H_
#define POOLSCOPE_REPORT_STACK_FRAMES_H_

#include <cstddef>
#include <string>

#include "nlohmann/json.hpp"

namespace poolscope::report {

// Whether a frame is the program's own: not poolscope's (libpoolscope.so, poolscope_* entry points)
// nor the allocator's entry points (malloc, free, operator new and their kin).
bool IsProgramFrame(const nlohmann::json& frame);

// The index of the first (innermost) program frame of a stack, or 0 when it has none. Stacks are
// cut here for the flame graph.
size_t FirstProgramFrame(const nlohmann::json& stack);

// Whether a frame lies in the C library (libc.so.*), the dynamic loader (ld-linux*) or poolscope's
// own library (libpoolscope.so), by its object's base name.
bool IsLibcLoaderOrPoolscopeFrame(const nlohmann::json& frame);

// The index of the frame that names a stack's call site: the innermost program frame outside libc,
// the dynamic loader and libpoolscope.so, so that a block glibc allocates on the program's behalf
// (strdup's copy, stdio's buffer, a thread's TLS) is named by the code that asked for it, not by
// `__strdup` or `_IO_file_doallocate`. When every program frame is inside them, FirstProgramFrame.
size_t SiteFrame(const nlohmann::json& stack);

// The function the site frame called into libc or the loader ("printf" for a site whose stdout
// buffer glibc allocated), or "" when the site frame is the stack's first program frame.
std::string SiteVia(const nlohmann::json& stack);

// The frame's function, else "[object]" (basename), else the address, else "??".
std::string FrameFunction(const nlohmann::json& frame);

// "file:line" when known, else the object's path, else "".
std::string FrameWhere(const nlohmann::json& frame);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_STACK_FRAMES_H_
