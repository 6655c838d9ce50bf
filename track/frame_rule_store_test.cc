// File: track/frame_rule_store_test.cc
//
// The frame rules' store: what one process writes at exit, the next reads instead of computing, and
// every rule read is the rule the CFI gives.
#include "track/frame_rule_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "track/frame_rules.h"

namespace poolscope {
namespace track {
namespace {

__attribute__((noinline)) int Local(int x) { return x * 3 + 1; }

// Addresses inside functions of libc and of this program (prologues included, where rules change),
// each once.
std::vector<uintptr_t> SomePcs() {
  const uintptr_t functions[] = {
      reinterpret_cast<uintptr_t>(&qsort),  reinterpret_cast<uintptr_t>(&snprintf),
      reinterpret_cast<uintptr_t>(&strtod), reinterpret_cast<uintptr_t>(&opendir),
      reinterpret_cast<uintptr_t>(&Local),  reinterpret_cast<uintptr_t>(&SomePcs),
  };
  std::vector<uintptr_t> pcs;
  for (uintptr_t f : functions) {
    for (uintptr_t k = 0; k < 48; k += 3) pcs.push_back(f + k);
  }
  std::sort(pcs.begin(), pcs.end());
  pcs.erase(std::unique(pcs.begin(), pcs.end()), pcs.end());
  return pcs;
}

class FrameRuleStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/frame_rule_store_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    dir_ = base_ + "/cache/frames";  // made by the first save
    NewProcess();
  }
  void TearDown() override {
    frame_rule_store_internal::ResetForTest();
    for (const std::string& f : Files()) unlink(f.c_str());
    rmdir(dir_.c_str());
    rmdir((base_ + "/cache").c_str());
    rmdir(base_.c_str());
  }
  // What a new process starts with: no rule cached, the store opened over the loaded objects.
  void NewProcess() {
    frame_rule_store_internal::ResetForTest();
    InvalidateFrameRules();
    OpenFrameRuleStore(dir_.c_str());
  }
  std::vector<std::string> Files() const {
    std::vector<std::string> out;
    if (DIR* d = opendir(dir_.c_str())) {
      while (struct dirent* e = readdir(d)) {
        if (e->d_name[0] != '.') out.push_back(dir_ + "/" + e->d_name);
      }
      closedir(d);
    }
    return out;
  }
  std::string base_, dir_;
};

TEST_F(FrameRuleStoreTest, TheNextProcessReadsTheRulesInsteadOfComputingThem) {
  const std::vector<uintptr_t> pcs = SomePcs();
  std::map<uintptr_t, FrameRule> first;
  for (uintptr_t pc : pcs) first[pc] = LookupFrameRule(pc);
  EXPECT_EQ(FrameRulesFromStore(), 0u) << "nothing stored yet";
  EXPECT_GE(SaveFrameRuleStore(), 2) << "libc's file and this program's";
  EXPECT_GE(Files().size(), 2u);

  NewProcess();
  const uint64_t computed = FrameRulesComputed();
  for (uintptr_t pc : pcs) {
    EXPECT_EQ(LookupFrameRule(pc), first[pc]) << std::hex << pc;
    EXPECT_EQ(first[pc], frame_rules_internal::InterpretFrameRule(pc)) << std::hex << pc;
  }
  EXPECT_EQ(FrameRulesComputed(), computed) << "every rule came from the store";
  EXPECT_EQ(FrameRulesFromStore(), pcs.size());
  EXPECT_GE(FrameRuleFilesRead(), 2);
  EXPECT_EQ(SaveFrameRuleStore(), 0) << "nothing new to write";
}

// A file is rewritten when the rules it lacks are at least one, and one for each 512 it holds. Beside
// a small file one new rule is written at once: a program that needs it in every run computes it in
// the first only.
TEST_F(FrameRuleStoreTest, OneNewRuleBesideASmallFileIsWritten) {
  const std::vector<uintptr_t> pcs = SomePcs();
  for (uintptr_t pc : pcs) LookupFrameRule(pc);
  ASSERT_GE(SaveFrameRuleStore(), 2);

  NewProcess();
  for (uintptr_t pc : pcs) LookupFrameRule(pc);
  const uintptr_t fresh = reinterpret_cast<uintptr_t>(&strtoul);
  const FrameRule rule = LookupFrameRule(fresh);
  EXPECT_EQ(SaveFrameRuleStore(), 1) << "strtoul's object's file (libc's, or a sanitizer runtime's), with the one rule more";

  NewProcess();
  const uint64_t computed = FrameRulesComputed();
  EXPECT_EQ(LookupFrameRule(fresh), rule);
  EXPECT_EQ(FrameRulesComputed(), computed) << "the new rule came from the rewritten file";
  EXPECT_EQ(SaveFrameRuleStore(), 0) << "nothing new to write";
}

// The main program's code: its first executable segment (pcs of one object, whichever of libc's
// functions a sanitizer's runtime intercepts).
struct Text {
  uintptr_t lo = 0, hi = 0;
};
int FirstText(struct dl_phdr_info* info, size_t, void* arg) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) != 0) {
      *static_cast<Text*>(arg) = Text{info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz};
      break;
    }
  }
  return 1;  // the main program comes first
}

// Beside a file of more than 512 rules, one new rule waits for more (a rewrite costs in proportion to
// the file); enough of them are written, and the next process reads them.
TEST_F(FrameRuleStoreTest, AFewNewRulesBesideALargeFileWaitForMore) {
  Text text;
  dl_iterate_phdr(FirstText, &text);
  ASSERT_GT(text.hi, text.lo + 2048) << "the program's code";
  std::vector<uintptr_t> pcs;
  for (uintptr_t k = 0; k < 1280; ++k) pcs.push_back(text.lo + k);
  for (uintptr_t pc : pcs) LookupFrameRule(pc);
  ASSERT_GE(SaveFrameRuleStore(), 1);

  NewProcess();
  for (uintptr_t pc : pcs) LookupFrameRule(pc);
  const uintptr_t fresh = text.lo + 1280;
  LookupFrameRule(fresh);
  EXPECT_EQ(SaveFrameRuleStore(), 0) << "one rule is less than one for each 512 of the program's 1,280";
  for (uintptr_t k = 1; k < 48; ++k) LookupFrameRule(fresh + k);
  EXPECT_EQ(SaveFrameRuleStore(), 1) << "the program's file, with 48 more";

  NewProcess();
  const uint64_t computed = FrameRulesComputed();
  for (uintptr_t k = 0; k < 48; ++k) {
    EXPECT_EQ(LookupFrameRule(fresh + k), frame_rules_internal::InterpretFrameRule(fresh + k)) << k;
  }
  EXPECT_EQ(FrameRulesComputed(), computed) << "the new rules came from the rewritten file";
}

TEST_F(FrameRuleStoreTest, AFileThatFailsItsChecksumIsNotRead) {
  const std::vector<uintptr_t> pcs = SomePcs();
  for (uintptr_t pc : pcs) LookupFrameRule(pc);
  ASSERT_GE(SaveFrameRuleStore(), 2);
  for (const std::string& f : Files()) {  // one byte of the slots changed
    const int fd = open(f.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char c = 0;
    ASSERT_EQ(pread(fd, &c, 1, 40), 1);
    c ^= 0x10;
    ASSERT_EQ(pwrite(fd, &c, 1, 40), 1);
    close(fd);
  }
  NewProcess();
  const uint64_t computed = FrameRulesComputed();
  for (uintptr_t pc : pcs) EXPECT_EQ(LookupFrameRule(pc), frame_rules_internal::InterpretFrameRule(pc));
  EXPECT_EQ(FrameRuleFilesRead(), 0);
  EXPECT_EQ(FrameRulesFromStore(), 0u);
  EXPECT_GT(FrameRulesComputed(), computed);
  EXPECT_GE(SaveFrameRuleStore(), 2) << "the damaged files are replaced";
  NewProcess();
  for (uintptr_t pc : pcs) LookupFrameRule(pc);
  EXPECT_EQ(FrameRulesFromStore(), pcs.size()) << "read again once rewritten";
}

TEST_F(FrameRuleStoreTest, ADirectoryThatCannotBeMadeChangesNothingButTheTime) {
  frame_rule_store_internal::ResetForTest();
  InvalidateFrameRules();
  const std::string blocked = base_ + "/file";
  FILE* f = fopen(blocked.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  OpenFrameRuleStore((blocked + "/frames").c_str());  // a path under a regular file
  for (uintptr_t pc : SomePcs()) EXPECT_EQ(LookupFrameRule(pc), frame_rules_internal::InterpretFrameRule(pc));
  EXPECT_EQ(SaveFrameRuleStore(), 0);
  unlink(blocked.c_str());
}

}  // namespace
}  // namespace track
}  // namespace poolscope
