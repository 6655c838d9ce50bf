// File: interpose/report_leaks.h
//
// The report's leaks (docs/report-schema.md): the live blocks grouped by allocation stack and by the
// reachability scan's kind (track=1), the sites that allocate most, stacks written as symbolized
// frames, and what the exit scan found, for the program and for a leak detector below poolscope
// (`reachability`, `lsan`). Render (report_render.cc) gathers them before it writes anything, so that
// report_ms counts the symbolizing, then writes each part in its place in the report.
//
// Thread-safety: as Render's: allocates through the normal malloc, so under the reentrancy guard, one
// report at a time.
#ifndef POOLSCOPE_INTERPOSE_REPORT_LEAKS_H_
#define POOLSCOPE_INTERPOSE_REPORT_LEAKS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "interpose/leak_scan.h"
#include "interpose/timeline.h"
#include "interpose/tracking.h"
#include "report/json_writer.h"
#include "track/key_index.h"
#include "track/symbolizer.h"

namespace poolscope {

// Each return address's frame as the report writes it, rendered the first time a stack shows it: the
// same frame appears in many stacks (a short process's report writes some 600 frames of 90 addresses).
class FrameTexts {
 public:
  // The frame of return address `ra`, symbolized by `sym`: one line of JSON.
  const std::string& Of(track::Symbolizer* sym, uintptr_t ra);

 private:
  track::KeyIndex index_;
  std::vector<std::string> texts_;
};

struct ReportLeaks {
  bool tracked = false;               // TrackingOn(): every field below but scan is empty without it
  const ScanOutcome* scan = nullptr;  // LastScan()
  bool scanned = false;               // the reachability scan ran
  LiveTotals live = {};
  std::vector<LeakGroup> raw;         // AggregateLeaks's groups, by (kind, stack), largest first
  size_t nstacks_all = 0;             // how many AggregateLeaks found in all (raw keeps the first ones)
  std::vector<SiteCounters> sites;    // TopSites, then the sites that pin most pools (PinnedPools)
  std::vector<uint64_t> pools_pinned; // per sites[i]: the pools its live blocks keep alive now
  // per sites[i]: the pools its live blocks kept alive at the peak of real live bytes (`peak`)
  std::vector<uint64_t> peak_pools_pinned;
  // When the peak figures were taken: the last snapshot while the program ran (timeline.h), or now
  // (peak_at_report) when no snapshot saw more real live bytes than the report does.
  bool peak_known = false;  // tracked, with pooling on
  bool peak_at_report = false;
  PeakPinning peak = {};
  size_t pool_real_bytes = 0;         // a pool's real allocation, its slack included
  std::vector<LeakGroup> groups;      // raw merged by symbolized frames, in the report's order
  size_t ngroups_all = 0;             // groups, and the stacks raw left out
  size_t ngroups = 0;                 // of groups, those the report lists
  track::Symbolizer* sym = nullptr;   // when tracked; the caller deletes it
  mutable FrameTexts frames;          // the frames written so far (WriteStack)
};

// Aggregates the live blocks and the sites, and symbolizes the leaks' stacks.
void GatherLeaks(ReportLeaks* r);

// The frames of a captured stack from the program's first one, copied into pcs[0..track::kMaxStackDepth).
int ProgramFrames(track::Symbolizer* sym, uint32_t stack_id, uintptr_t* pcs);
// Frames of a captured stack, innermost first, symbolized now (or found in `frames`), each an object on
// a line of its own.
void WriteStack(report::JsonWriter& w, track::Symbolizer* sym, FrameTexts* frames, uint32_t stack_id);

// `sites`, each with the pools its live blocks pin now and at the peak, then `pinning_peak`.
void WriteSites(report::JsonWriter& w, const ReportLeaks& r);
// `leaks`, `leak_groups_omitted`, `tracked` and the program's `reachability`.
void WriteLeaks(report::JsonWriter& w, const ReportLeaks& r);
// Inside `detector_view`: its `reachability`, `hidden_in_pools` and `reachability_verdict`, and the
// `lsan` view.
void WriteDetectorScan(report::JsonWriter& w, const ReportLeaks& r);

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_REPORT_LEAKS_H_
