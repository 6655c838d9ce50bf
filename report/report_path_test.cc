// File: report/report_path_test.cc
#include "report/report_path.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "report/find_report.h"

namespace poolscope {
namespace report {
namespace {

ReportPathValues Process() {
  ReportPathValues v;
  v.dir = "/home/u";
  v.pid = 4242;
  v.exe = "python3.11";
  v.start = "1700000000";
  return v;
}

std::string Expand(const char* pattern, const ReportPathValues& v, bool* has_pid = nullptr) {
  char out[256];
  ExpandedReportPath r = ExpandReportPath(pattern, v, out, sizeof out);
  EXPECT_LT(r.length, sizeof out);
  EXPECT_EQ(r.length, strlen(out));
  if (has_pid != nullptr) *has_pid = r.has_pid;
  return out;
}

TEST(ReportPathTest, ConversionsBecomeTheirValues) {
  bool has_pid = false;
  EXPECT_EQ(Expand("/tmp/r.%p.%e.%t.json", Process(), &has_pid),
            "/tmp/r.4242.python3.11.1700000000.json");
  EXPECT_TRUE(has_pid);
  EXPECT_EQ(Expand("/tmp/%p-%p", Process()), "/tmp/4242-4242");
}

TEST(ReportPathTest, PercentPercentIsOnePercent) {
  bool has_pid = true;
  EXPECT_EQ(Expand("/tmp/100%%.json", Process(), &has_pid), "/tmp/100%.json");
  EXPECT_FALSE(has_pid);
  // %%p is a '%' and then a 'p', not the pid.
  EXPECT_EQ(Expand("/tmp/r%%p", Process(), &has_pid), "/tmp/r%p");
  EXPECT_FALSE(has_pid);
  EXPECT_EQ(Expand("/tmp/r%%%p", Process(), &has_pid), "/tmp/r%4242");
  EXPECT_TRUE(has_pid);
  EXPECT_EQ(Expand("/tmp/%%%%", Process()), "/tmp/%%");
}

TEST(ReportPathTest, OtherPercentsAreCopied) {
  bool has_pid = true;
  EXPECT_EQ(Expand("/tmp/a%xb%", Process(), &has_pid), "/tmp/a%xb%");
  EXPECT_FALSE(has_pid);
}

TEST(ReportPathTest, RelativeTemplateGoesUnderDir) {
  EXPECT_EQ(Expand("r.%p.json", Process()), "/home/u/r.4242.json");
  ReportPathValues no_dir = Process();
  no_dir.dir = "";
  EXPECT_EQ(Expand("r.%p.json", no_dir), "r.4242.json");
  EXPECT_EQ(Expand("/abs/r.json", Process()), "/abs/r.json");
}

TEST(ReportPathTest, GlobEscapesTheTemplateButNotTheValues) {
  ReportPathValues v = Process();
  v.dir = "/d[1]";
  v.exe = "*";
  v.start = "*";
  v.glob = true;
  EXPECT_EQ(Expand("r?.%e.%t.%p*\\%%.json", v), "/d\\[1]/r\\?.*.*.4242\\*\\\\%.json");
  v.glob = false;
  EXPECT_EQ(Expand("r?.%p*", v), "/d[1]/r?.4242*");
}

TEST(ReportPathTest, TooSmallABufferIsCutShortAndSaysSo) {
  const std::string whole = Expand("/tmp/r.%p.%e.json", Process());
  for (size_t cap = 1; cap <= whole.size(); ++cap) {
    char out[64];
    memset(out, 'X', sizeof out);
    ExpandedReportPath r = ExpandReportPath("/tmp/r.%p.%e.json", Process(), out, cap);
    EXPECT_EQ(r.length, whole.size()) << cap;
    EXPECT_EQ(std::string(out), whole.substr(0, cap - 1)) << cap;
    EXPECT_EQ(out[cap], 'X') << cap;  // nothing written past cap
  }
  ExpandedReportPath r = ExpandReportPath("/tmp/r.%p", Process(), nullptr, 0);
  EXPECT_EQ(r.length, strlen("/tmp/r.4242"));
}

TEST(ReportPathTest, FormatDecimal) {
  char out[24];
  EXPECT_STREQ(FormatDecimal(0, out), "0");
  EXPECT_STREQ(FormatDecimal(907, out), "907");
  EXPECT_STREQ(FormatDecimal(18446744073709551615ull, out), "18446744073709551615");
}

class FindReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = getenv("TEST_TMPDIR");
    std::string base = std::string(tmp != nullptr ? tmp : "/tmp") + "/find_report.XXXXXX";
    ASSERT_NE(mkdtemp(base.data()), nullptr);
    dir_ = base;
  }
  // Creates the file the library writes for `pattern` in a process with these values.
  std::string Write(const std::string& pattern, ReportPathValues v, long mtime_s) {
    char path[512];
    v.dir = "";
    ExpandReportPath(pattern.c_str(), v, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    EXPECT_GE(fd, 0) << path;
    close(fd);
    struct timespec times[2] = {{mtime_s, 0}, {mtime_s, 0}};
    EXPECT_EQ(utimensat(AT_FDCWD, path, times, 0), 0);
    return path;
  }
  std::string dir_;
};

TEST_F(FindReportTest, FindsWhatTheLibraryWrote) {
  const std::string pattern = dir_ + "/r[%%].%e.%t.%p.json";
  ReportPathValues v = Process();
  const std::string written = Write(pattern, v, 1000);
  EXPECT_EQ(written, dir_ + "/r[%].python3.11.1700000000.4242.json");
  EXPECT_EQ(FindReport(pattern, 4242), written);
  EXPECT_EQ(FindReport(pattern, 4243), "");
}

TEST_F(FindReportTest, NewestMatchWins) {
  const std::string pattern = dir_ + "/r.%e.%p.json";
  ReportPathValues v = Process();
  v.exe = "old";
  Write(pattern, v, 1000);
  v.exe = "new";
  const std::string newer = Write(pattern, v, 2000);
  v.exe = "older";
  Write(pattern, v, 500);
  EXPECT_EQ(FindReport(pattern, 4242), newer);
}

TEST_F(FindReportTest, PlainPathIsReturnedAsItIs) {
  EXPECT_EQ(FindReport(dir_ + "/absent.json", 1), dir_ + "/absent.json");
}

}  // namespace
}  // namespace report
}  // namespace poolscope
