// File: interpose/caller_tag_test.cc
#include "interpose/caller_tag.h"

#include <dlfcn.h>

#include "gtest/gtest.h"

namespace poolscope {
namespace {

TEST(GlobMatchTest, StarsAndQuestionMarks) {
  EXPECT_TRUE(GlobMatch("*libjvm.so", "/usr/lib/jvm/java-17/lib/server/libjvm.so"));
  EXPECT_FALSE(GlobMatch("*libjvm.so", "/usr/lib/libjvm.so.1"));
  EXPECT_TRUE(GlobMatch("*libjvm.so*", "/usr/lib/libjvm.so.1"));
  EXPECT_TRUE(GlobMatch("/usr/lib/lib?.so", "/usr/lib/libc.so"));
  EXPECT_FALSE(GlobMatch("/usr/lib/lib?.so", "/usr/lib/libcc.so"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_FALSE(GlobMatch("a", ""));
  EXPECT_TRUE(GlobMatch("*a*b*c", "xxaxxbxxc"));
  EXPECT_FALSE(GlobMatch("*a*b*c", "xxaxxcxxb"));
}

__attribute__((noinline)) const void* HereInTheTest() { return __builtin_return_address(0); }

TEST(CallerTagTest, MatchesTheObjectThatHoldsTheCaller) {
  CallerTagInit("*caller_tag_test");
  EXPECT_TRUE(CallerTagged(HereInTheTest()));
  // An address inside libc is not in the test binary.
  EXPECT_FALSE(CallerTagged(reinterpret_cast<const void*>(&dlsym)));
  CallerTagInit("*libc.so*");
  EXPECT_TRUE(CallerTagged(reinterpret_cast<const void*>(&dlsym)));
  EXPECT_FALSE(CallerTagged(HereInTheTest()));
  // Addresses in no object at all are never tagged.
  EXPECT_FALSE(CallerTagged(reinterpret_cast<const void*>(0x10)));
}

}  // namespace
}  // namespace poolscope
