#include "track/symbolizer.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <gtest/gtest.h>

#include <iostream>

#include <string>
#include <thread>
#include <vector>

#include "track/test_debug_info.h"

namespace poolscope {
namespace track {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

constexpr int kKnownFunctionLine = __LINE__ + 1;
__attribute__((noinline)) int KnownFunction(int x) { return x * 3 + 1; }  // one line: see the callee

__attribute__((noinline)) uintptr_t ReturnAddressHere() {
  uintptr_t ra = reinterpret_cast<uintptr_t>(__builtin_extract_return_addr(__builtin_return_address(0)));
  __asm__ volatile("" ::: "memory");
  return ra;
}

// The test binary's own lines survive only where Bazel does not strip it (see BUILD).
bool ThisBinaryHasLines() {
  bool lines = ObjectHasLineTables(reinterpret_cast<void*>(&KnownFunction));
  if (!lines) std::cout << "this binary has no .debug_line (--strip=sometimes): file:line not checked\n";
  return lines;
}

// The genrule-built object, which keeps its debug info in every configuration.
struct Callee {
  void* handle = dlopen("track/libsymbolizer_test_callee.so", RTLD_NOW | RTLD_LOCAL);
  int (*known)(int) = handle ? reinterpret_cast<int (*)(int)>(dlsym(handle, "poolscope_callee_known")) : nullptr;
  int (*call_site)(uintptr_t*) =
      handle ? reinterpret_cast<int (*)(uintptr_t*)>(dlsym(handle, "poolscope_callee_call_site")) : nullptr;
  int* entry_line = handle ? static_cast<int*>(dlsym(handle, "poolscope_callee_entry_line")) : nullptr;
};

// The callee's call_site returns the line of a call it makes; the symbolizer must name that line.
void ExpectCallSiteLine(Symbolizer* sym, int (*call_site)(uintptr_t*)) {
  uintptr_t ra = 0;
  int line = call_site(&ra);
  SymbolizedFrame call = sym->SymbolizeReturnAddress(ra);
  EXPECT_EQ(call.function, "poolscope_callee_call_site");
  EXPECT_TRUE(EndsWith(call.file, "track/symbolizer_test_callee.cc")) << call.file;
  EXPECT_EQ(call.line, line);
}

TEST(SymbolizerTest, FunctionEntryAndCallLineInATestObject) {
  Callee callee;
  ASSERT_NE(callee.handle, nullptr) << dlerror();
  ASSERT_NE(callee.known, nullptr);
  ASSERT_NE(callee.call_site, nullptr);
  ASSERT_NE(callee.entry_line, nullptr);
  Symbolizer sym;
  SymbolizedFrame f = sym.SymbolizeAddress(reinterpret_cast<uintptr_t>(callee.known));
  EXPECT_TRUE(f.has_symbol);
  EXPECT_EQ(f.function, "poolscope_callee_known");
  EXPECT_TRUE(EndsWith(f.file, "track/symbolizer_test_callee.cc")) << f.file;
  EXPECT_EQ(f.line, *callee.entry_line);
  EXPECT_TRUE(EndsWith(f.object, "track/libsymbolizer_test_callee.so")) << f.object;

  ExpectCallSiteLine(&sym, callee.call_site);
}

// The same code with its DWARF in a zlib-compressed file beside it, found through .gnu_debuglink.
struct SplitCallee {
  void* handle = dlopen("track/libsymbolizer_test_split.so", RTLD_NOW | RTLD_LOCAL);
  int (*call_site)(uintptr_t*) =
      handle ? reinterpret_cast<int (*)(uintptr_t*)>(dlsym(handle, "poolscope_callee_call_site")) : nullptr;
};

off_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    closedir(d);
  }
  return names;
}

void ExpectCallSiteLine(const SplitCallee& callee) {
  Symbolizer sym;
  ExpectCallSiteLine(&sym, callee.call_site);
}

// Points XDG_CACHE_HOME at a fresh directory under the test's temporary directory; returns it.
std::string UseFreshCacheHome(const char* name) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string cache = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  return cache;
}

TEST(SymbolizerTest, CompressedSeparateDebugFileIsReadThroughAnUncompressedCopy) {
  const std::string dir = UseFreshCacheHome("xdg") + "/poolscope/debug";
  SplitCallee callee;
  ASSERT_NE(callee.handle, nullptr) << dlerror();
  ASSERT_NE(callee.call_site, nullptr);
  ASSERT_FALSE(ObjectHasLineTables(reinterpret_cast<void*>(callee.call_site))) << "debug info not split off";
  const off_t compressed = FileSize("track/libsymbolizer_test_split.debug");
  ASSERT_GT(compressed, 0);
  for (int round = 0; round < 2; ++round) {  // the second round reads the copy the first one wrote
    ExpectCallSiteLine(callee);
    std::vector<std::string> files = FilesIn(dir);
    ASSERT_EQ(files.size(), 1u) << "round " << round;
    EXPECT_EQ(files[0].size(), 40u + 6u) << files[0];  // 20-byte build id in hex, ".debug"
    EXPECT_GT(FileSize(dir + "/" + files[0]), compressed) << "the copy is not uncompressed";
  }
  // A copy that is not what its name says is not used (and the compressed file still answers).
  std::vector<std::string> files = FilesIn(dir);
  ASSERT_EQ(files.size(), 1u);
  FILE* f = fopen((dir + "/" + files[0]).c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("not an ELF file", f);
  fclose(f);
  ExpectCallSiteLine(callee);
  unsetenv("XDG_CACHE_HOME");
}

std::string ReadFile(const std::string& path) {
  std::string s;
  if (FILE* f = fopen(path.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
    fclose(f);
  }
  return s;
}

void ExpectSameFrame(const SymbolizedFrame& a, const SymbolizedFrame& b, const char* what) {
  EXPECT_EQ(a.function, b.function) << what;
  EXPECT_EQ(a.object, b.object) << what;
  EXPECT_EQ(a.file, b.file) << what;
  EXPECT_EQ(a.line, b.line) << what;
  EXPECT_EQ(a.object_offset, b.object_offset) << what;
  EXPECT_EQ(a.has_symbol, b.has_symbol) << what;
}

// A second symbolizer (a later process) answers from the on-disk table the first one wrote, and gives
// exactly the frames libdwfl gave.
TEST(SymbolizerTest, AnswersAreKeptOnDiskByBuildIdAndGiveTheSameFrames) {
  const std::string dir = UseFreshCacheHome("xdg-symbols") + "/poolscope/symbols";
  Callee callee;
  SplitCallee split;
  ASSERT_NE(callee.handle, nullptr);
  ASSERT_NE(split.handle, nullptr);
  void* qsort_r_fn = dlsym(RTLD_DEFAULT, "qsort_r");
  ASSERT_NE(qsort_r_fn, nullptr);
  uintptr_t callee_ra = 0, split_ra = 0;
  callee.call_site(&callee_ra);
  split.call_site(&split_ra);
  const uintptr_t pcs[] = {reinterpret_cast<uintptr_t>(callee.known), callee_ra, split_ra,
                           reinterpret_cast<uintptr_t>(qsort_r_fn) + 4, reinterpret_cast<uintptr_t>(&KnownFunction)};
  std::vector<SymbolizedFrame> cold;
  {
    Symbolizer sym;
    for (uintptr_t pc : pcs) cold.push_back(sym.SymbolizeAddress(pc));
  }
  std::vector<std::string> files = FilesIn(dir);
  ASSERT_GE(files.size(), 3u) << "one table per object with a build id";
  {
    Symbolizer sym;
    for (size_t i = 0; i < cold.size(); ++i) ExpectSameFrame(sym.SymbolizeAddress(pcs[i]), cold[i], "warm");
  }
  EXPECT_EQ(FilesIn(dir).size(), files.size());
  // Proof that the table is what answered: edit the callee's entry for its function and read it back.
  bool edited = false;
  for (const std::string& name : files) {
    std::string text = ReadFile(dir + "/" + name);
    size_t at = text.find("\tpoolscope_callee_known\t");
    if (at == std::string::npos) continue;
    text.replace(at, strlen("\tpoolscope_callee_known\t"), "\tedited_in_the_table\t");
    FILE* f = fopen((dir + "/" + name).c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs(text.c_str(), f);
    fputs("garbage line\n\t\t\n", f);  // lines that do not parse are skipped
    fclose(f);
    edited = true;
  }
  ASSERT_TRUE(edited);
  {
    Symbolizer sym;
    EXPECT_EQ(sym.SymbolizeAddress(pcs[0]).function, "edited_in_the_table");
    ExpectSameFrame(sym.SymbolizeAddress(pcs[1]), cold[1], "after the edit");
  }
  unsetenv("XDG_CACHE_HOME");
}

TEST(SymbolizerTest, CompressedDebugFileWithoutAWritableCacheStillGivesLines) {
  setenv("XDG_CACHE_HOME", "/proc/self/no-such-dir", 1);
  SplitCallee callee;
  ASSERT_NE(callee.handle, nullptr) << dlerror();
  ExpectCallSiteLine(callee);
  unsetenv("XDG_CACHE_HOME");
}

TEST(SymbolizerTest, FunctionEntryInThisBinary) {
  Symbolizer sym;
  SymbolizedFrame f = sym.SymbolizeAddress(reinterpret_cast<uintptr_t>(&KnownFunction));
  EXPECT_TRUE(f.has_symbol);
  EXPECT_EQ(f.function, "poolscope::track::(anonymous namespace)::KnownFunction(int)");
  if (!ThisBinaryHasLines()) return;
  EXPECT_TRUE(EndsWith(f.file, "track/symbolizer_test.cc")) << f.file;
  EXPECT_EQ(f.line, kKnownFunctionLine);
  EXPECT_FALSE(f.object.empty());
}

TEST(SymbolizerTest, ReturnAddressGivesTheLineOfTheCall) {
  Symbolizer sym;
  uintptr_t ra = ReturnAddressHere(); const int call_line = __LINE__;
  SymbolizedFrame f = sym.SymbolizeReturnAddress(ra);
  EXPECT_EQ(f.function, "poolscope::track::(anonymous namespace)::SymbolizerTest_ReturnAddressGivesTheLineOfTheCall_Test::TestBody()");
  if (!ThisBinaryHasLines()) return;
  EXPECT_TRUE(EndsWith(f.file, "track/symbolizer_test.cc")) << f.file;
  EXPECT_EQ(f.line, call_line);
  // Cached: the same answer again.
  SymbolizedFrame again = sym.SymbolizeReturnAddress(ra);
  EXPECT_EQ(again.function, f.function);
  EXPECT_EQ(again.line, f.line);
}

TEST(SymbolizerTest, FunctionInLibcFromDynsym) {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  void* fn = dlsym(libc, "qsort_r");
  ASSERT_NE(fn, nullptr);
  Symbolizer sym;
  SymbolizedFrame f = sym.SymbolizeAddress(reinterpret_cast<uintptr_t>(fn) + 4);
  EXPECT_TRUE(f.has_symbol);
  EXPECT_NE(f.function.find("qsort_r"), std::string::npos) << f.function;
  EXPECT_NE(f.object.find("libc.so.6"), std::string::npos) << f.object;
  dlclose(libc);
}

TEST(SymbolizerTest, NoSymbolFallsBackToObjectPlusOffset) {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  Dl_info info;
  ASSERT_NE(dladdr(dlsym(libc, "qsort_r"), &info), 0);
  dlclose(libc);
  Symbolizer sym;
  // The ELF header at the object's load address is covered by no function symbol.
  SymbolizedFrame f = sym.SymbolizeAddress(reinterpret_cast<uintptr_t>(info.dli_fbase) + 1);
  EXPECT_FALSE(f.has_symbol);
  // The object as /proc/self/maps names it (the file, not the soname link dladdr gives).
  const char* base = strrchr(f.object.c_str(), '/');
  ASSERT_NE(base, nullptr);
  EXPECT_EQ(f.function, std::string(base + 1) + "+0x1");
  EXPECT_NE(f.object.find("libc.so"), std::string::npos) << f.object;
  EXPECT_EQ(f.object_offset, 1u);
}

TEST(SymbolizerTest, UnmappedAddress) {
  Symbolizer sym;
  SymbolizedFrame f = sym.SymbolizeAddress(0x10);
  EXPECT_EQ(f.function, "0x10");
  EXPECT_EQ(f.object, "");
  EXPECT_EQ(f.line, 0);
  EXPECT_FALSE(f.has_symbol);
}

TEST(SymbolizerTest, SeesLibrariesLoadedAfterItsFirstUse) {
  Symbolizer sym;
  sym.SymbolizeAddress(reinterpret_cast<uintptr_t>(&KnownFunction));  // reads the maps now
  void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  void* fn = dlsym(h, "unw_backtrace");
  ASSERT_NE(fn, nullptr);
  SymbolizedFrame f = sym.SymbolizeAddress(reinterpret_cast<uintptr_t>(fn));
  EXPECT_NE(f.object.find("libunwind.so.8"), std::string::npos) << f.object;
  EXPECT_TRUE(f.has_symbol) << f.function;
}

TEST(SymbolizerTest, Demangle) {
  EXPECT_EQ(Demangle("_ZN9poolscope5track12CaptureStackEPmii"), "poolscope::track::CaptureStack(unsigned long*, int, int)");
  EXPECT_EQ(Demangle("malloc"), "malloc");
  EXPECT_EQ(Demangle("_Znot a name"), "_Znot a name");
  EXPECT_EQ(Demangle(nullptr), "");
}

TEST(SymbolizerTest, ThreadsShareOneSymbolizer) {
  Symbolizer sym;
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        SymbolizedFrame f = sym.SymbolizeAddress(reinterpret_cast<uintptr_t>(&KnownFunction) + (i % 3));
        bad[t] += f.function.find("KnownFunction") == std::string::npos;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0);
}

}  // namespace
}  // namespace track
}  // namespace poolscope
