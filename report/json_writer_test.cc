// File: report/json_writer_test.cc
#include "report/json_writer.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace poolscope {
namespace report {
namespace {

// A buffer of a few bytes, so that pieces fit, fill it exactly and overflow it.
class StringSink : public JsonSink {
 public:
  StringSink() { SetBuffer(buf_, sizeof buf_); }
  const std::string& out() {
    Flush();
    return out_;
  }

 private:
  void Write(const char* s, size_t n) override { out_.append(s, n); }
  char buf_[7];
  std::string out_;
};

TEST(JsonWriterTest, NestedDocumentParsesBack) {
  StringSink sink;
  JsonWriter w(&sink);
  w.BeginObject();
  w.FieldStr("schema", "poolscope.report/1");
  w.Field("big", 18446744073709551615ull);
  w.FieldInt("neg", -42);
  w.Key("empty_obj");
  w.BeginObject();
  w.EndObject();
  w.Key("list");
  w.BeginArray();
  w.UInt(1);
  w.Null();
  w.Bool(true);
  w.Double(0.25);
  w.BeginObject();
  w.FieldBool("x", false);
  w.EndObject();
  w.EndArray();
  w.Key("empty_list");
  w.BeginArray();
  w.EndArray();
  w.EndObject();
  EXPECT_TRUE(w.complete());
  auto j = nlohmann::json::parse(sink.out());
  EXPECT_EQ(j["schema"], "poolscope.report/1");
  EXPECT_EQ(j["big"].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(j["neg"], -42);
  EXPECT_TRUE(j["empty_obj"].is_object() && j["empty_obj"].empty());
  EXPECT_EQ(j["list"].size(), 5u);
  EXPECT_TRUE(j["list"][1].is_null());
  EXPECT_DOUBLE_EQ(j["list"][3].get<double>(), 0.25);
  EXPECT_EQ(j["list"][4]["x"], false);
  EXPECT_TRUE(j["empty_list"].is_array() && j["empty_list"].empty());
}

TEST(JsonWriterTest, EscapesStrings) {
  StringSink sink;
  JsonWriter w(&sink);
  std::string nasty = std::string("quote\" back\\ nl\n tab\t ctl\x01 del\x7f") + '\0' + "after";
  w.BeginArray();
  w.String(nasty.data(), nasty.size());
  w.String("/usr/lib/libstdc++.so.6");
  w.EndArray();
  auto j = nlohmann::json::parse(sink.out());
  EXPECT_EQ(j[0].get<std::string>(), nasty);
  EXPECT_EQ(j[1], "/usr/lib/libstdc++.so.6");
}

// Every byte value at every position of strings longer than a word, against escaping done a byte at a
// time: the writer tests eight bytes at once before it looks at any one.
TEST(JsonWriterTest, EscapesEachByteWhereverItLies) {
  auto reference = [](const std::string& in) {
    std::string out = "\"";
    for (unsigned char c : in) {
      if (c == '"') {
        out += "\\\"";
      } else if (c == '\\') {
        out += "\\\\";
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c < 0x20 || c == 0x7f) {
        char esc[8];
        snprintf(esc, sizeof esc, "\\u%04x", c);
        out += esc;
      } else {
        out += static_cast<char>(c);
      }
    }
    return out + "\"";
  };
  for (size_t len : {size_t{7}, size_t{8}, size_t{9}, size_t{17}, size_t{24}}) {
    for (size_t at = 0; at < len; ++at) {
      for (int b = 0; b < 256; ++b) {
        std::string in(len, 'a');
        in[at] = static_cast<char>(b);
        StringSink sink;
        JsonWriter w(&sink);
        w.String(in.data(), in.size());
        ASSERT_EQ(sink.out(), reference(in)) << "byte " << b << " at " << at << " of " << len;
      }
    }
  }
}

// An inline object and what it holds on one line, the rest of the document as before.
TEST(JsonWriterTest, InlineObjectsAreWrittenOnOneLine) {
  StringSink sink;
  JsonWriter w(&sink);
  w.BeginObject();
  w.Key("stack");
  w.BeginArray();
  for (int i = 0; i < 2; ++i) {
    w.BeginInlineObject();
    w.FieldHex("pc", 0x1000 + i);
    w.FieldStr("function", "f\n");
    w.Key("inner");
    w.BeginArray();
    w.Int(i);
    w.BeginObject();  // inside an inline object: on its line too
    w.FieldInt("k", 1);
    w.EndObject();
    w.EndArray();
    w.Key("empty");
    w.BeginObject();
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.FieldInt("after", 3);
  w.EndObject();
  ASSERT_TRUE(w.complete());
  const std::string& out = sink.out();
  EXPECT_EQ(out,
            "{\n"
            "  \"stack\": [\n"
            "    {\"pc\": \"0x1000\", \"function\": \"f\\n\", \"inner\": [0, {\"k\": 1}], \"empty\": {}},\n"
            "    {\"pc\": \"0x1001\", \"function\": \"f\\n\", \"inner\": [1, {\"k\": 1}], \"empty\": {}}\n"
            "  ],\n"
            "  \"after\": 3\n"
            "}\n");
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["stack"][1]["inner"][1]["k"], 1);
  EXPECT_EQ(j["after"], 3);
}

TEST(JsonWriterTest, HexStringsAsPrintfWritesThem) {
  const uint64_t values[] = {0, 1, 9, 10, 15, 16, 0xabcdef, 0x7f0012345678, 0xffffffffffffffffull,
                             0x8000000000000000ull};
  StringSink sink;
  JsonWriter w(&sink);
  w.BeginArray();
  for (uint64_t v : values) w.HexString(v);
  w.EndArray();
  const auto j = nlohmann::json::parse(sink.out());
  ASSERT_EQ(j.size(), sizeof values / sizeof values[0]);
  for (size_t i = 0; i < j.size(); ++i) {
    char want[32];
    snprintf(want, sizeof want, "0x%llx", static_cast<unsigned long long>(values[i]));
    EXPECT_EQ(j[i].get<std::string>(), want);
  }
}

TEST(JsonWriterTest, NonFiniteDoublesBecomeNull) {
  StringSink sink;
  JsonWriter w(&sink);
  w.BeginArray();
  w.Double(1.0 / 0.0);
  w.EndArray();
  EXPECT_TRUE(nlohmann::json::parse(sink.out())[0].is_null());
}

TEST(JsonWriterTest, FieldOrNullWritesTheValueOnlyWhenKnown) {
  StringSink sink;
  JsonWriter w(&sink);
  w.BeginObject();
  w.FieldIntOrNull("known", true, -7);
  w.FieldIntOrNull("zero", true, 0);
  w.FieldIntOrNull("unknown", false, 12);
  w.FieldUIntOrNull("big", true, 18446744073709551615ull);
  w.FieldUIntOrNull("unset", false, 3);
  w.EndObject();
  ASSERT_TRUE(w.complete());
  auto j = nlohmann::json::parse(sink.out());
  EXPECT_EQ(j["known"], -7);
  EXPECT_EQ(j["zero"], 0);
  EXPECT_TRUE(j["unknown"].is_null());
  EXPECT_EQ(j["big"].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_TRUE(j["unset"].is_null());
  EXPECT_EQ(j.size(), 5u);
}

// The text whatever the sink's buffer: none, a few bytes, more than the document.
TEST(JsonWriterTest, TheSameTextThroughAnyBuffer) {
  struct Sink : JsonSink {
    explicit Sink(size_t cap) : buf(cap) { SetBuffer(buf.empty() ? nullptr : buf.data(), buf.size()); }
    void Write(const char* s, size_t n) override { out.append(s, n); }
    std::vector<char> buf;
    std::string out;
  };
  std::string want;
  for (size_t cap : {0, 1, 2, 3, 5, 16, 64, 4096}) {
    Sink sink(cap);
    JsonWriter w(&sink);
    w.BeginObject();
    w.FieldStr("path", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
    w.FieldStr("escaped", "a\"b\\c\nd\x01" "e\x7f");
    w.FieldInt("min", INT64_MIN);
    w.FieldInt("max", INT64_MAX);
    w.FieldInt("zero", 0);
    w.Field("umax", UINT64_MAX);
    w.Key("list");
    w.BeginArray();
    for (int i = 0; i < 40; ++i) w.Int(i * 37 - 500);
    w.EndArray();
    w.EndObject();
    sink.Flush();
    if (want.empty()) want = sink.out;
    EXPECT_EQ(sink.out, want) << cap;
  }
  auto j = nlohmann::json::parse(want);
  EXPECT_EQ(j["path"], "/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
  EXPECT_EQ(j["escaped"], "a\"b\\c\nd\x01" "e\x7f");
  EXPECT_EQ(j["min"].get<int64_t>(), INT64_MIN);
  EXPECT_EQ(j["max"].get<int64_t>(), INT64_MAX);
  EXPECT_EQ(j["zero"], 0);
  EXPECT_EQ(j["umax"].get<uint64_t>(), UINT64_MAX);
  ASSERT_EQ(j["list"].size(), 40u);
  EXPECT_EQ(j["list"][39], 39 * 37 - 500);
  EXPECT_NE(want.find("\\u0001"), std::string::npos);
  EXPECT_NE(want.find("\\u007f"), std::string::npos);
}

TEST(JsonWriterTest, IncompleteDocumentIsReported) {
  StringSink sink;
  JsonWriter w(&sink);
  w.BeginObject();
  w.Key("a");
  w.BeginArray();
  EXPECT_FALSE(w.complete());
}

}  // namespace
}  // namespace report
}  // namespace poolscope
