// File: report/stack_frames.h
//
// How the renderers name a stack of a report (`leaks[]`, `sites[]`, `errors.cases[]`: frames
// innermost first, each with `function`, `object`, `file`, `line` where known): which frames are
// the program's own, and a frame's function and place as text.
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

// The frame's function, else "[object]" (basename), else the address, else "??".
std::string FrameFunction(const nlohmann::json& frame);

// "file:line" when known, else the object's path, else "".
std::string FrameWhere(const nlohmann::json& frame);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_STACK_FRAMES_H_
