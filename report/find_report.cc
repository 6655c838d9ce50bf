// File: report/find_report.cc
//
// See find_report.h.
#include "report/find_report.h"

#include <glob.h>
#include <sys/stat.h>
#include <time.h>

#include <vector>

#include "report/report_path.h"

namespace poolscope {
namespace report {

std::string FindReport(const std::string& pattern, int pid) {
  if (pattern.find('%') == std::string::npos) return pattern;
  ReportPathValues values;
  values.pid = pid;
  values.exe = "*";
  values.start = "*";
  values.glob = true;
  std::vector<char> glob_pattern(2 * pattern.size() + 32);
  ExpandedReportPath expanded =
      ExpandReportPath(pattern.c_str(), values, glob_pattern.data(), glob_pattern.size());
  if (expanded.length >= glob_pattern.size()) {
    glob_pattern.resize(expanded.length + 1);
    ExpandReportPath(pattern.c_str(), values, glob_pattern.data(), glob_pattern.size());
  }
  glob_t found = {};
  std::string newest;
  if (glob(glob_pattern.data(), 0, nullptr, &found) == 0) {
    struct timespec best = {0, 0};
    for (size_t i = 0; i < found.gl_pathc; ++i) {
      struct stat info;
      if (stat(found.gl_pathv[i], &info) != 0) continue;
      if (newest.empty() || info.st_mtim.tv_sec > best.tv_sec ||
          (info.st_mtim.tv_sec == best.tv_sec && info.st_mtim.tv_nsec > best.tv_nsec)) {
        newest = found.gl_pathv[i];
        best = info.st_mtim;
      }
    }
  }
  globfree(&found);
  return newest;
}

}  // namespace report
}  // namespace poolscope
