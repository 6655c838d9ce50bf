#include "track/loaded_objects.h"

#include <gnu/libc-version.h>
#include <string.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace poolscope {
namespace track {
namespace {

// Objects with made-up dynamic sections: each names its DT_SONAME and its DT_NEEDED entries.
class Objects {
 public:
  size_t Add(const std::string& soname, const std::vector<std::string>& needed) {
    Entry e;
    e.strtab = std::string(1, '\0') + soname + '\0';
    e.dyn.push_back(ElfW(Dyn){DT_SONAME, {1}});
    for (const std::string& n : needed) {
      ElfW(Dyn) d;
      d.d_tag = DT_NEEDED;
      d.d_un.d_val = e.strtab.size();
      e.dyn.push_back(d);
      e.strtab += n + '\0';
    }
    e.dyn.push_back(ElfW(Dyn){DT_NULL, {0}});
    entries_.push_back(e);
    return entries_.size() - 1;
  }
  // Valid until the next Add.
  std::vector<LoadedObject> Build() {
    std::vector<LoadedObject> objs(entries_.size());
    for (size_t i = 0; i < entries_.size(); ++i) {
      objs[i].dynamic = entries_[i].dyn.data();
      objs[i].strtab = entries_[i].strtab.data();
      objs[i].soname = entries_[i].strtab.data() + 1;
      objs[i].begin = 0x10000 * (i + 1);
      objs[i].end = objs[i].begin + 0x8000;
    }
    return objs;
  }

 private:
  struct Entry {
    std::string strtab;
    std::vector<ElfW(Dyn)> dyn;
  };
  std::vector<Entry> entries_;
};

std::vector<std::string> OnlyFor(size_t self, std::vector<LoadedObject>& objs) {
  std::vector<uint8_t> scratch(objs.size());
  MarkLoadedOnlyFor(self, objs.data(), objs.size(), scratch.data());
  std::vector<std::string> only;
  for (const LoadedObject& o : objs) {
    if (o.only_for_poolscope) only.push_back(o.soname);
  }
  return only;
}

TEST(LoadedObjectsTest, WhatOnlyPoolscopeNeedsIsMarked) {
  Objects o;
  o.Add("prog", {"libz.so.1", "libc.so.6"});
  size_t self = o.Add("libpoolscope.so", {"libstdc++.so.6", "libdw.so.1", "libc.so.6"});
  o.Add("libz.so.1", {"libc.so.6"});
  o.Add("libc.so.6", {"ld-linux-x86-64.so.2"});
  o.Add("libstdc++.so.6", {"libm.so.6", "libc.so.6", "libgcc_s.so.1"});
  o.Add("libdw.so.1", {"libelf.so.1", "libz.so.1", "libc.so.6"});
  o.Add("libelf.so.1", {"libz.so.1", "libc.so.6"});
  o.Add("libm.so.6", {"libc.so.6"});
  o.Add("libgcc_s.so.1", {"libc.so.6"});
  o.Add("ld-linux-x86-64.so.2", {});
  std::vector<LoadedObject> objs = o.Build();
  std::vector<std::string> want = {"libstdc++.so.6", "libdw.so.1", "libelf.so.1", "libm.so.6", "libgcc_s.so.1"};
  EXPECT_EQ(OnlyFor(self, objs), want);
}

TEST(LoadedObjectsTest, AnObjectTheProgramAlsoNeedsIsTheProgramsEvenThroughAnotherObject) {
  Objects o;
  o.Add("prog", {"libplugin.so", "libc.so.6"});
  size_t self = o.Add("libpoolscope.so", {"libstdc++.so.6", "libc.so.6"});
  o.Add("libc.so.6", {});
  o.Add("libstdc++.so.6", {"libm.so.6", "libc.so.6"});
  o.Add("libplugin.so", {"libm.so.6"});
  o.Add("libm.so.6", {"libc.so.6"});
  // A dlopen'ed object nothing needs is a root of the program's too.
  o.Add("libopened.so", {"libextra.so"});
  o.Add("libextra.so", {});
  std::vector<LoadedObject> objs = o.Build();
  std::vector<std::string> want = {"libstdc++.so.6"};
  EXPECT_EQ(OnlyFor(self, objs), want);
}

TEST(LoadedObjectsTest, NeedsThroughPoolscopeItselfDoNotCount) {
  // The program links a library that needs libpoolscope.so (the client library's case): what
  // libpoolscope.so needs is still poolscope's alone.
  Objects o;
  o.Add("prog", {"libclient.so"});
  o.Add("libclient.so", {"libpoolscope.so"});
  size_t self = o.Add("libpoolscope.so", {"libdw.so.1"});
  o.Add("libdw.so.1", {});
  std::vector<LoadedObject> objs = o.Build();
  std::vector<std::string> want = {"libdw.so.1"};
  EXPECT_EQ(OnlyFor(self, objs), want);
}

TEST(LoadedObjectsTest, ObjectContainingUsesTheLoadSpans) {
  Objects o;
  o.Add("a", {});
  o.Add("b", {});
  std::vector<LoadedObject> objs = o.Build();
  EXPECT_EQ(ObjectContaining(objs.data(), objs.size(), objs[1].begin), &objs[1]);
  EXPECT_EQ(ObjectContaining(objs.data(), objs.size(), objs[0].end - 1), &objs[0]);
  EXPECT_EQ(ObjectContaining(objs.data(), objs.size(), objs[0].end), nullptr);
}

TEST(LoadedObjectsTest, ReadsThisProcess) {
  LoadedObject objs[512];
  size_t n = ReadLoadedObjects(objs, 512);
  ASSERT_GT(n, 2u);
  ASSERT_LE(n, 512u);
  EXPECT_STREQ(objs[0].path, "");  // the main program comes first
  EXPECT_NE(ObjectContaining(objs, n, reinterpret_cast<uintptr_t>(&ReadLoadedObjects)), nullptr);
  // A function only libc has: the sanitizers replace strlen and its kin with their own.
  const LoadedObject* libc = ObjectContaining(objs, n, reinterpret_cast<uintptr_t>(&gnu_get_libc_version));
  ASSERT_NE(libc, nullptr);
  EXPECT_TRUE(NamesObject(*libc, "libc.so.6")) << libc->path;
  EXPECT_STREQ(libc->soname, "libc.so.6");
  // Something loaded needs libc, by the name its soname gives.
  bool needed = false;
  for (size_t i = 0; i < n; ++i) {
    ForEachNeeded(objs[i], [&](const char* name) { needed = needed || NamesObject(*libc, name); });
  }
  EXPECT_TRUE(needed);
}

}  // namespace
}  // namespace track
}  // namespace poolscope
