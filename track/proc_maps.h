// File: track/proc_maps.h
//
// The process's own mappings, from /proc/self/maps, and what the leak classifier needs of them: the
// root ranges to scan, which mappings hold given addresses, and a MemoryReader over the process's own
// memory that returns short instead of faulting.
//
// Runs at exit inside the host process, whose allocator is interposed: nothing here calls malloc or
// stdio. The file is read with open/read in a loop into ScratchMemory that doubles as needed, so a
// maps file of any length is read whole. Root ranges leave out only the pages of private anonymous
// mappings that were never touched (neither in memory nor swapped out, from /proc/self/pagemap): they
// read as zeros, so they hold no pointer, and reading them would make the kernel map a page under each.
// Every other byte of a root candidate is read (mincore is not used: it calls a swapped-out page, which
// may hold pointers, not resident).
//
// Thread-safety: a ProcMaps is not shared while Read runs; afterwards its const methods may be called
// from any thread. A ProcessVmReader holds only its pid.
#ifndef POOLSCOPE_TRACK_PROC_MAPS_H_
#define POOLSCOPE_TRACK_PROC_MAPS_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "track/reachability.h"
#include "track/sorted_search.h"

namespace poolscope {
namespace track {

struct Mapping {
  uintptr_t start;
  uintptr_t end;
  uint64_t offset;
  uint64_t inode;
  char perms[5];     // "rw-p": read, write, execute, p(rivate) or s(hared); NUL-terminated
  const char* path;  // NUL-terminated; "" for an anonymous mapping; lives as long as the ProcMaps
  bool readable() const { return perms[0] == 'r'; }
  bool writable() const { return perms[1] == 'w'; }
};

class ProcMaps {
 public:
  explicit ProcMaps(ScratchMemory& scratch) : scratch_(scratch) {}
  ~ProcMaps();
  ProcMaps(const ProcMaps&) = delete;
  ProcMaps& operator=(const ProcMaps&) = delete;

  // Reads and parses `path` (a file in /proc/PID/maps format). False when it cannot be opened or read,
  // or scratch memory runs out; the mappings read before are dropped either way.
  bool Read(const char* path = "/proc/self/maps");

  size_t size() const { return count_; }
  const Mapping& operator[](size_t i) const { return mappings_[i]; }

 private:
  void Release();

  ScratchMemory& scratch_;
  char* text_ = nullptr;
  size_t text_capacity_ = 0;
  Mapping* mappings_ = nullptr;
  size_t mappings_capacity_ = 0;
  size_t count_ = 0;
};

// True for a mapping whose memory may hold the program's pointers: readable and writable, and none of
// [vvar], [vvar_vclock], [vsyscall], [vdso], [heap] (the real allocator's blocks are scanned as
// blocks, not as roots), nor a path under /dev/ (reading device memory may have side effects) other
// than shared anonymous memory ("/dev/zero (deleted)") and /dev/shm/.
bool IsRootCandidate(const Mapping& m);

// Whether every byte of [begin, end) lies in a readable mapping of `maps` (mappings that follow each
// other without a gap).
bool ReadableThroughout(const ProcMaps& maps, uintptr_t begin, uintptr_t end);

// True for a private anonymous mapping (thread stacks and [anon:...] names among them): a page of it
// never touched reads as zeros.
bool IsPrivateAnonymous(const Mapping& m);

// The root ranges: every root candidate minus `exclude` (ranges sorted by begin; they may overlap one
// another and need not align with mappings: a partly excluded mapping contributes what is left).
// Writes up to `capacity` ranges to `out` in address order and returns how many there are in all;
// a return above `capacity` means `out` was too small and holds the first `capacity`.
// With `pagemap_fd` (an open /proc/self/pagemap), a private anonymous mapping contributes only its runs
// of touched pages (see the file comment); with -1, or when pagemap cannot be read, every page.
size_t BuildRootRanges(const ProcMaps& maps, const RootRange* exclude, size_t nexclude, RootRange* out,
                       size_t capacity, int pagemap_fd = -1);

// Calls emit(begin, end) for each run of touched pages of [begin, end) (present in memory or swapped
// out, by /proc/self/pagemap read from `pagemap_fd`), clipped to [begin, end), in address order. A
// range whose pagemap entries cannot be read is emitted whole. No allocation: entries are read into a
// stack buffer, 64 pages at a time.
template <typename Emit>
void ForEachTouchedRun(int pagemap_fd, uintptr_t begin, uintptr_t end, Emit&& emit);

// Sets hit[i] to 1 for each mapping i that contains the start of one of blocks[0..n), sorted by start,
// and leaves every other entry as it is (hit has maps.size() entries). One pass over both: mappings are
// in address order, as the kernel lists them.
void MarkMappingsHoldingBlocks(const ProcMaps& maps, const ScanBlock* blocks, size_t n, uint8_t* hit);
// The same, but a block for which apart(block) is true marks nothing: a block that is a mapping of its
// own (an allocator's large block mmap'd for it alone), which the kernel may have merged with the
// program's memory beside it, is left out of the roots by its own extent (the caller's to record),
// not by the whole mapping it ended up in.
// A search per mapping: apart() is asked of a mapping's blocks in order until one is not.
template <typename Apart>
void MarkMappingsHoldingBlocks(const ProcMaps& maps, const ScanBlock* blocks, size_t n, uint8_t* hit, Apart&& apart) {
  for (size_t m = 0; m < maps.size(); ++m) {
    size_t i = 0, count = n;  // the first block starting at or after the mapping's start
    while (count > 0) {
      const size_t half = count / 2;
      if (blocks[i + half].start < maps[m].start) {
        i += half + 1;
        count -= half + 1;
      } else {
        count = half;
      }
    }
    for (; i < n && blocks[i].start < maps[m].end && hit[m] == 0; ++i) {
      if (!apart(blocks[i])) hit[m] = 1;
    }
  }
}

// Whether every block of blocks[0..n) (sorted by start) lies whole inside one of ranges[0..nranges)
// (sorted, disjoint, adjacent ones merged). One pass over both.
bool AllWithinRanges(const ScanBlock* blocks, size_t n, const RootRange* ranges, size_t nranges);

// Reads the process's own memory with process_vm_readv on its own pid, one remote iovec per page, so a
// read that meets an unmapped or unreadable page returns the bytes before that page instead of
// faulting. Costs a system call per 64 KiB or less. A reader reads the memory of the process that
// made it: make one per scan (a fork child's own reader reads the child).
class ProcessVmReader : public MemoryReader {
 public:
  ProcessVmReader();
  size_t Read(uintptr_t addr, void* buf, size_t n) override;
  // One system call for all the ranges while they fit in kMaxIov pages' pieces.
  size_t ReadMany(const Range* ranges, size_t k, void* buf) override;
  // Whether process_vm_readv works here (a seccomp filter or an old kernel may refuse it).
  static bool Available();

 private:
  pid_t pid_;
};

// Reads the pagemap entries of `n` pages from `first_page` (a page number) into `entries`; how many
// were read (0 on failure).
size_t ReadPagemap(int pagemap_fd, uintptr_t first_page, uint64_t* entries, size_t n);

template <typename Emit>
void ForEachTouchedRun(int pagemap_fd, uintptr_t begin, uintptr_t end, Emit&& emit) {
  constexpr uintptr_t kPageBytes = 4096;
  constexpr uint64_t kPresent = uint64_t{1} << 63, kSwapped = uint64_t{1} << 62;
  constexpr size_t kBatch = 512;  // 4 KiB of stack: the exit scan runs on a stack of 1 MiB or more
  if (begin >= end) return;
  uint64_t entries[kBatch];
  uintptr_t run = 0;  // start of the run being built, 0 when none
  for (uintptr_t page = begin / kPageBytes, last = (end - 1) / kPageBytes; page <= last;) {
    const size_t want = last - page + 1 < kBatch ? static_cast<size_t>(last - page + 1) : kBatch;
    const size_t got = ReadPagemap(pagemap_fd, page, entries, want);
    if (got == 0) {  // unreadable: the rest counts as touched
      if (run == 0) run = page * kPageBytes;
      break;
    }
    for (size_t i = 0; i < got; ++i, ++page) {
      const bool touched = (entries[i] & (kPresent | kSwapped)) != 0;
      const uintptr_t at = page * kPageBytes;
      if (touched && run == 0) {
        run = at;
      } else if (!touched && run != 0) {
        emit(run < begin ? begin : run, at);
        run = 0;
      }
    }
  }
  if (run != 0) emit(run < begin ? begin : run, end);
}

// Calls emit(begin, end) for the parts of [begin, end) that may hold a pointer, in address order: the
// range cut where `maps` (sorted by start, disjoint) begin and end, a part in a private anonymous
// mapping as its runs of touched pages (with `pagemap_fd`, as ForEachTouchedRun), any other part whole
// (a part in no mapping too: its reader says what it can read).
template <typename Emit>
void ForEachTouchedPart(const ProcMaps& maps, uintptr_t begin, uintptr_t end, int pagemap_fd, Emit&& emit) {
  // From the first mapping ending after begin.
  for (size_t i = PartitionPoint(0, maps.size(), [&](size_t k) { return maps[k].end <= begin; }); begin < end; ++i) {
    if (i == maps.size() || maps[i].start >= end) {
      emit(begin, end);
      return;
    }
    const Mapping& m = maps[i];
    if (m.start > begin) {
      emit(begin, m.start);
      begin = m.start;
    }
    const uintptr_t to = m.end < end ? m.end : end;
    if (pagemap_fd >= 0 && IsPrivateAnonymous(m)) {
      ForEachTouchedRun(pagemap_fd, begin, to, emit);
    } else {
      emit(begin, to);
    }
    begin = to;
  }
}

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_PROC_MAPS_H_
