// File: tests/tools/suppressions_adapt_test.cc
//
// `poolscope suppressions --adapt` (report/suppressions_adapt.h) on files written here: which
// memcheck entries get copies and what each copy is (written out by hand from the rule: poolscope's
// frames after the allocation function, a pooled block's stack from ValgrindDescribeAlloc), that
// everything of the input is kept in its order, the `leak:` files left as they are with the patterns
// that match poolscope's own frames named, and every kind of bad input named by its line. The
// copies against real memcheck, LeakSanitizer and heaptrack runs: //tests:suppressions_adapt_test.
#include "report/suppressions_adapt.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace poolscope::report {
namespace {

using ::testing::HasSubstr;

AdaptedSuppressions Adapt(const std::string& text,
                          std::optional<SuppressionFormat> format = std::nullopt) {
  return AdaptSuppressions(text, "user.supp", format);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

// Every line of `original` appears in `adapted`, in the same order.
bool KeepsInOrder(const std::string& original, const std::string& adapted) {
  std::vector<std::string> want = Lines(original), have = Lines(adapted);
  size_t next = 0;
  for (const std::string& line : have) {
    if (next < want.size() && line == want[next]) ++next;
  }
  return next == want.size();
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ValgrindGlobTest, MatchesAsValgrindDoes) {
  EXPECT_TRUE(ValgrindGlobMatches("malloc", "malloc"));
  EXPECT_FALSE(ValgrindGlobMatches("malloc", "malloc2"));
  EXPECT_TRUE(ValgrindGlobMatches("*alloc", "malloc"));
  EXPECT_TRUE(ValgrindGlobMatches("*alloc", "calloc"));
  EXPECT_FALSE(ValgrindGlobMatches("*alloc", "free"));
  EXPECT_TRUE(ValgrindGlobMatches("_Znw*", "_ZnwmRKSt9nothrow_t"));
  EXPECT_TRUE(ValgrindGlobMatches("m?lloc", "malloc"));
  EXPECT_FALSE(ValgrindGlobMatches("m?lloc", "mlloc"));
  EXPECT_TRUE(ValgrindGlobMatches("*", ""));
  EXPECT_TRUE(ValgrindGlobMatches("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(ValgrindGlobMatches("a*b*c", "aXbYbZ"));
  EXPECT_TRUE(ValgrindGlobMatches("a\\*", "a*"));
  EXPECT_FALSE(ValgrindGlobMatches("a\\*", "ab"));
  EXPECT_TRUE(ValgrindGlobMatches("*/libpoolscope.so", "/usr/lib/libpoolscope.so"));
  EXPECT_FALSE(ValgrindGlobMatches("*/libpoolscope.so", "/usr/lib/libpoolscope.so.1"));
}

TEST(LeakPatternTest, MatchesAsLeakSanitizerDoes) {
  EXPECT_TRUE(LeakPatternMatches("Alloc", "poolscope::AllocSlow(poolscope::Api, unsigned long, void*)"));
  EXPECT_TRUE(LeakPatternMatches("^poolscope", "poolscope::AllocSlow()"));
  EXPECT_FALSE(LeakPatternMatches("^AllocSlow", "poolscope::AllocSlow()"));
  EXPECT_TRUE(LeakPatternMatches("Slow()$", "poolscope::AllocSlow()"));
  EXPECT_FALSE(LeakPatternMatches("Slow$", "poolscope::AllocSlow()"));
  EXPECT_TRUE(LeakPatternMatches("pool*Slow", "poolscope::AllocSlow()"));
  EXPECT_FALSE(LeakPatternMatches("Slow*pool", "poolscope::AllocSlow()"));
  EXPECT_TRUE(LeakPatternMatches("*", "x"));
  EXPECT_FALSE(LeakPatternMatches("x", ""));
  // The first place a literal run is found is the one taken, as the tools take it.
  EXPECT_FALSE(LeakPatternMatches("ab$", "abab"));
}

constexpr char kMallocEntry[] =
    "{\n"
    "   small-malloc\n"
    "   Memcheck:Leak\n"
    "   match-leak-kinds: definite\n"
    "   fun:malloc\n"
    "   fun:small_malloc\n"
    "   fun:main\n"
    "}\n";

TEST(AdaptValgrindTest, AllocationEntryGetsPoolscopeFramesAndPooledCopies) {
  AdaptedSuppressions adapted = Adapt(std::string("# the program's known leaks\n") + kMallocEntry);
  ASSERT_EQ(adapted.error, "");
  EXPECT_TRUE(adapted.warnings.empty());
  EXPECT_TRUE(KeepsInOrder(std::string("# the program's known leaks\n") + kMallocEntry, adapted.text));
  // One frame of poolscope's between malloc and the caller ...
  EXPECT_THAT(adapted.text, HasSubstr("{\n"
                                      "   small-malloc/poolscope:1\n"
                                      "   Memcheck:Leak\n"
                                      "   match-leak-kinds: definite\n"
                                      "   fun:malloc\n"
                                      "   obj:*/libpoolscope.so\n"
                                      "   fun:small_malloc\n"
                                      "   fun:main\n"
                                      "}\n"));
  // ... up to four.
  EXPECT_THAT(adapted.text, HasSubstr("   small-malloc/poolscope:4\n"
                                      "   Memcheck:Leak\n"
                                      "   match-leak-kinds: definite\n"
                                      "   fun:malloc\n"
                                      "   obj:*/libpoolscope.so\n"
                                      "   obj:*/libpoolscope.so\n"
                                      "   obj:*/libpoolscope.so\n"
                                      "   obj:*/libpoolscope.so\n"
                                      "   fun:small_malloc\n"));
  EXPECT_EQ(Count(adapted.text, "small-malloc/poolscope:"), 4u);
  EXPECT_EQ(Count(adapted.text, "small-malloc/poolscope:5"), 0u);
  // A pooled block (valgrind=1): its stack starts at poolscope's description of it.
  EXPECT_THAT(adapted.text, HasSubstr("{\n"
                                      "   small-malloc/poolscope-pooled:2\n"
                                      "   Memcheck:Leak\n"
                                      "   match-leak-kinds: definite\n"
                                      "   fun:_ZN9poolscope*ValgrindDescribeAlloc*\n"
                                      "   obj:*/libpoolscope.so\n"
                                      "   obj:*/libpoolscope.so\n"
                                      "   fun:small_malloc\n"
                                      "   fun:main\n"
                                      "}\n"));
  EXPECT_EQ(Count(adapted.text, "small-malloc/poolscope-pooled:"), 4u);
  EXPECT_EQ(Count(adapted.text, "poolscope-realloc"), 0u);
  EXPECT_EQ(Count(adapted.text, "fun:_ZN9poolscope*ValgrindDescribeFree*"), 0u);
  EXPECT_THAT(adapted.text, HasSubstr("# 1 of 1 entries adapted, 8 copies."));
  // The header names the file and comes first.
  EXPECT_EQ(adapted.text.rfind("# poolscope suppressions --adapt user.supp: for memcheck", 0), 0u);
}

TEST(AdaptValgrindTest, PoolscopeFramesFollowTheAllocatorsOwnFrames) {
  // memcheck reports posix_memalign as its memalign called from its posix_memalign; libc's strdup
  // is the program's side of the call into poolscope.
  AdaptedSuppressions adapted = Adapt(
      "{\n aligned\n Memcheck:Leak\n fun:memalign\n fun:posix_memalign\n fun:aligned\n}\n"
      "{\n dup\n Memcheck:Leak\n fun:malloc\n fun:strdup\n fun:dup_string\n}\n");
  ASSERT_EQ(adapted.error, "");
  EXPECT_THAT(adapted.text, HasSubstr("   aligned/poolscope:1\n   Memcheck:Leak\n   fun:memalign\n"
                                      "   fun:posix_memalign\n   obj:*/libpoolscope.so\n   fun:aligned\n}"));
  EXPECT_THAT(adapted.text, HasSubstr("   aligned/poolscope-pooled:1\n   Memcheck:Leak\n"
                                      "   fun:_ZN9poolscope*ValgrindDescribeAlloc*\n"
                                      "   obj:*/libpoolscope.so\n   fun:aligned\n}"));
  EXPECT_THAT(adapted.text, HasSubstr("   dup/poolscope:1\n   Memcheck:Leak\n   fun:malloc\n"
                                      "   obj:*/libpoolscope.so\n   fun:strdup\n   fun:dup_string\n}"));
}

TEST(AdaptValgrindTest, ReallocAlsoFromMallocFreeFromDescribeFree) {
  AdaptedSuppressions adapted = Adapt(
      "{\n grow\n Memcheck:Leak\n fun:realloc\n fun:grow\n}\n"
      "{\n twice\n Memcheck:Free\n fun:free\n fun:free_twice\n}\n"
      "{\n fishy\n Memcheck:FishyValue\n malloc(size)\n fun:malloc\n fun:huge\n}\n");
  ASSERT_EQ(adapted.error, "");
  // A block realloc moves out of its pool comes from malloc.
  EXPECT_THAT(adapted.text, HasSubstr("   grow/poolscope-realloc:1\n   Memcheck:Leak\n   fun:malloc\n"
                                      "   obj:*/libpoolscope.so\n   fun:grow\n}"));
  EXPECT_EQ(Count(adapted.text, "grow/poolscope"), 12u);
  // An invalid free of a pooled block is found where poolscope describes the free to memcheck.
  EXPECT_THAT(adapted.text, HasSubstr("   twice/poolscope:1\n   Memcheck:Free\n   fun:free\n"
                                      "   obj:*/libpoolscope.so\n   fun:free_twice\n}"));
  EXPECT_THAT(adapted.text, HasSubstr("   twice/poolscope-pooled:3\n   Memcheck:Free\n"
                                      "   fun:_ZN9poolscope*ValgrindDescribeFree*\n"
                                      "   obj:*/libpoolscope.so\n   obj:*/libpoolscope.so\n"
                                      "   obj:*/libpoolscope.so\n   fun:free_twice\n}"));
  EXPECT_EQ(Count(adapted.text, "twice/poolscope"), 8u);
  // Another kind that starts at malloc: the regular copies only, its extra line kept.
  EXPECT_THAT(adapted.text, HasSubstr("   fishy/poolscope:1\n   Memcheck:FishyValue\n   malloc(size)\n"
                                      "   fun:malloc\n   obj:*/libpoolscope.so\n   fun:huge\n}"));
  EXPECT_EQ(Count(adapted.text, "fishy/poolscope"), 4u);
  EXPECT_THAT(adapted.text, HasSubstr("# 3 of 3 entries adapted, 24 copies."));
}

TEST(AdaptValgrindTest, EntriesPoolscopeDoesNotChangeAreLeftAlone) {
  const std::string input =
      "# comments stay\n"
      "\n"
      "  {\n"
      "     custom-allocator\n"
      "     Memcheck:Leak\n"
      "     fun:my_pool_alloc\n"
      "     fun:caller\n"
      "  }\n"
      "{\n"
      "   anywhere\n"
      "   Memcheck:Leak\n"
      "   ...\n"
      "   fun:init_tables\n"
      "}\n"
      "{\n"
      "   cond\n"
      "   Memcheck:Cond\n"
      "   fun:compare\n"
      "}\n"
      "{\n"
      "   param\n"
      "   Memcheck:Param\n"
      "   write(buf)\n"
      "   fun:write\n"
      "}\n"
      "{\n"
      "   race\n"
      "   # a comment inside an entry\n"
      "   Helgrind:Race\n"
      "   fun:malloc\n"
      "}\n"
      "{\n"
      "   already\n"
      "   Memcheck:Leak\n"
      "   fun:malloc\n"
      "   obj:*/libpoolscope.so\n"
      "   fun:caller\n"
      "}";  // no newline at the end
  AdaptedSuppressions adapted = Adapt(input);
  ASSERT_EQ(adapted.error, "");
  EXPECT_TRUE(KeepsInOrder(input, adapted.text));
  EXPECT_EQ(Count(adapted.text, "/poolscope"), 0u);
  EXPECT_THAT(adapted.text, HasSubstr("# 0 of 6 entries adapted, 0 copies."));
  EXPECT_EQ(adapted.text.back(), '\n');
}

TEST(AdaptValgrindTest, AnyFunctionAtTheTopOfALeakIsTheAllocator) {
  // A leak's stack starts where the block was allocated; a second `fun:*` is the caller's frame.
  AdaptedSuppressions adapted =
      Adapt("{\n any\n Memcheck:Leak\n fun:*\n fun:*\n fun:main\n}\n"
            "{\n any-cond\n Memcheck:Cond\n fun:*\n fun:main\n}\n");
  ASSERT_EQ(adapted.error, "");
  EXPECT_THAT(adapted.text, HasSubstr("   any/poolscope:1\n   Memcheck:Leak\n   fun:*\n"
                                      "   obj:*/libpoolscope.so\n   fun:*\n   fun:main\n}"));
  EXPECT_THAT(adapted.text, HasSubstr("   any/poolscope-pooled:1\n   Memcheck:Leak\n"
                                      "   fun:_ZN9poolscope*ValgrindDescribeAlloc*\n"
                                      "   obj:*/libpoolscope.so\n   fun:*\n   fun:main\n}"));
  EXPECT_EQ(Count(adapted.text, "any-cond/"), 0u);
}

void ExpectError(const std::string& text, int line, const std::string& error,
                 std::optional<SuppressionFormat> format = std::nullopt) {
  AdaptedSuppressions adapted = Adapt(text, format);
  EXPECT_EQ(adapted.error_line, line) << text;
  EXPECT_EQ(adapted.error, error) << text;
  EXPECT_EQ(adapted.text, "") << text;
}

TEST(AdaptValgrindTest, BadInputNamesItsLine) {
  ExpectError("# x\n{\n a\n Memcheck:Leak\n fun:malloc\n", 2,
              "the suppression that starts here has no closing '}'");
  ExpectError("{\n a\n Memcheck:Leak\n fun:malloc\n fn:caller\n}\n", 5,
              "expected a frame (fun:, obj:, src: or ...) or '}', got 'fn:caller'");
  ExpectError("{\n a\n Memcheck:Leak\n fn:malloc\n}\n", 4,
              "expected a frame (fun:, obj:, src: or ...) or '}', got 'fn:malloc'");
  ExpectError("{\n a\n Memcheck:Cond\n match-leak-kinds: all\n fun:f\n}\n", 4,
              "expected a frame (fun:, obj:, src: or ...) or '}', got 'match-leak-kinds: all'");
  ExpectError("{\n a\n Leak\n fun:malloc\n}\n", 3,
              "expected TOOL:KIND (such as Memcheck:Leak), got 'Leak'");
  ExpectError("{\n a\n}\n", 3, "suppression without a name and a TOOL:KIND line");
  ExpectError("{\n a\n Memcheck:Leak\n match-leak-kinds: all\n}\n", 5,
              "suppression without a stack (fun:, obj:, src: or ... lines)");
  ExpectError("{\n a\n Memcheck:Leak\n fun:malloc\n}\nleak:foo\n", 6,
              "expected '{' to start a valgrind suppression, got 'leak:foo'");
  ExpectError("{\n a\n Memcheck:Leak\n fun:malloc\n}\n", 1,
              "expected leak:PATTERN, got '{' (a valgrind suppression: --format=valgrind)",
              SuppressionFormat::kLsan);
  ExpectError("leak:foo\n", 1, "expected '{' to start a valgrind suppression, got 'leak:foo'",
              SuppressionFormat::kValgrind);
  // Adapting an adapted file would copy the copies.
  std::string once = Adapt(kMallocEntry).text;
  ExpectError(once, 1, "already adapted by poolscope suppressions --adapt: adapt the original");
}

TEST(AdaptLeakPatternsTest, PatternsKeptAndThoseMatchingPoolscopeNamed) {
  const std::string input =
      "# known leaks\n"
      "leak:small_malloc\n"
      "  leak:libfontconfig.so\n"
      "\n"
      "leak:Alloc\n"
      "leak:^poolscope::\n"
      "leak:libpoolscope\n";
  AdaptedSuppressions adapted = Adapt(input, SuppressionFormat::kLsan);
  ASSERT_EQ(adapted.error, "");
  EXPECT_TRUE(KeepsInOrder(input, adapted.text));
  // The lines that are not comments are the input's, unchanged.
  std::string patterns;
  for (const std::string& line : Lines(adapted.text)) {
    if (!line.empty() && line[0] != '#') patterns += line + "\n";
  }
  EXPECT_EQ(patterns, "leak:small_malloc\n  leak:libfontconfig.so\nleak:Alloc\nleak:^poolscope::\n"
                      "leak:libpoolscope\n");
  ASSERT_EQ(adapted.warnings.size(), 3u);
  EXPECT_EQ(adapted.warnings[0],
            "5: warning: leak:Alloc also matches poolscope's own frame "
            "poolscope::AllocSlow(poolscope::Api, unsigned long, void*): with poolscope preloaded "
            "it suppresses every leak allocated through that frame, whatever the program's stack");
  EXPECT_THAT(adapted.warnings[1], HasSubstr("6: warning: leak:^poolscope:: also matches"));
  EXPECT_THAT(adapted.warnings[2], HasSubstr("7: warning: leak:libpoolscope also matches poolscope's "
                                             "own frame libpoolscope.so"));
  // Each warning is in the file too, above its pattern.
  EXPECT_THAT(adapted.text, HasSubstr("# poolscope: leak:Alloc also matches poolscope's own frame "
                                      "poolscope::AllocSlow(poolscope::Api, unsigned long, void*): "
                                      "with poolscope preloaded it suppresses every leak allocated "
                                      "through that frame, whatever the program's stack\nleak:Alloc\n"));
  EXPECT_THAT(adapted.text, HasSubstr("for LeakSanitizer below libpoolscope.so."));
  EXPECT_THAT(adapted.text, HasSubstr("# 5 patterns."));
  EXPECT_THAT(Adapt(input, SuppressionFormat::kHeaptrack).text, HasSubstr("for heaptrack below"));
  EXPECT_THAT(Adapt(input).text, HasSubstr("for LeakSanitizer or heaptrack below"));
}

TEST(AdaptLeakPatternsTest, BadLinesNamed) {
  ExpectError("leak:a\ninterceptor_via_fun:b\n", 2, "expected leak:PATTERN, got 'interceptor_via_fun:b'");
  ExpectError("# only\nsome text\n", 2, "expected leak:PATTERN, got 'some text'");
}

}  // namespace
}  // namespace poolscope::report
