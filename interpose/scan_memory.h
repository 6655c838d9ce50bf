// File: interpose/scan_memory.h
//
// The exit reachability scan's own memory and readers (leak_scan.cc): scratch mappings that the scan
// keeps out of every view's roots, growable arrays over them, and the readers that read memory as a
// detector below poolscope reads it.
//
// Thread-safety: InternalScratch may be used by the scan's two threads at once; an Array and a reader
// belong to one thread (a reader that only reads, such as OwnInPlaceReader over a thread-safe base,
// may be shared).
#ifndef POOLSCOPE_INTERPOSE_SCAN_MEMORY_H_
#define POOLSCOPE_INTERPOSE_SCAN_MEMORY_H_

#include <sys/mman.h>
#include <time.h>

#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "interpose/internal.h"
#include "track/proc_maps.h"
#include "track/reachability.h"
#include "track/sorted_search.h"

namespace poolscope {
namespace scan {

using track::RootRange;

// The scan's own memory holds every block's address: it is poolscope's, so out of the program's roots,
// and it does not exist when a detector below poolscope looks, so out of the detector's roots too.
// Every mapping it makes is listed here while it lives. A request of the smallest room (kMinRoom, most
// of a small process's arrays) is a room of one slab mapping, kSlabRooms rooms carved from one
// reservation: a small process's scan makes and gives back a few dozen arrays, and a mapping, its
// listing and an unmapping each (a TLB flush each) cost more than the scan's work on their elements.
// A room given back is the next request's; the slab goes at ReleaseIdle once none of its rooms is in
// use. Larger requests, and small ones once the slab is full, are mappings of their own. Memory it
// hands out is not zeroed.
class InternalScratch : public track::ScratchMemory {
 public:
  void* Map(size_t bytes) override { return MapWith(bytes, true); }
  void* MapSparse(size_t bytes) override { return MapWith(bytes, false); }
  void Unmap(void* p, size_t bytes) override {
    {
      SpinLockHolder h(&lock_);
      if (const int room = SlabRoomLocked(p); room >= 0) {
        // Listed still, as part of the slab: it holds what the array held until written over.
        slab_used_ &= ~(uint64_t{1} << room);
        return;
      }
      UnlistLocked(p);
    }
    InternalFree(p, Round(bytes));
  }
  // Gives back the slab when none of its rooms is in use (the scan is over, or an array of it outlives
  // the scan and has gone since).
  void ReleaseIdle() {
    void* slab = nullptr;
    {
      SpinLockHolder h(&lock_);
      if (slab_ == nullptr || slab_used_ != 0) return;
      slab = slab_;
      slab_ = nullptr;
      UnlistLocked(slab);
    }
    InternalFree(slab, kSlabBytes);
  }
  // Grows a mapping made by Map (within its room, or by mremap without copying; a slab room is copied
  // to a mapping of its own); nullptr (the old one intact) on failure.
  void* Grow(void* p, size_t old_bytes, size_t new_bytes) {
    // Within the mapping's room no system call but the fault-in: a small array's first sizes are all
    // of the same room (Round).
    if (Round(new_bytes) == Round(old_bytes)) {
      Populate(p, PageRound(old_bytes), PageRound(new_bytes));
      return p;
    }
    bool in_slab;
    {
      SpinLockHolder h(&lock_);
      in_slab = SlabRoomLocked(p) >= 0;
    }
    if (in_slab) {
      void* q = MapWith(new_bytes, true);
      if (q == nullptr) return nullptr;
      memcpy(q, p, old_bytes);
      Unmap(p, old_bytes);
      return q;
    }
    void* q = InternalRealloc(p, Round(old_bytes), Round(new_bytes));
    if (q == nullptr) return nullptr;
    Populate(q, PageRound(old_bytes), PageRound(new_bytes));
    SpinLockHolder h(&lock_);
    for (RootRange& r : live_) {
      if (r.begin == reinterpret_cast<uintptr_t>(p)) {
        r = RootRange{reinterpret_cast<uintptr_t>(q), reinterpret_cast<uintptr_t>(q) + Round(new_bytes)};
      }
    }
    return q;
  }
  // Faults in [p, p + bytes) of a mapping made here (pages already in memory stay as they are).
  static void FaultIn(void* p, size_t bytes) {
    if (p != nullptr) Populate(p, 0, PageRound(bytes));
  }
  // Asks for 2 MiB pages for a mapping made here, whole (as Populate does for what it faults in), so
  // that faulting its parts in apart leaves it one mapping, which can grow.
  static void PreferHugePages(void* p, size_t bytes) {
    if (p != nullptr && bytes >= kHuge && RUNNING_ON_VALGRIND == 0) madvise(p, PageRound(bytes), MADV_HUGEPAGE);
  }
  // Its mappings now (every one it made: a request the list has no room for fails).
  template <typename F>
  void ForEachLive(F&& fn) {
    RootRange copy[kRoom];
    {
      SpinLockHolder h(&lock_);
      memcpy(copy, live_, sizeof copy);
    }
    for (const RootRange& r : copy) {  // fn may map: not under the lock
      if (r.begin != 0) fn(r);
    }
  }

 private:
  // Takes the mapping at p off the list (lock_ held).
  void UnlistLocked(void* p) {
    for (RootRange& r : live_) {
      if (r.begin == reinterpret_cast<uintptr_t>(p)) r = RootRange{0, 0};
    }
  }
  // Lists the mapping at p; false when the list is full.
  bool ListLocked(void* p, size_t bytes) {
    for (RootRange& r : live_) {
      if (r.begin == 0) {
        r = RootRange{reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + bytes};
        return true;
      }
    }
    return false;
  }
  // The slab room that starts at p, or -1 (lock_ held).
  int SlabRoomLocked(const void* p) const {
    const uintptr_t off = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(slab_);
    if (slab_ == nullptr || off >= kSlabBytes || off % kMinRoom != 0) return -1;
    return static_cast<int>(off / kMinRoom);
  }
  // A free room of the slab, which is mapped on first use; nullptr when it is full or cannot be mapped
  // (lock_ held: the other thread spins through one mmap at most).
  void* SlabRoomTakeLocked() {
    if (slab_ == nullptr) {
      if (slab_failed_) return nullptr;
      slab_ = static_cast<char*>(InternalAlloc(kSlabBytes));
      if (slab_ == nullptr) {
        slab_failed_ = true;  // mappings of their own from now on
        return nullptr;
      }
      // Its rooms are faulted in a few pages at a time: never 2 MiB at once (transparent huge pages
      // in "always" mode).
      madvise(slab_, kSlabBytes, MADV_NOHUGEPAGE);
      slab_used_ = 0;
      if (!ListLocked(slab_, kSlabBytes)) {
        InternalFree(slab_, kSlabBytes);
        slab_ = nullptr;
        slab_failed_ = true;
        return nullptr;
      }
    }
    if (slab_used_ == kAllRooms) return nullptr;
    const int room = __builtin_ctzll(~slab_used_);
    slab_used_ |= uint64_t{1} << room;
    return slab_ + size_t(room) * kMinRoom;
  }
  void* MapWith(size_t bytes, bool populate) {
    void* p = nullptr;
    if (Round(bytes) == kMinRoom) {
      SpinLockHolder h(&lock_);
      p = SlabRoomTakeLocked();
    }
    if (p == nullptr) {
      p = InternalAlloc(Round(bytes));
      if (p == nullptr) return nullptr;
      bool listed;
      {
        SpinLockHolder h(&lock_);
        listed = ListLocked(p, Round(bytes));
      }
      if (!listed) {  // not made: the roots would take it for poolscope's memory, which may go meanwhile
        InternalFree(p, Round(bytes));
        return nullptr;
      }
    }
    if (populate) Populate(p, 0, PageRound(bytes));
    return p;
  }
  SpinLock lock_;  // the scan's two threads map and unmap at once
  static constexpr size_t kRoom = 256;
  RootRange live_[kRoom] = {};
  // Above InternalAlloc's size classes, so that every request is a mapping (or a slab room) of its
  // own, page-aligned; only the pages asked for are faulted in (PageRound), the rest of the room as
  // the array grows.
  // Faults [p + from, p + to) in with one call: the scan writes nearly all of what it asks for, and a
  // fault a page costs more than the scan's own work on that page. Without MADV_POPULATE_WRITE
  // (before Linux 5.14), or under valgrind, the pages fault in as they are touched.
  static void Populate(void* p, size_t from, size_t to) {
    if (to <= from || RUNNING_ON_VALGRIND != 0) return;
    // Large arrays in 2 MiB pages where the kernel allows it (transparent huge pages in "madvise"
    // mode): a few faults instead of one per 4 KiB.
    // The whole mapping alike: a mapping split in two by its flags could no longer grow (mremap).
    if (to >= kHuge) madvise(p, to, MADV_HUGEPAGE);
    madvise(static_cast<char*>(p) + from, to - from, MADV_POPULATE_WRITE);
  }
  static constexpr size_t kHuge = size_t{4} << 20;
  static size_t PageRound(size_t bytes) { return (bytes + 4095) & ~size_t{4095}; }
  static constexpr size_t kMinRoom = 128 * 1024;
  static size_t Round(size_t bytes) { return std::max<size_t>(PageRound(bytes), kMinRoom); }
  // A small process's exit scan has about 40 arrays of the smallest room at once (as 39, cc1 42).
  static constexpr int kSlabRooms = 64;
  static constexpr size_t kSlabBytes = kSlabRooms * kMinRoom;
  static constexpr uint64_t kAllRooms = ~uint64_t{0};
  char* slab_ = nullptr;
  uint64_t slab_used_ = 0;  // a bit per room handed out
  bool slab_failed_ = false;
};

// A growable array in scratch memory.
template <typename T>
class Array {
 public:
  // A sparse array is room of which only a part may be written: its first mapping is not faulted in
  // ahead (InternalScratch::MapSparse).
  explicit Array(InternalScratch& m, bool sparse = false) : m_(m), sparse_(sparse) {}
  ~Array() { Free(); }
  bool Push(const T& v) {
    if (n_ == cap_ && !Grow(cap_ == 0 ? kFirstCapacity : 2 * cap_)) return false;
    p_[n_++] = v;
    return true;
  }
  // Grows to n elements (new ones unset); false when there is no memory. A first size is taken as it
  // is (an array filled once), but never below a page; growth doubles. (A first room of 4,096
  // elements faulted in 64 KiB for each array of a few ranges: 1.1 MB at the exit of `ls`.)
  bool Resize(size_t n) {
    if (n > cap_) {
      size_t cap = cap_ == 0 ? std::max<size_t>(n, kFirstCapacity) : cap_;
      while (cap < n) cap *= 2;
      if (!Grow(cap)) return false;
    }
    n_ = n;
    return true;
  }
  // Room for at least n elements (faulted in, unless the array is sparse); false when there is none.
  bool Reserve(size_t n) { return n <= cap_ || Grow(n); }
  // Faults in whatever of the room is not yet (a sparse array about to be filled).
  void FaultIn() { InternalScratch::FaultIn(p_, cap_ * sizeof(T)); }
  // Gives the memory back now (borrowed room is only let go).
  void Free() {
    if (p_ != nullptr && !borrowed_) m_.Unmap(p_, cap_ * sizeof(T));
    p_ = nullptr;
    n_ = cap_ = 0;
    borrowed_ = false;
  }
  // Empties the array and makes [p, p + cap) its room, which another array owns (a part of its
  // room, page-aligned): filled there until it is full, then moved to a mapping of its own.
  void Borrow(T* p, size_t cap) {
    Free();
    p_ = p;
    cap_ = cap;
    borrowed_ = true;
  }
  bool borrowed() const { return borrowed_; }
  // Takes `from`'s elements and memory (its own), leaving it empty; what this array held goes.
  void TakeFrom(Array& from) {
    Free();
    p_ = from.p_;
    n_ = from.n_;
    cap_ = from.cap_;
    borrowed_ = from.borrowed_;
    from.p_ = nullptr;
    from.n_ = from.cap_ = 0;
    from.borrowed_ = false;
  }
  T* data() { return p_; }
  size_t size() const { return n_; }
  size_t capacity() const { return cap_; }
  T& operator[](size_t i) { return p_[i]; }
  InternalScratch& scratch() const { return m_; }
  void Release() {  // keeps the memory: the kinds stay readable after the scan
    p_ = nullptr;
    n_ = cap_ = 0;
    borrowed_ = false;
  }

 private:
  // Room for `cap` elements, the contents kept (InternalScratch::Grow remaps without copying); false
  // when there is none.
  bool Grow(size_t cap) {
    if (borrowed_) {
      T* const q = static_cast<T*>(m_.Map(cap * sizeof(T)));
      if (q == nullptr) return false;
      if (n_ > 0) memcpy(static_cast<void*>(q), p_, n_ * sizeof(T));
      p_ = q;
      cap_ = cap;
      borrowed_ = false;
      return true;
    }
    T* q = static_cast<T*>(p_ != nullptr ? m_.Grow(p_, cap_ * sizeof(T), cap * sizeof(T))
                           : sparse_    ? m_.MapSparse(cap * sizeof(T))
                                        : m_.Map(cap * sizeof(T)));
    if (q == nullptr) return false;
    p_ = q;
    cap_ = cap;
    return true;
  }
  // A page of elements first: most of a small process's arrays hold a few dozen.
  static constexpr size_t kFirstCapacity = sizeof(T) >= 4096 ? 1 : 4096 / sizeof(T);
  InternalScratch& m_;
  const bool sparse_;
  T* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
  bool borrowed_ = false;
};

// Appends from's elements to *to; false when there is no memory.
template <typename T>
bool PushAll(Array<T>& from, Array<T>* to) {
  const size_t n = to->size();
  if (from.size() == 0) return true;
  if (!to->Resize(n + from.size())) return false;
  memcpy(static_cast<void*>(to->data() + n), from.data(), from.size() * sizeof(T));
  return true;
}

// Room in `whole` (sparse) for a walk split in two: `first` borrows room for n1 elements from its
// start, `second` room for n2 after it (from a page boundary, or a 2 MiB one when the first part is
// larger: each part is faulted in by the thread that fills it), and `extra` more elements stay for
// what is added once they are joined. False, the arrays untouched, when there is no memory.
template <typename T>
bool RoomInTwoParts(Array<T>* whole, size_t n1, size_t n2, size_t extra, Array<T>* first, Array<T>* second) {
  const size_t bytes = n1 * sizeof(T) < (size_t{2} << 20) ? 4096 : size_t{2} << 20;
  static_assert(4096 % sizeof(T) == 0, "a part's start must be a whole element");
  const size_t at = (n1 * sizeof(T) + bytes - 1) / bytes * bytes / sizeof(T);
  if (!whole->Reserve(at + n2 + extra)) return false;
  InternalScratch::PreferHugePages(whole->data(), whole->capacity() * sizeof(T));
  first->Borrow(whole->data(), at);
  second->Borrow(whole->data() + at, n2);
  return true;
}

// Makes `whole` hold first's elements and then second's, both emptied: when both are still in the
// room RoomInTwoParts gave them, the second's elements are moved down to follow the first's; when
// either outgrew it, both are copied to new memory. False when there is none (`whole` then empty).
template <typename T>
bool JoinTwoParts(Array<T>* whole, Array<T>* first, Array<T>* second) {
  const size_t n1 = first->size(), n2 = second->size();
  if (first->borrowed() && second->borrowed() && first->data() == whole->data()) {
    if (n2 > 0) memmove(static_cast<void*>(whole->data() + n1), second->data(), n2 * sizeof(T));
    first->Free();
    second->Free();
    return whole->Resize(n1 + n2);
  }
  Array<T> joined(whole->scratch(), /*sparse=*/true);
  const bool ok = joined.Reserve(n1 + n2) && PushAll(*first, &joined) && PushAll(*second, &joined);
  first->Free();
  second->Free();
  whole->TakeFrom(joined);
  return ok;
}

// Under valgrind, the process's maps include valgrind's own memory, which the program cannot address
// and which memcheck never scans, and memcheck follows only words whose bits are all defined. This
// reader reads as memcheck's leak check does: through `base`, a page at a time, reading words memcheck
// says the client cannot address, and undefined words, as zero; a read stops at a page none of whose
// words it finds addressable.
class MemcheckViewReader : public track::MemoryReader {
 public:
  explicit MemcheckViewReader(track::MemoryReader& base) : base_(base) {}
  size_t Read(uintptr_t addr, void* buf, size_t n) override {
    unsigned char vbits[4096];
    size_t done = 0;
    while (done < n) {
      const uintptr_t a = addr + done;
      const size_t len = std::min(n - done, size_t{4096} - (a & 4095));
      if (!Addressable(a, vbits, len)) {
        // Part of the page is not the client's, or words of both kinds lie in any order, as in the page
        // that holds a thread's stack pointer (memcheck makes the frames popped below it no-access, and
        // leaves what lies deeper as it was): the addressable words, zeros for the others. Looked for
        // word by word only when one of a few words spread over the page is addressable.
        if (!SomeAddressable(a, vbits, len)) return done;
        char* const out = static_cast<char*>(buf) + done;
        for (size_t w = 0; w + 8 <= len; w += 8) {
          if (Addressable(a + w, vbits + w, 8) && base_.Read(a + w, out + w, 8) == 8) {
            Undefine(out + w, vbits + w, 8);
          } else {
            memset(out + w, 0, 8);
          }
        }
        memset(out + (len & ~size_t{7}), 0, len & 7);
        done += len;
        continue;
      }
      if (base_.Read(a, static_cast<char*>(buf) + done, len) != len) return done;
      Undefine(static_cast<char*>(buf) + done, vbits, len);
      done += len;
    }
    return done;
  }

 private:
  static bool Addressable(uintptr_t a, unsigned char* vbits, size_t len) {
    return VALGRIND_GET_VBITS(reinterpret_cast<const char*>(a), reinterpret_cast<char*>(vbits), len) == 1;
  }
  // Whether one of the words at every 512th byte of [a, a + len), or its last word, is addressable.
  static bool SomeAddressable(uintptr_t a, unsigned char* vbits, size_t len) {
    for (size_t w = 0; w + 8 <= len; w += 512) {
      if (Addressable(a + w, vbits + w, 8)) return true;
    }
    return len >= 8 && Addressable(a + ((len - 8) & ~size_t{7}), vbits + ((len - 8) & ~size_t{7}), 8);
  }
  static void Undefine(char* out, const unsigned char* vbits, size_t len) {
    for (size_t w = 0; w + 8 <= len; w += 8) {
      uint64_t v;
      memcpy(&v, vbits + w, 8);
      if (v != 0) memset(out + w, 0, 8);
    }
  }
  track::MemoryReader& base_;
};

// A point in time (CLOCK_MONOTONIC, ns; 0: none) past which the scan reads nothing more: a scan for a
// signal's report must end in time for the report. Read by both of the scan's threads; the clock is
// looked at once every 256 questions.
class ScanDeadline {
 public:
  explicit ScanDeadline(uint64_t at_ns) : at_ns_(at_ns) {}
  bool Passed(uint32_t* asked) {
    if (at_ns_ == 0) return false;
    if (passed_.load(std::memory_order_relaxed)) return true;
    if ((++*asked & 255) != 1) return false;
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (static_cast<uint64_t>(t.tv_sec) * 1000000000 + static_cast<uint64_t>(t.tv_nsec) < at_ns_) return false;
    passed_.store(true, std::memory_order_relaxed);
    return true;
  }
  bool passed() const { return passed_.load(std::memory_order_relaxed); }

 private:
  const uint64_t at_ns_;
  std::atomic<bool> passed_{false};
};

// Reads large ranges through `base` only where the process ever touched their pages (pagemap:
// present or swapped); a page never touched reads as zeros, which it holds. A large block the program
// took from calloc (a mapping of its own) and mostly never wrote would otherwise be faulted in a page
// at a time by the scan's reads (the zero page mapped for each: a fault a page, 10-20 us each in some
// virtual machines). For a scan while no other thread runs (a page touched meanwhile would be missed).
// Keeps pagemap's answers for the ranges asked about last (a large block is asked about by InPlace,
// then Read, in each view: cc1's exit read the same entries six times, 211 reads), behind a lock of
// its own: both views' threads may share one.
class TouchedPagesReader : public track::MemoryReader {
 public:
  // Ranges shorter than this are read as `base` reads them: a pagemap read costs about what reading
  // a few resident pages does.
  static constexpr size_t kSparse = size_t{32} << 10;
  TouchedPagesReader(track::MemoryReader& base, int pagemap_fd) : base_(base), pagemap_fd_(pagemap_fd) {}
  size_t Read(uintptr_t addr, void* buf, size_t n) override {
    if (n < kSparse || pagemap_fd_ < 0) return base_.Read(addr, buf, n);
    char* const out = static_cast<char*>(buf);
    uintptr_t at = addr;  // bytes before `at` are in buf
    bool whole = true;
    ForEachRun(addr, n, [&](uintptr_t b, uintptr_t e) {
      if (!whole) return;
      memset(out + (at - addr), 0, b - at);
      const size_t got = base_.Read(b, out + (b - addr), e - b);
      at = b + (got < e - b ? got : e - b);
      whole = at == e;
    });
    if (!whole) return at - addr;
    memset(out + (at - addr), 0, addr + n - at);
    return n;
  }
  // A large range every page of which was touched is read where it lies, as `base` reads in place (a
  // copy of each large block for each view was most of a small process's scan: the gcc driver's exit
  // copied 0.5 ms of them); else nullptr, and Read zero-fills the untouched pages.
  const uint64_t* InPlace(uintptr_t addr, size_t n) override {
    if (n < kSparse || pagemap_fd_ < 0) return base_.InPlace(addr, n);
    int runs = 0;
    bool whole = false;
    ForEachRun(addr, n, [&](uintptr_t b, uintptr_t e) { whole = ++runs == 1 && b == addr && e == addr + n; });
    return whole ? base_.InPlace(addr, n) : nullptr;
  }
  // A large range's touched runs, each where the base reads it in place (the classifier scans them
  // there, and no zeros: cc1's exit copied 3 MB of partly touched blocks, zero-filled).
  int InPlaceRuns(uintptr_t addr, size_t n, Range* runs, int cap) override {
    if (n < kSparse || pagemap_fd_ < 0) return -1;
    int count = 0;
    bool ok = true;
    ForEachRun(addr, n, [&](uintptr_t b, uintptr_t e) {
      const uint64_t* at = ok && count < cap ? base_.InPlace(b, e - b) : nullptr;
      ok = at != nullptr;
      if (ok) runs[count++] = Range{reinterpret_cast<uintptr_t>(at), e - b};
    });
    return ok ? count : -1;
  }
  // A large range among them is read as Read reads it (the classifier groups blocks of up to 64 KiB).
  size_t ReadMany(const Range* ranges, size_t k, void* buf) override {
    for (size_t i = 0; i < k; ++i) {
      if (ranges[i].n >= kSparse && pagemap_fd_ >= 0) return MemoryReader::ReadMany(ranges, k, buf);
    }
    return base_.ReadMany(ranges, k, buf);
  }

 private:
  // The touched runs of [addr, addr + n) (track::ForEachTouchedRun), from the kept answer for that
  // range when there is one; an answer of at most kRuns runs is kept, in the slot the range's start
  // picks (replacing the one there).
  template <typename Emit>
  void ForEachRun(uintptr_t addr, size_t n, Emit&& emit) {
    Answer& slot = answers_[(addr * 0x9E3779B97F4A7C15ull) >> (64 - kAnswerBits)];
    Answer kept;
    Lock();
    const bool hit = slot.addr == addr && slot.n == n;
    if (hit) kept = slot;
    Unlock();
    if (hit) {
      for (uint32_t i = 0; i < kept.count; ++i) emit(kept.runs[i].begin, kept.runs[i].end);
      return;
    }
    Answer fresh{addr, n, 0, {}};
    track::ForEachTouchedRun(pagemap_fd_, addr, addr + n, [&](uintptr_t b, uintptr_t e) {
      if (fresh.count < kRuns) fresh.runs[fresh.count] = RootRange{b, e};
      ++fresh.count;
      emit(b, e);
    });
    if (fresh.count > kRuns) return;
    Lock();
    slot = fresh;
    Unlock();
  }
  void Lock() {
    while (lock_.exchange(true, std::memory_order_acquire)) {
    }
  }
  void Unlock() { lock_.store(false, std::memory_order_release); }

  static constexpr int kAnswerBits = 6;
  static constexpr uint32_t kRuns = 8;
  struct Answer {
    uintptr_t addr;
    size_t n;
    uint32_t count;
    RootRange runs[kRuns];
  };
  track::MemoryReader& base_;
  const int pagemap_fd_;
  std::atomic<bool> lock_{false};
  Answer answers_[size_t{1} << kAnswerBits] = {};
};

// Reads through `base` until `deadline` passes, then nothing (the classifier then ends soon, its
// classes meaningless). One per thread.
class DeadlineReader : public track::MemoryReader {
 public:
  DeadlineReader(track::MemoryReader& base, ScanDeadline& deadline) : base_(base), deadline_(deadline) {}
  size_t Read(uintptr_t addr, void* buf, size_t n) override {
    return deadline_.Passed(&asked_) ? 0 : base_.Read(addr, buf, n);
  }
  const uint64_t* InPlace(uintptr_t addr, size_t n) override {
    return deadline_.Passed(&asked_) ? nullptr : base_.InPlace(addr, n);
  }
  size_t ReadMany(const Range* ranges, size_t k, void* buf) override {
    return deadline_.Passed(&asked_) ? 0 : base_.ReadMany(ranges, k, buf);
  }
  int InPlaceRuns(uintptr_t addr, size_t n, Range* runs, int cap) override {
    return deadline_.Passed(&asked_) ? -1 : base_.InPlaceRuns(addr, n, runs, cap);
  }

 private:
  track::MemoryReader& base_;
  ScanDeadline& deadline_;
  uint32_t asked_ = 0;
};

// Reads through `base` only what is readable by the process's maps as read before the scan (sorted,
// disjoint ranges); anything else (a page the program made PROT_NONE inside a live block, a hole
// between mappings) reads as zeros and is counted, as memcheck skips what it cannot read. A read that
// `base` cuts short (a page another thread unmapped meanwhile, for a base that cannot fault) is
// zero-filled and counted the same way. So no read of the program's memory turns into a signal.
// Belongs to one thread (it keeps the range it found last).
class CheckedReader : public track::MemoryReader {
 public:
  // `direct`: base reads in place (a DirectMemoryReader): what the maps allow is then handed out
  // without asking it.
  CheckedReader(track::MemoryReader& base, const RootRange* readable, size_t n, bool direct = false)
      : base_(base), readable_(readable), n_(n), direct_(direct) {}
  size_t Read(uintptr_t addr, void* buf, size_t n) override {
    char* out = static_cast<char*>(buf);
    for (size_t done = 0; done < n;) {
      const uintptr_t a = addr + done;
      const RootRange* r = Find(a);
      if (r == nullptr) {
        const size_t len = static_cast<size_t>(std::min<uintptr_t>(n - done, NextReadable(a) - a));
        memset(out + done, 0, len);
        unreadable_ += len;
        done += len;
        continue;
      }
      const size_t len = static_cast<size_t>(std::min<uintptr_t>(n - done, r->end - a));
      const size_t got = base_.Read(a, out + done, len);
      if (got < len) {
        memset(out + done + got, 0, len - got);
        unreadable_ += len - got;
      }
      done += len;
    }
    return n;
  }
  const uint64_t* InPlace(uintptr_t addr, size_t n) override {
    const RootRange* r = Find(addr);
    if (r == nullptr || n > r->end - addr) return nullptr;
    return direct_ ? reinterpret_cast<const uint64_t*>(addr) : base_.InPlace(addr, n);
  }
  size_t ReadMany(const Range* ranges, size_t k, void* buf) override {
    for (size_t i = 0; i < k; ++i) {
      const RootRange* r = Find(ranges[i].addr);
      if (r == nullptr || ranges[i].n > r->end - ranges[i].addr) return MemoryReader::ReadMany(ranges, k, buf);
    }
    return base_.ReadMany(ranges, k, buf);
  }
  // Bytes read as zeros because they could not be read.
  uint64_t unreadable() const { return unreadable_; }

 private:
  // The readable range holding a, or nullptr.
  const RootRange* Find(uintptr_t a) {
    if (last_ != nullptr && last_->begin <= a && a < last_->end) return last_;
    const size_t i = FirstEndingAfter(a);
    if (i < n_ && readable_[i].begin <= a) return last_ = &readable_[i];
    return nullptr;
  }
  // The start of the first readable range above a (a lies in none), or the end of the address space.
  uintptr_t NextReadable(uintptr_t a) const {
    const size_t i = FirstEndingAfter(a);
    return i < n_ ? readable_[i].begin : ~uintptr_t{0};
  }
  size_t FirstEndingAfter(uintptr_t a) const {
    size_t lo = 0, hi = n_;
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (readable_[mid].end <= a) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }
  track::MemoryReader& base_;
  const RootRange* readable_;
  size_t n_;
  const bool direct_;
  const RootRange* last_ = nullptr;
  uint64_t unreadable_ = 0;
};

// Whether [begin, end) lies inside one of ranges[0, n) (sorted by start, disjoint).
inline bool InsideOne(const RootRange* ranges, size_t n, uintptr_t begin, uintptr_t end) {
  const size_t k = track::PartitionPoint(0, n, [&](size_t i) { return ranges[i].end <= begin; });
  return k < n && ranges[k].begin <= begin && end <= ranges[k].end;
}

// Reads through `base`, but hands out in place the ranges listed (sorted, disjoint): poolscope's own
// memory, which nothing unmaps while the scan runs when the exiting thread is the process's only one,
// so that the detector's view reads it without copying it through the kernel.
class OwnInPlaceReader : public track::MemoryReader {
 public:
  OwnInPlaceReader(track::MemoryReader& base, const RootRange* ranges, size_t n) : base_(base), ranges_(ranges), n_(n) {}
  size_t Read(uintptr_t addr, void* buf, size_t n) override { return base_.Read(addr, buf, n); }
  size_t ReadMany(const Range* ranges, size_t k, void* buf) override { return base_.ReadMany(ranges, k, buf); }
  const uint64_t* InPlace(uintptr_t addr, size_t n) override {
    if (const uint64_t* p = base_.InPlace(addr, n)) return p;
    return InsideOne(ranges_, n_, addr, addr + n) ? reinterpret_cast<const uint64_t*>(addr) : nullptr;
  }

 private:
  track::MemoryReader& base_;
  const RootRange* ranges_;
  size_t n_;
};

}  // namespace scan
}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_SCAN_MEMORY_H_
