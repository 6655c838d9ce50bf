// File: report/json_writer.cc
//
// See json_writer.h.
#include "report/json_writer.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace poolscope {
namespace report {

void JsonSink::Flush() {
  if (len_ == 0) return;
  const size_t n = len_;
  len_ = 0;
  Write(buf_, n);
}

void JsonSink::AppendSlow(const char* s, size_t n) {
  Flush();
  if (n < cap_) {
    memcpy(buf_, s, n);
    len_ = n;
  } else {
    Write(s, n);
  }
}

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
    const bool first = first_[depth_];
    first_[depth_] = false;
    if (inline_depth_ != 0 && depth_ >= inline_depth_) {
      if (!first) Raw(", ", 2);
      return;
    }
    if (!first) Raw(",", 1);
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
  const bool empty = first_[depth_];
  const bool on_one_line = inline_depth_ != 0 && depth_ >= inline_depth_;
  if (depth_ == inline_depth_) inline_depth_ = 0;
  if (depth_ > 0) --depth_;
  if (!empty && !on_one_line) Newline();
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

namespace {

constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;

// Whether any of the 8 bytes in v must be escaped: below 0x20, '"', '\\' or 0x7f. Each test is the
// classic "has a zero byte" on v, or on v with the byte sought xored away; a byte of 0x80 or more
// never passes (its high bit is set in v).
inline bool AnyToEscape(uint64_t v) {
  auto zero_byte = [](uint64_t x) { return (x - kOnes) & ~x & kHighs; };
  const uint64_t below_space = (v - 0x20 * kOnes) & ~v & kHighs;
  return (below_space | zero_byte(v ^ ('"' * kOnes)) | zero_byte(v ^ ('\\' * kOnes)) | zero_byte(v ^ (0x7f * kOnes))) != 0;
}

}  // namespace

void JsonWriter::Quoted(const char* s, size_t n) {
  Raw("\"", 1);
  const char* run = s;
  const char* const end = s + n;
  const char* q = s;
  // Most strings (paths, names) need no escape: eight bytes a test, then the run in one piece.
  for (; end - q >= 8; q += 8) {
    uint64_t v;
    memcpy(&v, q, 8);
    if (AnyToEscape(v)) break;
  }
  for (; q < end; ++q) {
    const unsigned char c = static_cast<unsigned char>(*q);
    if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f) continue;
    Raw(run, static_cast<size_t>(q - run));
    run = q + 1;
    switch (c) {
      case '"': Raw("\\\"", 2); break;
      case '\\': Raw("\\\\", 2); break;
      case '\n': Raw("\\n", 2); break;
      case '\r': Raw("\\r", 2); break;
      case '\t': Raw("\\t", 2); break;
      default: {
        static const char kHex[] = "0123456789abcdef";
        const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        Raw(esc, 6);
      }
    }
  }
  Raw(run, static_cast<size_t>(end - run));
  Raw("\"", 1);
}

namespace {

// Writes the decimal digits of v to end at `end` (20 at most); returns where they start.
char* Digits(uint64_t v, char* end) {
  char* p = end;
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  return p;
}

}  // namespace

void JsonWriter::Int(int64_t v) {
  BeforeValue();
  char buf[24];
  char* const end = buf + sizeof buf;
  // (The magnitude as unsigned: -INT64_MIN does not fit an int64_t.)
  char* p = Digits(v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v), end);
  if (v < 0) *--p = '-';
  Raw(p, static_cast<size_t>(end - p));
}

void JsonWriter::UInt(uint64_t v) {
  BeforeValue();
  char buf[24];
  char* const end = buf + sizeof buf;
  char* const p = Digits(v, end);
  Raw(p, static_cast<size_t>(end - p));
}

void JsonWriter::HexString(uint64_t v) {
  BeforeValue();
  static const char kHex[] = "0123456789abcdef";
  char buf[20];
  char* const end = buf + sizeof buf;
  char* p = end;
  *--p = '"';
  do {
    *--p = kHex[v & 15];
    v >>= 4;
  } while (v != 0);
  *--p = 'x';
  *--p = '0';
  *--p = '"';
  Raw(p, static_cast<size_t>(end - p));
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
