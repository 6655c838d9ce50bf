// File: interpose/report_render.h
//
// The report's content: one report (docs/report-schema.md) rendered as JSON from a snapshot, with the
// leaks and sites of tracking and the reachability scan's verdict (report_leaks.h) and the bad frees
// recorded so far (RecordBadFree, snapshot.h). Writing it out is report_writer.cc's.
//
// Thread-safety: Render allocates through the normal malloc: call it under the reentrancy guard, one
// report at a time. RecordBadFree from any thread.
#ifndef POOLSCOPE_INTERPOSE_REPORT_RENDER_H_
#define POOLSCOPE_INTERPOSE_REPORT_RENDER_H_

#include <cstdint>

#include "interpose/leak_exit.h"
#include "interpose/options.h"
#include "interpose/snapshot.h"
#include "report/json_writer.h"

namespace poolscope {

// What leak_exitcode found at exit: the report's `leak_check`.
struct LeakCheck {
  int leak_exitcode;
  ProgramLeaks leaks;
  // After a reachability scan: the blocks of the kinds in leak_kinds, which decide the status; -1
  // without a scan (program_leak_blocks decides).
  int64_t lost_blocks;
  int exit_status;  // the status the process ends with for its leaks; 0: its own is kept
};

// CLOCK_MONOTONIC in nanoseconds.
uint64_t MonotonicNs();

// `check`: null but in the exit report with leak_exitcode > 0. `started_ns`: MonotonicNs() when this
// report began. `path`: where the report goes.
void Render(report::JsonWriter& w, const char* reason, const Options& o, const ProcessInfo& p,
            const Snapshot& s, const LeakCheck* check, const char* path, uint64_t started_ns);

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_REPORT_RENDER_H_
