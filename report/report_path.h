// File: report/report_path.h
//
// The report path template (the `report=` option, docs/cli.md): the one expansion used by the
// preload library, which writes the report, and by `poolscope run`, which reads it back.
//
//   %p   the process id
//   %e   the executable's base name
//   %t   the start time, whole seconds since the epoch
//   %%   one '%'
// Any other '%' (an unknown conversion, a trailing '%') is copied as it is.
//
// Never allocates and calls nothing that does: safe inside the preload library, on its exit path.
//
// Thread-safety: pure functions of their arguments.
#ifndef POOLSCOPE_REPORT_REPORT_PATH_H_
#define POOLSCOPE_REPORT_REPORT_PATH_H_

#include <cstddef>
#include <cstdint>

namespace poolscope {
namespace report {

// What the conversions become.
struct ReportPathValues {
  const char* dir = "";  // prefixed, with a '/', to a relative template; "" prefixes nothing
  int pid = 0;           // %p
  const char* exe = "";  // %e, copied as it is (the caller takes the base name)
  const char* start = "";  // %t, copied as it is
  // True: the result is a glob(3) pattern. The template's own characters * ? [ \ are escaped with
  // a backslash; the values above are not, so "*" as a value matches any name.
  bool glob = false;
};

struct ExpandedReportPath {
  size_t length = 0;     // the whole result's length, without the NUL, whether or not it fitted
  bool has_pid = false;  // the template has a %p
};

// Writes the expansion of `pattern` into out[0..cap), always NUL-terminated when cap > 0, cut short
// when it does not fit. It fitted when the returned length < cap.
ExpandedReportPath ExpandReportPath(const char* pattern, const ReportPathValues& values, char* out,
                                    size_t cap);

// Decimal text of v into out (at least 21 bytes); returns out.
char* FormatDecimal(uint64_t v, char* out);

}  // namespace report
}  // namespace poolscope

#endif  // POOLSCOPE_REPORT_REPORT_PATH_H_
