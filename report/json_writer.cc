// File: report/json_writer.cc
//
// See json_writer.h.
#include "report/json_writer.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace poolscope {
namespace report {

void JsonWriter::Newline() {
  static const char kSpaces[] = "                                                                ";
  Raw("\n", 1);
  size_t n = static_cast<size_t>(depth_) * 2;
  while (n > 0) {
    size_t k = n < sizeof kSpaces - 1 ? n : sizeof kSpaces - 1;
    Raw(kSpaces, k);
    n -= k;
  }
}

void JsonWriter::BeforeValue() {
  wrote_any_ = true;
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (depth_ > 0) {
    if (!first_[depth_]) Raw(",", 1);
    first_[depth_] = false;
    Newline();
  }
}

void JsonWriter::Open(char c) {
  BeforeValue();
  Raw(&c, 1);
  if (depth_ < kMaxDepth) ++depth_;
  first_[depth_] = true;
}

void JsonWriter::Close(char c) {
  bool empty = first_[depth_];
  if (depth_ > 0) --depth_;
  if (!empty) Newline();
  Raw(&c, 1);
  if (depth_ == 0) Raw("\n", 1);
}

void JsonWriter::Key(const char* k) {
  BeforeValue();
  Quoted(k, strlen(k));
  Raw(": ", 2);
  after_key_ = true;
}

void JsonWriter::String(const char* s) { String(s, s != nullptr ? strlen(s) : 0); }

void JsonWriter::String(const char* s, size_t n) {
  BeforeValue();
  Quoted(s, n);
}

void JsonWriter::Quoted(const char* s, size_t n) {
  Raw("\"", 1);
  const char* run = s;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    const char* esc = nullptr;
    char buf[8];
    switch (c) {
      case '"': esc = "\\\""; break;
      case '\\': esc = "\\\\"; break;
      case '\n': esc = "\\n"; break;
      case '\r': esc = "\\r"; break;
      case '\t': esc = "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          snprintf(buf, sizeof buf, "\\u%04x", c);
          esc = buf;
        }
    }
    if (esc != nullptr) {
      Raw(run, static_cast<size_t>(s + i - run));
      Raw(esc, strlen(esc));
      run = s + i + 1;
    }
  }
  Raw(run, static_cast<size_t>(s + n - run));
  Raw("\"", 1);
}

void JsonWriter::Int(int64_t v) {
  BeforeValue();
  char buf[24];
  int n = snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  Raw(buf, static_cast<size_t>(n));
}

void JsonWriter::UInt(uint64_t v) {
  BeforeValue();
  char buf[24];
  int n = snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v));
  Raw(buf, static_cast<size_t>(n));
}

void JsonWriter::Double(double v) {
  if (!std::isfinite(v)) return Null();
  BeforeValue();
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%.6g", v);
  Raw(buf, static_cast<size_t>(n));
}

void JsonWriter::Bool(bool v) {
  BeforeValue();
  if (v) {
    Raw("true", 4);
  } else {
    Raw("false", 5);
  }
}

void JsonWriter::Null() {
  BeforeValue();
  Raw("null", 4);
}

}  // namespace report
}  // namespace poolscope
