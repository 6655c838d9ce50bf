// File: report/site_pinning.cc
//
// See site_pinning.h.
#include "report/site_pinning.h"

#include <algorithm>

#include "fmt/format.h"
#include "report/format_util.h"
#include "report/report_model.h"

namespace poolscope::report {

using nlohmann::json;

SitePinning PinningSites(const json& report, size_t limit) {
  SitePinning p;
  const std::vector<SiteRow> rows = TopSites(report, SIZE_MAX);
  for (const SiteRow& row : rows) {
    if (row.pools_pinned > 0 || row.peak_pools_pinned > 0) p.pinning.push_back(row);
    if (row.pool_hits > 0 && (!p.saver || row.pool_hits - row.pools_pinned > p.saver->pool_hits - p.saver->pools_pinned)) {
      p.saver = row;
    }
  }
  std::stable_sort(p.pinning.begin(), p.pinning.end(), [](const SiteRow& a, const SiteRow& b) {
    return std::max(a.pools_pinned, a.peak_pools_pinned) > std::max(b.pools_pinned, b.peak_pools_pinned);
  });
  if (p.pinning.size() > limit) p.pinning.resize(limit);
  return p;
}

std::string PinnedPhrase(const SiteRow& row) {
  std::string out = fmt::format("{} pool{} ({}) pinned", Thousands(row.pools_pinned), row.pools_pinned == 1 ? "" : "s",
                                Bytes(row.pinned_bytes));
  if (PeakDiffers(row)) {
    out += fmt::format(" at exit, {} ({}) at the peak", Thousands(row.peak_pools_pinned), Bytes(row.peak_pinned_bytes));
  }
  return out;
}

std::string SaverLine(const SiteRow& saver) {
  return fmt::format("pooling saves most at: {} ({} real allocations avoided, {} pools pinned)\n", SiteLine(saver),
                     Thousands(saver.pool_hits), Thousands(saver.pools_pinned));
}

std::string PeakMoment(const json& report) {
  const json* peak = Find(report, "pinning_peak");
  if (peak == nullptr || !peak->is_object()) return "";
  const json* at_report = Find(*peak, "at_report");
  if (at_report == nullptr || !at_report->is_boolean() || at_report->get<bool>()) return "";
  std::string out = fmt::format("the peak of real live bytes, {} at {} ms", Bytes(Count(*peak, "real_live_bytes")),
                                Thousands(Count(*peak, "t_ms")));
  if (const std::optional<int64_t> seen = Count(*peak, "max_real_live_bytes_seen")) {
    out += fmt::format(" (the highest a check saw: {})", Bytes(seen));
  }
  return out;
}

std::string PinningTextSection(const json& report) {
  constexpr size_t kShown = 5;
  const SitePinning p = PinningSites(report, kShown);
  if (p.pinning.empty()) return "";
  std::string out = "\nPOOLS PINNED AT EXIT (pools the sites' live blocks keep alive; a pool shared by sites counts for "
                    "each)\n";
  const std::string moment = PeakMoment(report);
  if (!moment.empty() && std::any_of(p.pinning.begin(), p.pinning.end(), PeakDiffers)) {
    out += "  and at " + moment + "\n";
  }
  for (size_t i = 0; i < p.pinning.size(); ++i) {
    const SiteRow& row = p.pinning[i];
    out += fmt::format("  #{}  {}; {} of its {} allocations served from pools\n      {}\n", i + 1, PinnedPhrase(row),
                       Thousands(row.pool_hits), Thousands(row.logical_allocs), SiteLine(row));
  }
  if (p.saver) out += "  " + SaverLine(*p.saver);
  return out;
}

}  // namespace poolscope::report
