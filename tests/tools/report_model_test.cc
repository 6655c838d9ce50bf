// File: tests/tools/report_model_test.cc
//
// LoadReport against the recorded reports in tests/testdata: a good report loads, and each kind of
// bad file (missing, empty, truncated, not JSON, another schema, a field of the wrong type) is
// refused with its own one-sentence problem. Also the null-tolerant accessors.
#include "report/report_model.h"

#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace poolscope::report {
namespace {

std::string Data(const std::string& name) { return "tests/testdata/" + name; }

std::string ProblemOf(const std::string& name) {
  absl::StatusOr<Report> report = LoadReport(Data(name));
  EXPECT_FALSE(report.ok()) << name;
  return std::string(report.status().message());
}

// The problem ValidateReport finds in `doc`, "" when there is none.
std::string ValidationProblem(const nlohmann::json& doc) {
  return std::string(ValidateReport(doc).message());
}

TEST(LoadReportTest, LoadsRecordedReport) {
  absl::StatusOr<Report> loaded = LoadReport(Data("report_on.json"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Report& report = *loaded;
  EXPECT_EQ(report.path, Data("report_on.json"));
  EXPECT_EQ(Count(report.doc, "logical.allocs"), 1606);
  EXPECT_EQ(Count(report.doc, "reconciliation.detector_view.program_leak_blocks"), 2);
  EXPECT_EQ(String(report.doc, "process.reason"), "exit");
  EXPECT_EQ(Bool(report.doc, "pool.enabled"), true);
  ASSERT_TRUE(WallSeconds(report.doc).has_value());
  EXPECT_DOUBLE_EQ(*WallSeconds(report.doc), 0.25);
}

TEST(LoadReportTest, MinimalReportLoadsWithUnknownFields) {
  absl::StatusOr<Report> loaded = LoadReport(Data("minimal.json"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Report& report = *loaded;
  EXPECT_EQ(Count(report.doc, "logical.frees"), std::nullopt);  // null in the file
  EXPECT_EQ(Count(report.doc, "pool.hits"), std::nullopt);      // absent
  EXPECT_EQ(WallSeconds(report.doc), std::nullopt);
}

TEST(LoadReportTest, MissingFile) { EXPECT_EQ(ProblemOf("no_such_report.json"), "no such file"); }

TEST(LoadReportTest, Directory) {
  absl::StatusOr<Report> report = LoadReport("tests/testdata");
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(report.status().message(), "is a directory, not a report file");
}

TEST(LoadReportTest, EmptyFile) {
  EXPECT_EQ(ProblemOf("empty.json").rfind("empty file", 0), 0u);
}

TEST(LoadReportTest, TruncatedFile) {
  EXPECT_EQ(ProblemOf("truncated.json"),
            "truncated JSON (the document ends early, at byte 1500)");
}

TEST(LoadReportTest, NotJson) {
  EXPECT_EQ(ProblemOf("not_json.json").rfind("not JSON (syntax error at byte ", 0), 0u);
}

TEST(LoadReportTest, OtherSchema) {
  EXPECT_EQ(ProblemOf("other_schema.json"),
            "unsupported schema \"poolscope.report/2\" (this poolscope reads "
            "\"poolscope.report/1\")");
}

TEST(LoadReportTest, WrongFieldType) {
  EXPECT_EQ(ProblemOf("wrong_type.json"),
            "invalid report: field \"logical.allocs\" is string, expected a number");
}

TEST(ValidateReportTest, RejectsNonObjectsAndMissingFields) {
  EXPECT_EQ(ValidationProblem(nlohmann::json::array()),
            "not a poolscope report (the JSON is array, not an object)");
  EXPECT_EQ(ValidationProblem(nlohmann::json{{"x", 1}})
                .rfind("not a poolscope report (no \"schema\" field", 0),
            0u);
  nlohmann::json doc = {{"schema", "poolscope.report/1"}, {"process", nlohmann::json::object()}};
  EXPECT_EQ(ValidationProblem(doc), "invalid report: field \"logical\" is missing");
  doc = nlohmann::json::parse(R"({"schema": "poolscope.report/1", "process": {}, "logical":
      {"allocs": 1, "frees": 1}, "real": {"allocs": 1, "frees": 1}, "pool": {},
      "reconciliation": {}, "leaks": {"not": "an array"}})");
  EXPECT_EQ(ValidationProblem(doc), "invalid report: field \"leaks\" is object, expected an array");
}

TEST(AccessorTest, NeverThrowOnOddShapes) {
  nlohmann::json doc = nlohmann::json::parse(R"({"a": {"b": 2.6, "s": "x", "n": null}, "c": [1]})");
  EXPECT_EQ(Count(doc, "a.b"), 3);
  EXPECT_EQ(Count(doc, "a.s"), std::nullopt);
  EXPECT_EQ(Count(doc, "a.n"), std::nullopt);
  EXPECT_EQ(Count(doc, "c.d"), std::nullopt);
  EXPECT_EQ(String(doc, "a.b"), std::nullopt);
  EXPECT_EQ(Find(doc, "a.b.c"), nullptr);
}

}  // namespace
}  // namespace poolscope::report
