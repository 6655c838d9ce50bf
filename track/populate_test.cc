#include "track/populate.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

namespace poolscope {
namespace track {
namespace {

// Which pages of [p, p + pages * 4096) are mapped in.
std::vector<bool> Resident(const char* p, size_t pages) {
  std::vector<unsigned char> vec(pages);
  EXPECT_EQ(mincore(const_cast<char*>(p), pages * kPageBytes, vec.data()), 0);
  std::vector<bool> out(pages);
  for (size_t i = 0; i < pages; ++i) out[i] = (vec[i] & 1) != 0;
  return out;
}

class PopulateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sysconf(_SC_PAGESIZE), static_cast<long>(kPageBytes));
    void* p = mmap(nullptr, kPages * kPageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    base_ = static_cast<char*>(p);
    // The advice is Linux 5.14's; without it nothing here can be checked.
    if (madvise(base_, kPageBytes, MADV_POPULATE_WRITE) != 0) GTEST_SKIP() << "no MADV_POPULATE_WRITE";
    munmap(base_, kPages * kPageBytes);
    base_ = static_cast<char*>(mmap(nullptr, kPages * kPageBytes, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    ASSERT_NE(base_, MAP_FAILED);
  }
  void TearDown() override {
    if (base_ != nullptr && base_ != MAP_FAILED) munmap(base_, kPages * kPageBytes);
  }
  uintptr_t At(size_t page) const { return reinterpret_cast<uintptr_t>(base_) + page * kPageBytes; }
  static constexpr size_t kPages = 64;
  char* base_ = nullptr;
};

TEST_F(PopulateTest, RangeFaultsInItsWholePagesAndNoneBeyondTheLimit) {
  PopulateRange(At(2) + 100, At(5) + 1, At(64));  // pages 2 to 5
  PopulateRange(At(10), At(20), At(12));          // pages 10 and 11 only
  const std::vector<bool> r = Resident(base_, kPages);
  for (size_t i = 0; i < kPages; ++i) {
    const bool want = (i >= 2 && i <= 5) || i == 10 || i == 11;
    EXPECT_EQ(r[i], want) << "page " << i;
  }
}

TEST_F(PopulateTest, AheadFaultsInPastTheEndInBatches) {
  uintptr_t done = At(0);
  done = PopulateAhead(done, At(0), At(0) + 100, At(kPages), 8 * kPageBytes);
  EXPECT_EQ(done, At(9)) << "the end's page and 8 pages ahead";
  // Inside what is faulted in already: nothing more.
  EXPECT_EQ(PopulateAhead(done, At(8), At(8) + 10, At(kPages), 8 * kPageBytes), done);
  std::vector<bool> r = Resident(base_, kPages);
  for (size_t i = 0; i < kPages; ++i) EXPECT_EQ(r[i], i < 9) << "page " << i;
  // Past it: from where it stopped, and never past the limit.
  done = PopulateAhead(done, At(9), At(9) + 1, At(12), 8 * kPageBytes);
  EXPECT_EQ(done, At(12));
  r = Resident(base_, kPages);
  for (size_t i = 0; i < kPages; ++i) EXPECT_EQ(r[i], i < 12) << "page " << i;
}

// Writes that jumped ahead (the heap's end, past blocks written otherwise): from the writes' page, not
// from where the last batch stopped.
TEST_F(PopulateTest, AheadStartsAtTheWritesWhenTheyJumpedPastTheLastBatch) {
  uintptr_t done = PopulateAhead(At(0), At(0), At(0) + 8, At(kPages), 2 * kPageBytes);
  EXPECT_EQ(done, At(3));
  done = PopulateAhead(done, At(20) + 16, At(20) + 24, At(kPages), 2 * kPageBytes);
  EXPECT_EQ(done, At(23));
  const std::vector<bool> r = Resident(base_, kPages);
  for (size_t i = 0; i < kPages; ++i) EXPECT_EQ(r[i], i < 3 || (i >= 20 && i < 23)) << "page " << i;
}

}  // namespace
}  // namespace track
}  // namespace poolscope
