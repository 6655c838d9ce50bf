// File: report/report_path.cc
//
// See report_path.h.
#include "report/report_path.h"

namespace poolscope {
namespace report {

namespace {

// Appends to out[0..cap) while there is room for the NUL; counts every byte either way.
class Appender {
 public:
  Appender(char* out, size_t cap) : out_(out), cap_(cap) {}
  void Put(char c) {
    if (cap_ != 0 && n_ + 1 < cap_) out_[n_] = c;
    ++n_;
  }
  void Put(const char* s) {
    for (; *s != '\0'; ++s) Put(*s);
  }
  size_t Finish() {
    if (cap_ != 0) out_[n_ < cap_ ? n_ : cap_ - 1] = '\0';
    return n_;
  }

 private:
  char* out_;
  size_t cap_;
  size_t n_ = 0;
};

bool IsGlobSpecial(char c) { return c == '*' || c == '?' || c == '[' || c == '\\'; }

}  // namespace

char* FormatDecimal(uint64_t v, char* out) {
  char reversed[21];
  int n = 0;
  do {
    reversed[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (int i = 0; i < n; ++i) out[i] = reversed[n - 1 - i];
  out[n] = '\0';
  return out;
}

ExpandedReportPath ExpandReportPath(const char* pattern, const ReportPathValues& values, char* out,
                                    size_t cap) {
  Appender a(out, cap);
  ExpandedReportPath result;
  auto literal = [&](char c) {
    if (values.glob && IsGlobSpecial(c)) a.Put('\\');
    a.Put(c);
  };
  if (pattern[0] != '/' && values.dir[0] != '\0') {
    for (const char* d = values.dir; *d != '\0'; ++d) literal(*d);
    literal('/');
  }
  char num[24];
  for (const char* c = pattern; *c != '\0'; ++c) {
    if (c[0] != '%' || c[1] == '\0') {
      literal(c[0]);
      continue;
    }
    switch (c[1]) {
      case 'p':
        if (values.pid < 0) a.Put('-');
        a.Put(FormatDecimal(values.pid < 0 ? 0 - static_cast<uint64_t>(values.pid)
                                           : static_cast<uint64_t>(values.pid),
                            num));
        result.has_pid = true;
        break;
      case 'e':
        a.Put(values.exe);
        break;
      case 't':
        a.Put(values.start);
        break;
      case '%':
        literal('%');
        break;
      default:
        literal('%');
        literal(c[1]);
        break;
    }
    ++c;
  }
  result.length = a.Finish();
  return result;
}

}  // namespace report
}  // namespace poolscope
