// File: report/site_pinning.h
//
// Where pooling serves a program badly and where well, from a report's `sites[]` and `pinning_peak`:
// the sites whose live blocks keep most pools alive, at exit and at the peak of real live bytes, and
// the site pooling saves most calls at. Shared by the text page, the HTML page and `poolscope
// compare`, which show the peak's figure beside the exit's only where the two differ.
//
// Thread-safety: pure functions.
#ifndef POOLSCOPE_REPORT_SITE_PINNING_H_
#define POOLSCOPE_REPORT_SITE_PINNING_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "report/text_report.h"

namespace poolscope::report {

// The sites that pin pools at exit or at the peak, those that pin most (the larger of the two) first,
// at most `limit`; none with pooling off or without tracking. `saver`: the site pooling saves most
// calls at (pool hits less the pools it pins at exit), if any.
struct SitePinning {
  std::vector<SiteRow> pinning;
  std::optional<SiteRow> saver;
};
SitePinning PinningSites(const nlohmann::json& report, size_t limit);

// Whether a site's peak figure differs from its exit one (a report without peak figures: never).
inline bool PeakDiffers(const SiteRow& row) { return row.peak_pools_pinned != row.pools_pinned; }

// "50 pools (7.0 KiB) pinned"; where the peak's figure differs "0 pools (0 B) pinned at exit, 18,125
// (2.5 MiB) at the peak".
std::string PinnedPhrase(const SiteRow& row);

// When the peak figures were taken, from `pinning_peak`: "the peak of real live bytes, 2.6 MiB at
// 14 ms (the highest a check saw: 2.8 MiB)"; "" when the report has none or took them at its own
// moment.
std::string PeakMoment(const nlohmann::json& report);

// "pooling saves most at: SITE (N real allocations avoided, M pools pinned)", the saver's line of the
// text page and of `poolscope compare` (newline included).
std::string SaverLine(const SiteRow& saver);

// The text page's section (`poolscope report`): "" when no site pins a pool.
std::string PinningTextSection(const nlohmann::json& report);

}  // namespace poolscope::report

#endif  // POOLSCOPE_REPORT_SITE_PINNING_H_
