// File: interpose/internal_test.cc
//
// poolscope's own mappings as the scan and the report see them: a reservation made `noted` is used (read
// as poolscope's memory, counted resident) up to what its owner noted, and no further; one made
// `pointer_free` is said to be, for the scan to leave unread.
#include "interpose/internal.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "interpose/counters.h"

namespace poolscope {
namespace {

struct Listed {
  bool found = false;
  uintptr_t end = 0, used = 0;
  bool pointer_free = false;
};

Listed Find(const void* p) {
  constexpr size_t kRoom = 4096;
  std::vector<uintptr_t> begin(kRoom), end(kRoom), used(kRoom);
  std::vector<uint8_t> pointer_free(kRoom);
  const size_t n = InternalMappings(begin.data(), end.data(), used.data(), pointer_free.data(), kRoom);
  for (size_t i = 0; i < n && i < kRoom; ++i) {
    if (begin[i] == reinterpret_cast<uintptr_t>(p)) return Listed{true, end[i], used[i], pointer_free[i] != 0};
  }
  return Listed{};
}

uint64_t Resident() {
  InternalCounters c = {};
  InternalSnapshot(&c);
  return c.resident_bytes;
}

constexpr size_t kPage = 4096;

TEST(InternalReserveTest, ANotedReservationIsUsedUpToItsLatestNote) {
  constexpr size_t kBytes = size_t{64} << 20;
  char* const p = static_cast<char*>(InternalReserve(kBytes, /*noted=*/true));
  ASSERT_NE(p, nullptr);
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  ASSERT_TRUE(Find(p).found);
  EXPECT_EQ(Find(p).end, at + kBytes);
  EXPECT_EQ(Find(p).used, at) << "nothing written before the first note";
  InternalNoteUsed(p, at + 2 * kPage);
  EXPECT_EQ(Find(p).used, at + 2 * kPage);
  InternalNoteUsed(p, at + kPage);
  EXPECT_EQ(Find(p).used, at + 2 * kPage) << "a note never moves the end back";
  InternalNoteUsed(p, at + 2 * kBytes);
  EXPECT_EQ(Find(p).used, at + kBytes) << "nor past the reservation";
}

TEST(InternalReserveTest, AReservationNotNotedIsUsedWhole) {
  constexpr size_t kBytes = size_t{4} << 20;
  char* const p = static_cast<char*>(InternalReserve(kBytes));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(Find(p).used, reinterpret_cast<uintptr_t>(p) + kBytes);
  const uint64_t before = Resident();
  memset(p + kBytes / 2, 1, kPage);
  EXPECT_EQ(Resident() - before, kPage);
}

TEST(InternalReserveTest, ResidentBytesStopAtTheNote) {
  constexpr size_t kBytes = size_t{16} << 20;
  char* const p = static_cast<char*>(InternalReserve(kBytes, /*noted=*/true));
  ASSERT_NE(p, nullptr);
  const uint64_t before = Resident();
  InternalNoteUsed(p, reinterpret_cast<uintptr_t>(p) + 3 * kPage);
  memset(p, 1, 3 * kPage);
  EXPECT_EQ(Resident() - before, 3 * kPage);
  // A page past the note is not looked at (its owner broke the promise the note makes).
  memset(p + kBytes / 2, 1, kPage);
  EXPECT_EQ(Resident() - before, 3 * kPage);
}

TEST(InternalReserveTest, PointerFreeReservationsAreSaidSoAndUsedUpToTheirNote) {
  constexpr size_t kBytes = size_t{4} << 20;
  char* const plain = static_cast<char*>(InternalReserve(kBytes, /*noted=*/true));
  char* const free_of_pointers = static_cast<char*>(InternalReserve(kBytes, /*noted=*/true, /*pointer_free=*/true));
  char* const whole = static_cast<char*>(InternalReserve(kBytes, /*noted=*/false, /*pointer_free=*/true));
  void* const mapped = InternalMap(kBytes, /*pointer_free=*/true);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(free_of_pointers, nullptr);
  ASSERT_NE(whole, nullptr);
  ASSERT_NE(mapped, nullptr);
  const uintptr_t at = reinterpret_cast<uintptr_t>(free_of_pointers);
  InternalNoteUsed(free_of_pointers, at + 5 * kPage);
  EXPECT_FALSE(Find(plain).pointer_free) << "a reservation not made pointer_free is not said to be";
  EXPECT_TRUE(Find(free_of_pointers).pointer_free);
  EXPECT_EQ(Find(free_of_pointers).used, at + 5 * kPage);
  EXPECT_TRUE(Find(whole).pointer_free);
  EXPECT_EQ(Find(whole).used, reinterpret_cast<uintptr_t>(whole) + kBytes);
  EXPECT_TRUE(Find(mapped).pointer_free);
  InternalUnmap(mapped, kBytes);
  EXPECT_FALSE(Find(mapped).found) << "unmapped, no longer poolscope's";
}

// The exit scan reads poolscope's memory in place on two threads while its own arrays are mapped and
// unmapped: the registry of mappings, which every new mapping writes to, must stay where it is (grown
// by mremap, it moved at 128 mappings, and a process whose scan crossed that number faulted on the
// page it left), and say it holds no pointer into the heap, for the scan to leave it unread.
TEST(InternalMappingsTest, TheRegistryStaysWhereItIsAndIsPointerFree) {
  constexpr size_t kRoom = 4096;
  std::vector<uintptr_t> begin(kRoom), end(kRoom), used(kRoom);
  std::vector<uint8_t> pointer_free(kRoom);
  ASSERT_GT(InternalMappings(begin.data(), end.data(), used.data(), pointer_free.data(), kRoom), 0u);
  const uintptr_t registry = begin[0];
  constexpr size_t kMappings = 600;  // past 128, 256 and 512 entries
  std::vector<void*> mapped;
  for (size_t i = 0; i < kMappings; ++i) {
    void* p = InternalMap(kPage, /*pointer_free=*/false);
    ASSERT_NE(p, nullptr);
    mapped.push_back(p);
  }
  const size_t n = InternalMappings(begin.data(), end.data(), used.data(), pointer_free.data(), kRoom);
  ASSERT_GT(n, kMappings);
  ASSERT_LE(n, kRoom);
  EXPECT_EQ(begin[0], registry) << "the registry moved";
  EXPECT_GE(end[0] - begin[0], n * 2 * sizeof(uintptr_t)) << "the first entry is the registry's own mapping";
  EXPECT_TRUE(pointer_free[0] != 0) << "the registry is read as a root";
  EXPECT_FALSE(Find(mapped[0]).pointer_free) << "the mappings it lists keep what they were made";
  for (void* p : mapped) InternalUnmap(p, kPage);
}

}  // namespace
}  // namespace poolscope
