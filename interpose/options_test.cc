// File: interpose/options_test.cc
#include "interpose/options.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace poolscope {
namespace {

struct Collected {
  std::vector<std::string> lines;
};

void Collect(void* ctx, const char* line) { static_cast<Collected*>(ctx)->lines.push_back(line); }

TEST(OptionsTest, DefaultsMatchTheSpec) {
  Options o;
  Collected c;
  EXPECT_EQ(ParseOptions(nullptr, &o, Collect, &c), 0);
  EXPECT_EQ(o.pool, 1);
  EXPECT_EQ(o.pool_size, 64);
  EXPECT_EQ(o.pools, 4);
  EXPECT_EQ(o.tag, TagMode::kSmall);
  EXPECT_EQ(o.malloc_align, 16);
  EXPECT_EQ(o.track, 1);
  EXPECT_EQ(o.stack_depth, 16);
  EXPECT_STREQ(o.report, "poolscope.%e.%p.json");
  EXPECT_EQ(o.valgrind, 1);
  EXPECT_TRUE(o.pooling());
}

TEST(OptionsTest, ParsesEveryKey) {
  Options o;
  Collected c;
  const char* text =
      "pool=0:pool_size=128:pools=8:tag=caller:*libjvm.so,*libfoo.so*:malloc_align=8:track=0:"
      "stack_depth=4:report=/tmp/x.%p.json:drain_at_exit=1:snapshot_interval=5:quiet=1:"
      "leak_exitcode=23:valgrind=0:help=1";
  EXPECT_EQ(ParseOptions(text, &o, Collect, &c), 0) << (c.lines.empty() ? "" : c.lines[0]);
  EXPECT_EQ(o.pool, 0);
  EXPECT_EQ(o.pool_size, 128);
  EXPECT_EQ(o.pools, 8);
  EXPECT_EQ(o.tag, TagMode::kCaller);
  EXPECT_STREQ(o.tag_globs, "*libjvm.so,*libfoo.so*");
  EXPECT_EQ(o.malloc_align, 8);
  EXPECT_EQ(o.track, 0);
  EXPECT_EQ(o.stack_depth, 4);
  EXPECT_STREQ(o.report, "/tmp/x.%p.json");
  EXPECT_EQ(o.drain_at_exit, 1);
  EXPECT_EQ(o.snapshot_interval, 5);
  EXPECT_EQ(o.quiet, 1);
  EXPECT_EQ(o.leak_exitcode, 23);
  EXPECT_EQ(o.valgrind, 0);
  EXPECT_EQ(o.help, 1);
  EXPECT_FALSE(o.pooling());
}

TEST(OptionsTest, NegativePoolSizeTurnsPoolingOff) {
  Options o;
  EXPECT_EQ(ParseOptions("pool_size=-1", &o, nullptr, nullptr), 0);
  EXPECT_EQ(o.pool_size, -1);
  EXPECT_FALSE(o.pooling());
}

TEST(OptionsTest, BadValuesWarnOnceEachAndKeepDefaults) {
  struct Case {
    const char* text;
    const char* key;
  } cases[] = {
      {"pool_size=abc", "pool_size"}, {"pool_size=7", "pool_size"},     {"pool_size=1048577", "pool_size"},
      {"pools=9", "pools"},           {"pools=-1", "pools"},            {"pool=2", "pool"},
      {"tag=sometimes", "tag"},       {"tag=caller:", "tag"},           {"malloc_align=4", "malloc_align"},
      {"stack_depth=65", "stack_depth"}, {"leak_exitcode=256", "leak_exitcode"},
      {"snapshot_interval=1s", "snapshot_interval"}, {"report=", "report"},
  };
  for (const Case& k : cases) {
    Options o;
    Collected c;
    EXPECT_EQ(ParseOptions(k.text, &o, Collect, &c), 1) << k.text;
    ASSERT_EQ(c.lines.size(), 1u) << k.text;
    EXPECT_NE(c.lines[0].find(k.key), std::string::npos) << c.lines[0];
    EXPECT_EQ(c.lines[0].find('\n'), std::string::npos);
    Options d;
    EXPECT_EQ(o.pool_size, d.pool_size) << k.text;
    EXPECT_EQ(o.pools, d.pools) << k.text;
    EXPECT_EQ(o.tag, d.tag) << k.text;
    EXPECT_STREQ(o.report, d.report) << k.text;
  }
}

TEST(OptionsTest, UnknownKeysAndMissingValuesWarnAndTheRestStillApplies) {
  Options o;
  Collected c;
  EXPECT_EQ(ParseOptions("frobnicate=1:pools=2:novalue:pool_size=32", &o, Collect, &c), 2);
  ASSERT_EQ(c.lines.size(), 2u);
  EXPECT_NE(c.lines[0].find("frobnicate"), std::string::npos);
  EXPECT_NE(c.lines[1].find("novalue"), std::string::npos);
  EXPECT_EQ(o.pools, 2);
  EXPECT_EQ(o.pool_size, 32);
}

TEST(OptionsTest, HugeInputDoesNotOverflow) {
  std::string big = "report=" + std::string(5000, 'x') + ":pools=3";
  Options o;
  Collected c;
  EXPECT_EQ(ParseOptions(big.c_str(), &o, Collect, &c), 1);
  EXPECT_EQ(o.pools, 3);
  EXPECT_STREQ(o.report, Options().report);
}

TEST(OptionsTest, DescribeListsEveryKey) {
  Options o;
  Collected c;
  DescribeOptions(o, Collect, &c);
  std::string all;
  for (auto& l : c.lines) all += l + "\n";
  for (const char* key : {"pool=", "pool_size=", "pools=", "tag=", "malloc_align=", "track=", "stack_depth=",
                          "report=", "drain_at_exit=", "snapshot_interval=", "quiet=", "leak_exitcode=",
                          "valgrind=", "help="}) {
    EXPECT_NE(all.find(std::string(" ") + key), std::string::npos) << key;
  }
}

}  // namespace
}  // namespace poolscope
