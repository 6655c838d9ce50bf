// File: interpose/internal.cc
//
// mmap-backed memory for poolscope's own needs; see internal.h.
#include "interpose/internal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "interpose/counters.h"
#include "track/populate.h"

namespace poolscope {
namespace {

constexpr int kMinClassShift = 6;   // 64 B
constexpr int kMaxClassShift = 16;  // kInternalListedMax
static_assert(size_t{1} << kMaxClassShift == kInternalListedMax, "the largest listed class");
constexpr size_t kChunk = size_t{1} << 20;

struct FreeNode {
  FreeNode* next;
};

SpinLock g_lock;
FreeNode* g_free[kMaxClassShift + 1];
char* g_bump = nullptr;
char* g_bump_end = nullptr;
std::atomic<uint64_t> g_mmaps{0}, g_munmaps{0}, g_mapped{0};

// The registry of the mappings made here: an array of ranges in a reservation of its own, its pages
// touched as it fills, which never moves (the exit scan reads poolscope's memory where it lies, on two
// threads, while the scan's own arrays come and go: a registry grown by mremap left the page it had
// been on unmapped under the other thread's read). Its own mapping is the array's first entry,
// pointer_free: it holds poolscope's own addresses only. Taken after g_lock, never before it.
struct Range {
  uintptr_t begin, end;
  uintptr_t used;  // [begin, used) may have been written (InternalNoteUsed); end unless noted
  bool pointer_free;  // InternalReserve's promise: never a pointer into the heap
};
constexpr size_t kRegistryBytes = size_t{1} << 20;  // 32,768 mappings; the kernel's limit is 65,530
SpinLock g_ranges_lock;
Range* g_ranges = nullptr;
size_t g_nranges = 0;
size_t g_ranges_capacity = 0;  // entries

size_t PageRound(size_t n) { return (n + 4095) & ~size_t{4095}; }

void AddRange(void* p, size_t bytes, bool noted = false, bool pointer_free = false) {
  SpinLockHolder h(&g_ranges_lock);
  if (g_ranges == nullptr) {
    void* q = mmap(nullptr, kRegistryBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (q == MAP_FAILED) return;  // the scan then sees this mapping as the program's
    madvise(q, kRegistryBytes, MADV_NOHUGEPAGE);  // a page at a time, never 2 MiB at once
    g_ranges = static_cast<Range*>(q);
    g_ranges_capacity = kRegistryBytes / sizeof(Range);
    const uintptr_t at = reinterpret_cast<uintptr_t>(q);
    g_ranges[0] = {at, at + kRegistryBytes, at + kRegistryBytes, true};
    g_nranges = 1;
  }
  if (g_nranges == g_ranges_capacity) return;  // as above
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  g_ranges[g_nranges++] = {at, at + bytes, noted ? at : at + bytes, pointer_free};
}

void RemoveRange(void* p) {
  SpinLockHolder h(&g_ranges_lock);
  for (size_t i = 1; i < g_nranges; ++i) {
    if (g_ranges[i].begin == reinterpret_cast<uintptr_t>(p)) {
      g_ranges[i] = g_ranges[--g_nranges];
      return;
    }
  }
}

// Resident bytes of the mappings in the registry: mincore, a batch of pages at a time, into a buffer
// kept here (g_ranges_lock is held): a report may be written on a small thread stack, and a batch of
// 64 MiB makes one call of each of poolscope's reservations.
POOLSCOPE_LARGE_BSS unsigned char g_resident_vec[16384];
uint64_t ResidentLocked() {
  constexpr size_t kBatch = sizeof g_resident_vec;
  unsigned char* const vec = g_resident_vec;
  uint64_t resident = 0;
  for (size_t i = 0; i < g_nranges; ++i) {
    const uintptr_t end = (g_ranges[i].used + 4095) & ~uintptr_t{4095};
    for (uintptr_t at = g_ranges[i].begin; at < end;) {
      const size_t pages = (end - at) / 4096 < kBatch ? (end - at) / 4096 : kBatch;
      if (mincore(reinterpret_cast<void*>(at), pages * 4096, vec) == 0) {
        for (size_t k = 0; k < pages; ++k) resident += (vec[k] & 1) * uint64_t{4096};
      }
      at += pages * 4096;
    }
  }
  return resident;
}

std::atomic<uint64_t> g_peak_resident{0};

uint64_t SampleResident() {
  uint64_t now;
  {
    SpinLockHolder h(&g_ranges_lock);
    now = ResidentLocked();
  }
  uint64_t peak = g_peak_resident.load(std::memory_order_relaxed);
  while (now > peak && !g_peak_resident.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return now;
}

void* Map(size_t bytes, bool noreserve, bool noted = false, bool pointer_free = false) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | (noreserve ? MAP_NORESERVE : 0);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  g_mmaps.fetch_add(1, std::memory_order_relaxed);
  g_mapped.fetch_add(bytes, std::memory_order_relaxed);
  AddRange(p, bytes, noted, pointer_free);
  return p;
}

int ClassOf(size_t bytes) {
  int c = kMinClassShift;
  while ((size_t{1} << c) < bytes) ++c;
  return c;
}

}  // namespace

void* InternalAlloc(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes > (size_t{1} << kMaxClassShift)) return Map(PageRound(bytes), false);
  int c = ClassOf(bytes);
  size_t size = size_t{1} << c;
  SpinLockHolder h(&g_lock);
  if (FreeNode* n = g_free[c]) {
    g_free[c] = n->next;
    memset(n, 0, size);
    return n;
  }
  if (g_bump == nullptr || static_cast<size_t>(g_bump_end - g_bump) < size) {
    char* chunk = static_cast<char*>(Map(kChunk, false));
    if (chunk == nullptr) return nullptr;
    g_bump = chunk;
    g_bump_end = chunk + kChunk;
  }
  void* p = g_bump;  // sizes are powers of two >= 64 carved from a 1 MiB chunk: naturally aligned
  g_bump += size;
  return p;
}

void InternalFree(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes == 0) bytes = 1;
  if (bytes > (size_t{1} << kMaxClassShift)) {
    InternalUnmap(p, bytes);
    return;
  }
  int c = ClassOf(bytes);
  SpinLockHolder h(&g_lock);
  FreeNode* n = static_cast<FreeNode*>(p);
  n->next = g_free[c];
  g_free[c] = n;
}

void* InternalMap(size_t bytes, bool pointer_free) { return Map(PageRound(bytes), false, false, pointer_free); }

void InternalUnmap(void* p, size_t bytes) {
  if (p == nullptr) return;
  // The peak includes what is about to go, when it could move the peak by a MiB or more (a sample
  // walks every mapping with mincore: not for each small one).
  if (bytes >= (size_t{1} << 20)) SampleResident();
  RemoveRange(p);
  munmap(p, PageRound(bytes));
  g_munmaps.fetch_add(1, std::memory_order_relaxed);
  g_mapped.fetch_sub(PageRound(bytes), std::memory_order_relaxed);
}

void* InternalReserve(size_t bytes, bool noted, bool pointer_free) {
  return Map(PageRound(bytes), true, noted, pointer_free);
}

void InternalNoteUsed(const void* reservation, uintptr_t used_end) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(reservation);
  SpinLockHolder h(&g_ranges_lock);
  for (size_t i = 1; i < g_nranges; ++i) {
    Range& r = g_ranges[i];
    if (r.begin != at) continue;
    if (used_end > r.end) used_end = r.end;
    if (used_end > r.used) r.used = used_end;
    return;
  }
}

void* InternalRealloc(void* p, size_t old_bytes, size_t new_bytes) {
  if (p == nullptr) return InternalAlloc(new_bytes);
  void* q = mremap(p, PageRound(old_bytes), PageRound(new_bytes), MREMAP_MAYMOVE);
  if (q == MAP_FAILED) return nullptr;
  RemoveRange(p);
  AddRange(q, PageRound(new_bytes));
  g_mapped.fetch_add(PageRound(new_bytes) - PageRound(old_bytes), std::memory_order_relaxed);
  return q;
}

size_t InternalMappings(uintptr_t* begin, uintptr_t* end, uintptr_t* used, uint8_t* pointer_free, size_t max) {
  SpinLockHolder h(&g_ranges_lock);
  for (size_t i = 0; i < g_nranges && i < max; ++i) {
    begin[i] = g_ranges[i].begin;
    end[i] = g_ranges[i].end;
    used[i] = g_ranges[i].used;
    pointer_free[i] = g_ranges[i].pointer_free ? 1 : 0;
  }
  return g_nranges;
}

bool InternalContains(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  SpinLockHolder h(&g_ranges_lock);
  for (size_t i = 0; i < g_nranges; ++i) {
    if (a >= g_ranges[i].begin && a < g_ranges[i].end) return true;
  }
  return false;
}

void InternalForkPrepare() {
  g_lock.Lock();
  g_ranges_lock.Lock();
}
void InternalForkParent() {
  g_ranges_lock.Unlock();
  g_lock.Unlock();
}
void InternalForkChild() {
  g_ranges_lock.Reset();
  g_lock.Reset();
}

void InternalSnapshot(InternalCounters* out) {
  out->resident_bytes = SampleResident();
  out->peak_resident_bytes = g_peak_resident.load(std::memory_order_relaxed);
  out->nmmaps = g_mmaps.load(std::memory_order_relaxed);
  out->nmunmaps = g_munmaps.load(std::memory_order_relaxed);
  out->mapped_bytes = g_mapped.load(std::memory_order_relaxed);
}

bool ReadSelfStatus(char* buf, size_t size) {
  const int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t n = 0;
  while (n < size - 1) {
    const ssize_t k = read(fd, buf + n, size - 1 - n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    n += static_cast<size_t>(k);
  }
  close(fd);
  buf[n] = '\0';
  return true;
}

void RawWrite(int fd, const char* s, size_t n) {
  int saved = errno;
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    s += w;
    n -= static_cast<size_t>(w);
  }
  errno = saved;
}

void RawLine(const char* line) {
  char buf[2048];
  size_t n = strlen(line);
  if (n > sizeof buf - 1) n = sizeof buf - 1;
  memcpy(buf, line, n);
  buf[n] = '\n';
  RawWrite(2, buf, n + 1);
}

}  // namespace poolscope
