#include <dlfcn.h>
#include <gtest/gtest.h>

namespace {

TEST(SharedObjectTest, TrackLibrariesWorkFromADlopenedSharedObject) {
  void* h = dlopen("track/libtrack_link_check.so", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto check = reinterpret_cast<int (*)()>(dlsym(h, "poolscope_track_link_check"));
  ASSERT_NE(check, nullptr);
  EXPECT_EQ(check(), 0);
}

}  // namespace
