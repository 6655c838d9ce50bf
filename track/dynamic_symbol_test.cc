#include "track/dynamic_symbol.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace poolscope {
namespace track {
namespace {

struct Query {
  const char* name;
  uintptr_t at;
  bool seen;          // an object holds `at`
  const ElfW(Sym)* found;
};

int Ask(struct dl_phdr_info* info, size_t, void* arg) {
  auto* q = static_cast<Query*>(arg);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && q->at >= lo && q->at < lo + ph.p_memsz) {
      q->seen = true;
      q->found = FindDynamicSymbol(info, q->name, q->at);
      return 1;
    }
  }
  return 0;
}

// libc's functions by name, as dladdr1 finds them: the same address and size.
TEST(DynamicSymbolTest, FindsWhatDladdrFinds) {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  for (const char* name : {"exit", "malloc", "qsort", "strtod", "snprintf", "opendir", "pthread_create"}) {
    void* fn = dlsym(libc, name);
    ASSERT_NE(fn, nullptr) << name;
    Dl_info info;
    void* sym = nullptr;
    ASSERT_NE(dladdr1(fn, &info, &sym, RTLD_DL_SYMENT), 0) << name;
    ASSERT_NE(sym, nullptr) << name;
    Query q{name, reinterpret_cast<uintptr_t>(fn), false, nullptr};
    dl_iterate_phdr(Ask, &q);
    ASSERT_TRUE(q.seen) << name;
    ASSERT_NE(q.found, nullptr) << name;
    // The same code (a function exported under two versions has two entries, either may answer).
    const auto* want = static_cast<const ElfW(Sym)*>(sym);
    EXPECT_EQ(q.found->st_value, want->st_value) << name;
    EXPECT_EQ(q.found->st_size, want->st_size) << name;
    EXPECT_GT(q.found->st_size, 0u) << name;
  }
  dlclose(libc);
}

// A name at another symbol's address, or a name the object does not define, is no answer.
TEST(DynamicSymbolTest, NameAndAddressMustBothMatch) {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  Query q{"exit", reinterpret_cast<uintptr_t>(dlsym(libc, "malloc")), false, nullptr};
  dl_iterate_phdr(Ask, &q);
  ASSERT_TRUE(q.seen);
  EXPECT_EQ(q.found, nullptr);
  Query none{"poolscope_no_such_symbol", reinterpret_cast<uintptr_t>(dlsym(libc, "malloc")), false, nullptr};
  dl_iterate_phdr(Ask, &none);
  ASSERT_TRUE(none.seen);
  EXPECT_EQ(none.found, nullptr);
  dlclose(libc);
}

}  // namespace
}  // namespace track
}  // namespace poolscope
