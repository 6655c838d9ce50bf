// File: report/json_writer_test.cc
#include "report/json_writer.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace poolscope {
namespace report {
namespace {

class StringSink : public JsonSink {
 public:
  void Append(const char* s, size_t n) override { out.append(s, n); }
  std::string out;
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
  auto j = nlohmann::json::parse(sink.out);
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
  auto j = nlohmann::json::parse(sink.out);
  EXPECT_EQ(j[0].get<std::string>(), nasty);
  EXPECT_EQ(j[1], "/usr/lib/libstdc++.so.6");
}

TEST(JsonWriterTest, NonFiniteDoublesBecomeNull) {
  StringSink sink;
  JsonWriter w(&sink);
  w.BeginArray();
  w.Double(1.0 / 0.0);
  w.EndArray();
  EXPECT_TRUE(nlohmann::json::parse(sink.out)[0].is_null());
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
  auto j = nlohmann::json::parse(sink.out);
  EXPECT_EQ(j["known"], -7);
  EXPECT_EQ(j["zero"], 0);
  EXPECT_TRUE(j["unknown"].is_null());
  EXPECT_EQ(j["big"].get<uint64_t>(), 18446744073709551615ull);
  EXPECT_TRUE(j["unset"].is_null());
  EXPECT_EQ(j.size(), 5u);
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
