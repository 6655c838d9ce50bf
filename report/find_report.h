// File: report/find_report.h
//
// Finding the report a process wrote, from the `report=` template it was given: used by
// `poolscope run`, which knows the child's pid but not its executable's name or start time.
//
// Thread-safety: reads the file system; no shared state.
#ifndef POOLSCOPE_REPORT_FIND_REPORT_H_
#define POOLSCOPE_REPORT_FIND_REPORT_H_

#include <string>

namespace poolscope {
namespace report {

// The file the preload library wrote for `pattern` (an absolute path) in process `pid`: the template
// expanded as report/report_path.h says, with %p the pid and %e and %t matching any name (the most
// recently modified match wins). A pattern without '%' is returned as it is; "" when nothing matches.
std::string FindReport(const std::string& pattern, int pid);

}  // namespace report
}  // namespace poolscope

#endif  // POOLSCOPE_REPORT_FIND_REPORT_H_
