#include "track/symbolizer.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "track/proc_maps.h"
#include "track/test_debug_info.h"

namespace poolscope {
namespace track {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
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

// A frame whose strings outlive the Symbolizer that answered: these tests compare the answers of
// symbolizers made one after the other, as processes would be.
struct KeptFrame {
  std::string function, object, file;
  int line = 0;
  uintptr_t object_offset = 0;
  bool has_symbol = false;
};
KeptFrame Kept(const SymbolizedFrame& f) {
  return KeptFrame{std::string(f.function), std::string(f.object), std::string(f.file), f.line, f.object_offset,
                   f.has_symbol};
}

void ExpectSameFrame(const SymbolizedFrame& a, const KeptFrame& b, const char* what) {
  EXPECT_EQ(a.function, b.function) << what;
  EXPECT_EQ(a.object, b.object) << what;
  EXPECT_EQ(a.file, b.file) << what;
  EXPECT_EQ(a.line, b.line) << what;
  EXPECT_EQ(a.object_offset, b.object_offset) << what;
  EXPECT_EQ(a.has_symbol, b.has_symbol) << what;
}

// The callee's call site symbolized once in a fresh cache under `dir`: its frame, the table file that
// now holds its answer, and that answer's line (without its newline).
struct CallSiteAnswer {
  uintptr_t ra = 0;
  KeptFrame cold;
  std::string table, line;
};
CallSiteAnswer AnswerCallSite(const Callee& callee, const std::string& dir) {
  CallSiteAnswer a;
  callee.call_site(&a.ra);
  {
    Symbolizer sym;
    a.cold = Kept(sym.SymbolizeReturnAddress(a.ra));
  }
  for (const std::string& name : FilesIn(dir)) {
    const std::string text = ReadFile(dir + "/" + name);
    const size_t at = text.find("\tpoolscope_callee_call_site\t");
    if (at == std::string::npos) continue;
    a.table = dir + "/" + name;
    const size_t start = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
    a.line = text.substr(start, text.find('\n', at) - start);
  }
  return a;
}

// Writes `text` over the answer's table: the next process must symbolize the call site again (the
// table's line for it is no answer) and append its line after `text`, from which the process after
// it answers.
void ExpectAnsweredAgainAfter(const CallSiteAnswer& a, const std::string& text, const std::string& text_ended) {
  {
    FILE* f = fopen(a.table.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs(text.c_str(), f);
    fclose(f);
  }
  {
    Symbolizer sym;
    ExpectSameFrame(sym.SymbolizeReturnAddress(a.ra), a.cold, "after the table was written over");
  }
  EXPECT_EQ(ReadFile(a.table), text_ended + a.line + "\n");
  {
    Symbolizer sym;
    ExpectSameFrame(sym.SymbolizeReturnAddress(a.ra), a.cold, "from the line appended");
  }
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
  std::vector<KeptFrame> cold;
  {
    Symbolizer sym;
    for (uintptr_t pc : pcs) cold.push_back(Kept(sym.SymbolizeAddress(pc)));
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

// A frame stays where it was answered, its strings with it, while the same Symbolizer answers more:
// one read from the table on disk (its strings views of the file), and those answered since (whose
// lines the table adds, and which fill more than one of the frames' chunks).
TEST(SymbolizerTest, FramesStayAsTheyWereWhileMoreAreAnswered) {
  UseFreshCacheHome("xdg-stay");
  Callee callee;
  ASSERT_NE(callee.handle, nullptr);
  const uintptr_t known = reinterpret_cast<uintptr_t>(callee.known);
  {
    Symbolizer sym;
    ASSERT_EQ(sym.AddressFrame(known).function, "poolscope_callee_known");
  }
  Symbolizer sym;
  const SymbolizedFrame& from_table = sym.AddressFrame(known);
  const KeptFrame kept = Kept(from_table);
  std::vector<const SymbolizedFrame*> answered;
  std::vector<KeptFrame> answered_kept;
  for (uintptr_t i = 1; i <= 1000; ++i) {
    const SymbolizedFrame& f = sym.AddressFrame(known + i);
    if (i <= 4) {
      answered.push_back(&f);
      answered_kept.push_back(Kept(f));
    }
  }
  ExpectSameFrame(from_table, kept, "the table's answer");
  EXPECT_EQ(from_table.function, "poolscope_callee_known");
  for (size_t i = 0; i < answered.size(); ++i) ExpectSameFrame(*answered[i], answered_kept[i], "an answer of libdwfl's");
  unsetenv("XDG_CACHE_HOME");
}

// Maps handed over (the exit scan's) name the objects: the callee's frames take the path they give
// it, without /proc/self/maps read again; an address in none of them (libc's, whose lines were left
// out) has the maps read again, and its real path.
TEST(SymbolizerTest, MapsHandedOverNameTheObjects) {
  UseFreshCacheHome("xdg-maps");
  Callee callee;
  ASSERT_NE(callee.handle, nullptr);
  void* qsort_r_fn = dlsym(RTLD_DEFAULT, "qsort_r");
  ASSERT_NE(qsort_r_fn, nullptr);
  std::string real_callee, real_libc;
  {
    Symbolizer sym;
    real_callee = std::string(sym.AddressFrame(reinterpret_cast<uintptr_t>(callee.known)).object);
    real_libc = std::string(sym.AddressFrame(reinterpret_cast<uintptr_t>(qsort_r_fn)).object);
  }
  ASSERT_FALSE(real_callee.empty());
  ASSERT_FALSE(real_libc.empty());
  // This process's maps, the callee's lines renamed and libc's left out.
  const std::string text = ReadFile("/proc/self/maps");
  std::string edited;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(at, nl - at);
    at = nl + 1;
    if (EndsWith(line, real_libc)) continue;
    if (EndsWith(line, real_callee)) line.replace(line.size() - real_callee.size(), real_callee.size(), "/made/up/callee.so");
    edited += line + "\n";
  }
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/edited_maps";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs(edited.c_str(), f);
  fclose(f);
  MmapScratchMemory scratch;
  ProcMaps maps(scratch);
  ASSERT_TRUE(maps.Read(path.c_str()));
  Symbolizer sym;
  sym.UseMaps(maps);
  EXPECT_EQ(sym.AddressFrame(reinterpret_cast<uintptr_t>(callee.known)).object, "/made/up/callee.so");
  EXPECT_EQ(sym.AddressFrame(reinterpret_cast<uintptr_t>(qsort_r_fn)).object, real_libc);
  unsetenv("XDG_CACHE_HOME");
}

// A table's last line cut short by a short write is not an answer, even when it has its six fields
// (cut inside the file name), and the next process's answers start on a line of their own.
TEST(SymbolizerTest, ALastLineCutShortIsNotReadAndTheNextAnswersStartANewLine) {
  const std::string dir = UseFreshCacheHome("xdg-cut") + "/poolscope/symbols";
  Callee callee;
  ASSERT_NE(callee.handle, nullptr);
  const CallSiteAnswer a = AnswerCallSite(callee, dir);
  ASSERT_EQ(a.cold.function, "poolscope_callee_call_site");
  ASSERT_GT(a.cold.file.size(), 4u);
  ASSERT_FALSE(a.table.empty());
  // The table now holds only that answer, edited, and cut two bytes short of the file name's end.
  const size_t fn = a.line.find("\tpoolscope_callee_call_site\t");
  std::string cut = a.line;
  cut.replace(fn, strlen("\tpoolscope_callee_call_site\t"), "\tedited_in_the_table\t");
  cut.resize(cut.size() - 2);
  ExpectAnsweredAgainAfter(a, cut, cut + "\n");
  unsetenv("XDG_CACHE_HOME");
}

TEST(SymbolTableTest, ParsesTheSixFieldsAndRejectsWhatIsNotALine) {
  uintptr_t off = 0;
  SymbolizedFrame f;
  const std::string ok = "1a2b\t1\t42\t3c4d\tns::f(int)\t/src/a.cc";
  ASSERT_TRUE(ParseSymbolLine(ok.data(), ok.size(), &off, &f));
  EXPECT_EQ(off, 0x1a2bu);
  EXPECT_TRUE(f.has_symbol);
  EXPECT_EQ(f.line, 42);
  EXPECT_EQ(f.object_offset, 0x3c4du);
  EXPECT_EQ(f.function, "ns::f(int)");
  EXPECT_EQ(f.file, "/src/a.cc");
  // Empty function and file fields are answers (no symbol, no debug info).
  const std::string empty_names = "10\t0\t0\t10\t\t";
  ASSERT_TRUE(ParseSymbolLine(empty_names.data(), empty_names.size(), &off, &f));
  EXPECT_EQ(off, 0x10u);
  EXPECT_FALSE(f.has_symbol);
  EXPECT_EQ(f.function, "");
  EXPECT_EQ(f.file, "");
  // Names of any length.
  const std::string long_name(100000, 'x');
  const std::string long_line = "ff\t1\t7\tff\t" + long_name + "\t" + long_name + ".cc";
  ASSERT_TRUE(ParseSymbolLine(long_line.data(), long_line.size(), &off, &f));
  EXPECT_EQ(f.function, long_name);
  EXPECT_EQ(f.file, long_name + ".cc");
  for (const char* bad : {"", "1a2b", "1a2b\t1\t42\t3c4d\tf", "1a2b\t1\t42\t3c4d\tf\tfile\textra",
                          "\t1\t42\t3c4d\tf\tfile", "0x1a\t1\t42\t3c4d\tf\tfile", "1g\t1\t42\t3c4d\tf\tfile",
                          "1a\t2\t42\t3c4d\tf\tfile", "1a\t\t42\t3c4d\tf\tfile", "1a\t1\t4x\t3c4d\tf\tfile",
                          "1a\t1\t42\t\tf\tfile", "11111111111111111\t1\t42\t3c4d\tf\tfile", "garbage line"}) {
    EXPECT_FALSE(ParseSymbolLine(bad, strlen(bad), &off, nullptr)) << bad;
  }
}

TEST(SymbolTableTest, IndexReadsCompleteLinesOnly) {
  std::vector<std::pair<uintptr_t, uint32_t>> lines;
  EXPECT_EQ(IndexSymbolTable("", 0, &lines), 0u);
  EXPECT_TRUE(lines.empty());
  // A line that does not parse between two that do; the same offset twice; a last line without its
  // newline.
  const std::string text =
      "a\t1\t1\ta\tf\tx.c\n"
      "garbage\n"
      "\n"
      "b\t1\t2\tb\tg\ty.c\n"
      "a\t1\t3\ta\th\tz.c\n"
      "c\t1\t4\tc\tk\tw.c";
  const size_t complete = text.rfind('\n') + 1;
  EXPECT_EQ(IndexSymbolTable(text.data(), text.size(), &lines), complete);
  const std::vector<std::pair<uintptr_t, uint32_t>> expected = {
      {0xa, 0}, {0xb, static_cast<uint32_t>(text.find("b\t"))}, {0xa, static_cast<uint32_t>(text.find("a\t1\t3"))}};
  EXPECT_EQ(lines, expected);
  // A line of six fields is indexed by its offset; its other numbers are checked when it is read.
  lines.clear();
  const std::string bad_number = "d\t1\t4x\td\tk\tw.c";
  const std::string indexed = bad_number + "\n1a\t2\t4\t1a\tk\tw.c\n";
  EXPECT_EQ(IndexSymbolTable(indexed.data(), indexed.size(), &lines), indexed.size());
  const std::vector<std::pair<uintptr_t, uint32_t>> only_first = {{0xd, 0}};
  EXPECT_EQ(lines, only_first);
  uintptr_t off = 0;
  EXPECT_FALSE(ParseSymbolLine(bad_number.data(), bad_number.size(), &off, nullptr));
  // Only newlines: nothing, all of it read.
  lines.clear();
  EXPECT_EQ(IndexSymbolTable("\n\n", 2, &lines), 2u);
  EXPECT_TRUE(lines.empty());
}

// A complete line whose line number is damaged is indexed by its offset but answers nothing: the
// address is symbolized again and its line appended, which answers for the next process.
TEST(SymbolizerTest, ALineWithADamagedNumberIsSymbolizedAgainAndReplaced) {
  const std::string dir = UseFreshCacheHome("xdg-damaged") + "/poolscope/symbols";
  Callee callee;
  ASSERT_NE(callee.handle, nullptr);
  const CallSiteAnswer a = AnswerCallSite(callee, dir);
  ASSERT_EQ(a.cold.function, "poolscope_callee_call_site");
  ASSERT_FALSE(a.table.empty());
  // The line number field (the third) made no number, the name edited: were the line read, the
  // frame would carry the edited name.
  std::string damaged = a.line;
  const size_t second_tab = damaged.find('\t', damaged.find('\t') + 1);
  damaged.insert(second_tab + 1, "x");
  const size_t fn = damaged.find("\tpoolscope_callee_call_site\t");
  damaged.replace(fn, strlen("\tpoolscope_callee_call_site\t"), "\tedited_in_the_table\t");
  uintptr_t off = 0;
  ASSERT_FALSE(ParseSymbolLine(damaged.data(), damaged.size(), &off, nullptr));
  ExpectAnsweredAgainAfter(a, damaged + "\n", damaged + "\n");
  unsetenv("XDG_CACHE_HOME");
}

// Two lines for one address: the later one answers (a process appends what it found after the
// lines it read).
TEST(SymbolizerTest, TheLastLineForAnAddressAnswers) {
  const std::string dir = UseFreshCacheHome("xdg-twice") + "/poolscope/symbols";
  Callee callee;
  ASSERT_NE(callee.handle, nullptr);
  const uintptr_t pc = reinterpret_cast<uintptr_t>(callee.known);
  {
    Symbolizer sym;
    ASSERT_EQ(sym.SymbolizeAddress(pc).function, "poolscope_callee_known");
  }
  std::string table;
  for (const std::string& name : FilesIn(dir)) {
    if (ReadFile(dir + "/" + name).find("\tpoolscope_callee_known\t") != std::string::npos) table = dir + "/" + name;
  }
  ASSERT_FALSE(table.empty());
  std::string text = ReadFile(table);
  std::string first = text, second = text;
  const size_t at = text.find("\tpoolscope_callee_known\t");
  first.replace(at, strlen("\tpoolscope_callee_known\t"), "\tfirst_line\t");
  second.replace(at, strlen("\tpoolscope_callee_known\t"), "\tsecond_line\t");
  FILE* f = fopen(table.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs((first + second).c_str(), f);
  fclose(f);
  {
    Symbolizer sym;
    EXPECT_EQ(sym.SymbolizeAddress(pc).function, "second_line");
  }
  unsetenv("XDG_CACHE_HOME");
}

// An object without a build id: its answers are kept by the file's identity (device, inode, size,
// times), so a file changed in place is symbolized afresh.
TEST(SymbolizerTest, AnswersForAnObjectWithoutBuildIdAreKeptByTheFilesIdentity) {
  const std::string cache = UseFreshCacheHome("xdg-nobuildid");
  const std::string dir = cache + "/poolscope/symbols";
  // A copy of its own, whose times the test may change.
  const std::string copy = cache + "-libcallee.so";
  {
    const std::string bytes = ReadFile("track/libsymbolizer_test_nobuildid.so");
    ASSERT_FALSE(bytes.empty());
    FILE* f = fopen(copy.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fwrite(bytes.data(), 1, bytes.size(), f);
    fclose(f);
  }
  void* handle = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  const uintptr_t pc = reinterpret_cast<uintptr_t>(dlsym(handle, "poolscope_callee_known"));
  ASSERT_NE(pc, 0u);
  KeptFrame cold;
  {
    Symbolizer sym;
    cold = Kept(sym.SymbolizeAddress(pc));
  }
  EXPECT_EQ(cold.function, "poolscope_callee_known");
  std::string table;
  for (const std::string& name : FilesIn(dir)) {
    if (ReadFile(dir + "/" + name).find("\tpoolscope_callee_known\t") != std::string::npos) table = name;
  }
  ASSERT_FALSE(table.empty()) << "no table holds the object's answer";
  EXPECT_EQ(table[0], 'f') << table;
  // The table answers a later symbolizer: edit the entry and read it back.
  std::string text = ReadFile(dir + "/" + table);
  const size_t at = text.find("\tpoolscope_callee_known\t");
  text.replace(at, strlen("\tpoolscope_callee_known\t"), "\tedited_in_the_table\t");
  FILE* f = fopen((dir + "/" + table).c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs(text.c_str(), f);
  fclose(f);
  {
    Symbolizer sym;
    EXPECT_EQ(sym.SymbolizeAddress(pc).function, "edited_in_the_table");
  }
  // The file changes (its modification time here): its old table no longer answers.
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, copy.c_str(), times, 0), 0);
  {
    Symbolizer sym;
    ExpectSameFrame(sym.SymbolizeAddress(pc), cold, "after the file changed");
  }
  dlclose(handle);
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
  const size_t slash = f.object.rfind('/');
  ASSERT_NE(slash, std::string_view::npos);
  EXPECT_EQ(f.function, std::string(f.object.substr(slash + 1)) + "+0x1");
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

// libdwfl's own answers, from a Dwfl of this process made here: what the symbolizer's index must give.
class ReferenceSymbols {
 public:
  ReferenceSymbols() {
    dwfl_ = dwfl_begin(&kCallbacks);
    if (dwfl_ == nullptr) return;
    dwfl_report_begin(dwfl_);
    dwfl_linux_proc_report(dwfl_, getpid());
    dwfl_report_end(dwfl_, nullptr, nullptr);
  }
  ~ReferenceSymbols() {
    if (dwfl_ != nullptr) dwfl_end(dwfl_);
  }
  bool ok() const { return dwfl_ != nullptr; }
  Dwfl_Module* ModuleOf(const void* code) { return dwfl_addrmodule(dwfl_, reinterpret_cast<uintptr_t>(code)); }
  // dwfl_module_addrname's answer demangled, or nullptr when the module has no symbol there.
  const char* Name(uintptr_t pc) {
    Dwfl_Module* mod = dwfl_addrmodule(dwfl_, pc);
    return mod != nullptr ? dwfl_module_addrname(mod, pc) : nullptr;
  }
  // Whether libdwfl's symbol at pc is a local one (a static function's, from a separate debug file's
  // .symtab): libdwfl names those or not depending on where the object was loaded, while the
  // symbolizer, which names the functions of .dynsym and the object's own .symtab, gives
  // object+offset for them.
  bool IsLocalAt(uintptr_t pc) {
    Dwfl_Module* mod = dwfl_addrmodule(dwfl_, pc);
    GElf_Sym at;
    GElf_Off offset = 0;
    return mod != nullptr && dwfl_module_addrinfo(mod, pc, &offset, &at, nullptr, nullptr, nullptr) != nullptr &&
           GELF_ST_BIND(at.st_info) == STB_LOCAL;
  }
  // Whether `name` is, like the symbol libdwfl names at pc, a name of the function there: a symbol of
  // the same module at the same address (an alias: printf and _IO_printf), version suffixes aside.
  // Which alias libdwfl picks depends on which symbol table it read (.dynsym, or the debug file's
  // .symtab when it found one), so the symbolizer must give one of them, not the same one.
  bool IsAliasAt(uintptr_t pc, std::string_view name) {
    Dwfl_Module* mod = dwfl_addrmodule(dwfl_, pc);
    if (mod == nullptr) return false;
    GElf_Sym at;
    GElf_Off offset = 0;
    if (dwfl_module_addrinfo(mod, pc, &offset, &at, nullptr, nullptr, nullptr) == nullptr) return false;
    const int n = dwfl_module_getsymtab(mod);
    for (int i = 1; i < n; ++i) {
      GElf_Sym sym;
      GElf_Addr value = 0;
      const char* alias = dwfl_module_getsym_info(mod, i, &sym, &value, nullptr, nullptr, nullptr);
      if (alias == nullptr || value != pc - offset) continue;
      std::string bare(alias);
      bare = bare.substr(0, bare.find('@'));
      if (bare == name || Demangle(bare.c_str()) == name) return true;
    }
    return false;
  }

 private:
  static char* debuginfo_path_;
  static constexpr Dwfl_Callbacks kCallbacks = {dwfl_linux_proc_find_elf, dwfl_standard_find_debuginfo, nullptr,
                                                &debuginfo_path_};
  Dwfl* dwfl_ = nullptr;
};
char* ReferenceSymbols::debuginfo_path_ = nullptr;

// Addresses that probe every symbol of `mod` accepted by `keep`: its first byte, its middle, its last
// byte and the byte after it (between two symbols, or in the next one).
template <typename Keep>
std::vector<uintptr_t> ProbesOf(Dwfl_Module* mod, Keep keep) {
  std::vector<uintptr_t> pcs;
  const int n = dwfl_module_getsymtab(mod);
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    const char* name = dwfl_module_getsym(mod, i, &sym, nullptr);
    if (name == nullptr || sym.st_shndx == SHN_UNDEF || sym.st_value == 0 || !keep(sym)) continue;
    for (uintptr_t pc : {sym.st_value, sym.st_value + sym.st_size / 2, sym.st_value + sym.st_size - 1,
                         sym.st_value + sym.st_size}) {
      if (sym.st_size != 0 || pc == sym.st_value) pcs.push_back(pc);
    }
  }
  return pcs;
}

std::string Hex(uintptr_t pc) {
  char hex[32];
  snprintf(hex, sizeof hex, "0x%" PRIxPTR, pc);
  return hex;
}

// The first byte, the middle, the last byte and the end of each code section of `mod`: addresses
// between symbols (the PLT has none) and at section bounds. Code only: under TSan, libdwfl's answers
// for a few data-section addresses (libtsan's .fini_array, the end of libstdc++'s .bss) differ from
// those it gives without TSan, for reasons not understood; return addresses are always code.
std::vector<uintptr_t> SectionProbesOf(Dwfl_Module* mod) {
  std::vector<uintptr_t> pcs;
  Dwarf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(mod, &bias);
  for (Elf_Scn* scn = elf != nullptr ? elf_nextscn(elf, nullptr) : nullptr; scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || (shdr.sh_flags & SHF_EXECINSTR) == 0) continue;
    const uintptr_t start = shdr.sh_addr + bias;
    for (uintptr_t pc : {start, start + shdr.sh_size / 2, start + shdr.sh_size - 1, start + shdr.sh_size}) {
      if (shdr.sh_size != 0 || pc == start) pcs.push_back(pc);
    }
  }
  return pcs;
}

// Every probe's function is what dwfl_module_addrname says, demangled; "object+0x..." when it says
// nothing; "0x<pc>" when dladdr finds no object there (the end of the last segment, where libdwfl's
// module, rounded to pages, still reaches). Returns how many probes had a symbol.
size_t ExpectSameNamesAsLibdwfl(ReferenceSymbols* ref, const std::vector<uintptr_t>& pcs, const char* what) {
  Symbolizer sym;
  size_t named = 0, wrong = 0;
  for (uintptr_t pc : pcs) {
    Dl_info info;
    const bool in_object = dladdr(reinterpret_cast<void*>(pc), &info) != 0;
    // Under TSan, libdwfl's reading of /proc/self/maps can make one module of the shadow memory and
    // the libraries around it: the reference is skipped where its module is not the loader's object.
    Dwarf_Addr start = 0;
    Dwfl_Module* mod = ref->ModuleOf(reinterpret_cast<void*>(pc));
    // libdwfl takes a module's extent from the file's mappings in /proc/self/maps: the part of a .bss
    // past the file's last page is an anonymous mapping, in no module of its (the loader's object
    // holds it), and it names nothing there. No reference there: skipped.
    if (in_object && mod == nullptr) continue;
    if (in_object && mod != nullptr) {
      dwfl_module_info(mod, nullptr, &start, nullptr, nullptr, nullptr, nullptr, nullptr);
      if (start != reinterpret_cast<uintptr_t>(info.dli_fbase)) continue;
    }
    const char* want = in_object ? ref->Name(pc) : nullptr;
    SymbolizedFrame f = sym.SymbolizeAddress(pc);
    named += want != nullptr;
    const bool same = !in_object        ? !f.has_symbol && f.function == Hex(pc)
                      : want != nullptr ? (f.has_symbol && (f.function == Demangle(want) || ref->IsAliasAt(pc, f.function))) ||
                                              (!f.has_symbol && ref->IsLocalAt(pc) && f.function.find("+0x") != std::string::npos)
                                        : !f.has_symbol && f.function.find("+0x") != std::string::npos;
    if (!same && ++wrong <= 10) {
      ADD_FAILURE() << what << " at 0x" << std::hex << pc << ": libdwfl says " << (want ? want : "(nothing)")
                    << ", the symbolizer " << f.function;
    }
  }
  EXPECT_EQ(wrong, 0u) << what << ": " << pcs.size() << " probes";
  return named;
}

bool IsFunction(const GElf_Sym& s) {
  return GELF_ST_TYPE(s.st_info) == STT_FUNC || GELF_ST_TYPE(s.st_info) == STT_GNU_IFUNC;
}
bool IsExportedFunction(const GElf_Sym& s) {
  return IsFunction(s) && GELF_ST_BIND(s.st_info) != STB_LOCAL &&
         GELF_ST_VISIBILITY(s.st_other) == STV_DEFAULT;
}

// Keeps the symbolizer's on-disk answers out of a test: each answer is computed here.
struct NoDiskCache {
  NoDiskCache() { setenv("XDG_CACHE_HOME", "/proc/self/no-such-dir", 1); }
  ~NoDiskCache() { unsetenv("XDG_CACHE_HOME"); }
};

TEST(SymbolizerIndexTest, EveryExportedFunctionOfLibcAndLibstdcxxAsLibdwflNamesIt) {
  NoDiskCache no_disk;
  ReferenceSymbols ref;
  ASSERT_TRUE(ref.ok());
  void* libc_fn = dlsym(RTLD_DEFAULT, "qsort_r");
  void* libstdcxx_fn = dlsym(RTLD_DEFAULT, "_ZSt9terminatev");  // std::terminate()
  ASSERT_NE(libc_fn, nullptr);
  ASSERT_NE(libstdcxx_fn, nullptr);
  for (void* fn : {libc_fn, libstdcxx_fn}) {
    Dwfl_Module* mod = ref.ModuleOf(fn);
    ASSERT_NE(mod, nullptr);
    const char* name = dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    std::vector<uintptr_t> pcs = ProbesOf(mod, IsExportedFunction);
    EXPECT_GT(pcs.size(), 4000u) << name;  // libc exports ~2900 functions, libstdc++ ~5000
    EXPECT_GT(ExpectSameNamesAsLibdwfl(&ref, pcs, name), pcs.size() / 2) << name;
    ExpectSameNamesAsLibdwfl(&ref, SectionProbesOf(mod), name);
  }
}

// The test binary keeps its .symtab: static functions, local labels and sizeless symbols (_init).
TEST(SymbolizerIndexTest, EverySymbolOfThisBinaryAsLibdwflNamesIt) {
  NoDiskCache no_disk;
  ReferenceSymbols ref;
  ASSERT_TRUE(ref.ok());
  Dwfl_Module* mod = ref.ModuleOf(reinterpret_cast<void*>(&KnownFunction));
  ASSERT_NE(mod, nullptr);
  size_t locals = 0, sizeless = 0;
  std::vector<uintptr_t> pcs = ProbesOf(mod, [&](const GElf_Sym& s) {
    locals += IsFunction(s) && GELF_ST_BIND(s.st_info) == STB_LOCAL;
    sizeless += s.st_size == 0;
    return true;
  });
  EXPECT_GT(locals, 50u) << "static functions";
  EXPECT_GT(sizeless, 0u);
  EXPECT_GT(ExpectSameNamesAsLibdwfl(&ref, pcs, "this binary"), pcs.size() / 2);
  std::vector<uintptr_t> sections = SectionProbesOf(mod);
  EXPECT_GT(sections.size(), 12u);
  ExpectSameNamesAsLibdwfl(&ref, sections, "this binary's sections");
}

TEST(SymbolizerIndexTest, AddressesInNoObjectAreUnknownAsForDladdr) {
  NoDiskCache no_disk;
  std::vector<char> heap(64);
  int on_stack = 0;
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  Symbolizer sym;
  for (uintptr_t pc : {uintptr_t{0x10}, reinterpret_cast<uintptr_t>(heap.data()), reinterpret_cast<uintptr_t>(&on_stack),
                       reinterpret_cast<uintptr_t>(page) + 100, ~uintptr_t{0} - 4096}) {
    Dl_info info;
    ASSERT_EQ(dladdr(reinterpret_cast<void*>(pc), &info), 0) << std::hex << pc;
    SymbolizedFrame f = sym.SymbolizeAddress(pc);
    EXPECT_EQ(f.function, Hex(pc));
    EXPECT_EQ(f.object, "");
    EXPECT_FALSE(f.has_symbol);
    EXPECT_EQ(f.object_offset, pc);
  }
  munmap(page, 4096);
}

// A library loaded after the symbolizer's first answer, then unloaded: the loader's view is read again
// each time it changes, so an address of the unloaded library is unknown again.
TEST(SymbolizerIndexTest, FollowsLibrariesLoadedAndUnloaded) {
  NoDiskCache no_disk;
  Symbolizer sym;
  EXPECT_TRUE(sym.SymbolizeAddress(reinterpret_cast<uintptr_t>(&KnownFunction)).has_symbol);
  // A copy under a name of its own: no other test holds it open.
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string copy = std::string(tmp != nullptr ? tmp : "/tmp") + "/libunloaded_callee.so";
  {
    const std::string bytes = ReadFile("track/libsymbolizer_test_callee.so");
    ASSERT_FALSE(bytes.empty());
    FILE* out = fopen(copy.c_str(), "w");
    ASSERT_NE(out, nullptr);
    fwrite(bytes.data(), 1, bytes.size(), out);
    fclose(out);
  }
  void* h = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  const uintptr_t known = reinterpret_cast<uintptr_t>(dlsym(h, "poolscope_callee_known"));
  ASSERT_NE(known, 0u);
  EXPECT_EQ(sym.SymbolizeAddress(known).function, "poolscope_callee_known");
  ASSERT_EQ(dlclose(h), 0);
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(known + 1), &info) != 0) GTEST_SKIP() << "the library stayed loaded";
  EXPECT_FALSE(sym.SymbolizeAddress(known + 1).has_symbol);
  EXPECT_EQ(sym.SymbolizeAddress(known + 1).object, "");
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
