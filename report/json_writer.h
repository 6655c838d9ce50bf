// File: report/json_writer.h
//
// A streaming JSON writer that never allocates: it appends to a JsonSink, which the preload library backs
// with a buffer of mmap'd memory and a file (so a report can be written from a process's exit path
// without touching malloc) and tests with a std::string. Output is indented two spaces per level, one member per line.
//
// Thread-safety: a writer is used by one thread at a time.
#ifndef POOLSCOPE_REPORT_JSON_WRITER_H_
#define POOLSCOPE_REPORT_JSON_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace poolscope {
namespace report {

// Where a writer's text goes: a buffer the sink provides, handed to Write each time it fills and at
// Flush. Append is inline, so the writer's many small pieces (a quote, a comma, an indent) cost a
// copy each and no call.
class JsonSink {
 public:
  virtual ~JsonSink() = default;
  void Append(const char* s, size_t n) {
    if (n <= cap_ - len_) {
      memcpy(buf_ + len_, s, n);
      len_ += n;
    } else {
      AppendSlow(s, n);
    }
  }
  // Hands what the buffer holds to Write: the text so far has all reached it.
  void Flush();

 protected:
  JsonSink() = default;
  // The buffer: `cap` bytes at `buf` (0: each piece goes to Write as it comes).
  void SetBuffer(char* buf, size_t cap) {
    buf_ = buf;
    cap_ = buf != nullptr ? cap : 0;
    len_ = 0;
  }
  // Takes the next `n` bytes of the text.
  virtual void Write(const char* s, size_t n) = 0;

 private:
  void AppendSlow(const char* s, size_t n);
  char* buf_ = nullptr;
  size_t cap_ = 0;
  size_t len_ = 0;
};

class JsonWriter {
 public:
  explicit JsonWriter(JsonSink* sink) : sink_(sink) {}

  void BeginObject() { Open('{'); }
  // An object written on one line, with whatever it holds (a stack's frame): ended by EndObject.
  void BeginInlineObject() {
    Open('{');
    if (inline_depth_ == 0) inline_depth_ = depth_;
  }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }
  // The key of the next value inside an object.
  void Key(const char* k);

  void String(const char* s);
  void String(const char* s, size_t n);
  void Int(int64_t v);
  void UInt(uint64_t v);
  void Double(double v);  // finite values; NaN and infinities become null
  void Bool(bool v);
  void Null();
  // v as a string of "0x" and lower-case hex digits, as printf's "0x%llx" writes it.
  void HexString(uint64_t v);
  // A value already written, on one line (an inline object's text, as a JsonWriter writes it).
  void Verbatim(const char* json, size_t n) {
    BeforeValue();
    Raw(json, n);
  }

  // Key + value in one call.
  void Field(const char* k, uint64_t v) { Key(k), UInt(v); }
  void FieldInt(const char* k, int64_t v) { Key(k), Int(v); }
  void FieldStr(const char* k, const char* v) { Key(k), String(v); }
  void FieldBool(const char* k, bool v) { Key(k), Bool(v); }
  void FieldStr(const char* k, std::string_view v) { Key(k), String(v.data(), v.size()); }
  void FieldHex(const char* k, uint64_t v) { Key(k), HexString(v); }
  // Key + value when `known`, else Key + null (a figure the report cannot give).
  void FieldIntOrNull(const char* k, bool known, int64_t v) {
    Key(k);
    known ? Int(v) : Null();
  }
  void FieldUIntOrNull(const char* k, bool known, uint64_t v) {
    Key(k);
    known ? UInt(v) : Null();
  }
  void FieldStrOrNull(const char* k, bool known, const char* v) {
    Key(k);
    known ? String(v) : Null();
  }

  // True when every object and array opened was closed.
  bool complete() const { return depth_ == 0 && wrote_any_; }

 private:
  static constexpr int kMaxDepth = 32;
  void Open(char c);
  void Close(char c);
  void BeforeValue();
  void Newline();
  void Quoted(const char* s, size_t n);
  void Raw(const char* s, size_t n) { sink_->Append(s, n); }

  JsonSink* sink_;
  int depth_ = 0;
  bool first_[kMaxDepth + 1] = {true};
  bool after_key_ = false;
  int inline_depth_ = 0;  // the depth of the outermost container written on one line (0: none)
  bool wrote_any_ = false;
};

}  // namespace report
}  // namespace poolscope

#endif  // POOLSCOPE_REPORT_JSON_WRITER_H_
