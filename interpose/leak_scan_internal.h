// File: interpose/leak_scan_internal.h
//
// What the exit scan's files share (leak_scan.h has the scan itself): its scratch memory, the roots'
// pieces (libpoolscope.so's own object, loaded objects' writable segments, glibc's main arena and its
// blocks mapped for themselves, range arithmetic; scan_roots.cc) and the views' pieces (collecting and
// sorting the blocks, LeakSanitizer's view, the detector's job on the second thread; scan_views.cc).
//
// Thread-safety: as leak_scan.h; g_scratch may be used by the scan's two threads at once.
#ifndef POOLSCOPE_INTERPOSE_LEAK_SCAN_INTERNAL_H_
#define POOLSCOPE_INTERPOSE_LEAK_SCAN_INTERNAL_H_

#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "interpose/glibc_arena.h"
#include "interpose/leak_scan.h"
#include "interpose/scan_memory.h"
#include "interpose/side_thread.h"
#include "track/reachability.h"

namespace poolscope {
namespace scan {

using track::LeakKind;
using track::RootRange;
using track::ScanBlock;

// Every mapping the scan makes for itself (kept out of every view's roots).
extern InternalScratch g_scratch;

// libpoolscope.so's writable segments, and its static TLS block in the calling thread.
struct OwnObject {
  RootRange writable[4];
  int nwritable;
  uintptr_t tls_data;
  size_t tls_bytes;
};

int FindOwnObject(struct dl_phdr_info* info, size_t, void* arg);

// The lowest address of the calling thread's TLS blocks, over every object.
int FindLowestTls(struct dl_phdr_info* info, size_t, void* arg);

// What LeakSanitizer reads of a thread's static TLS on glibc (x86-64: the descriptor at the thread
// pointer, the TLS below it): from the thread pointer plus the descriptor's bytes (glibc's
// _thread_db_sizeof_pthread) down by the static TLS's bytes, descriptor included
// (_dl_get_tls_static_info). 0s when glibc does not tell (before 2.34).
struct StaticTls {
  size_t descriptor;
  size_t bytes;
};
StaticTls GlibcStaticTls();

// Whether the allocator below is glibc's: its block headers are then read to tell a block mmap'd for
// itself from one carved from a heap.
bool RealAllocatorIsGlibc();

// For a block of glibc's malloc that is a mapping of its own (its chunk header's IS_MMAPPED bit, 0x2),
// that mapping: from the chunk's start less its alignment offset (the header's prev_size) to the
// chunk's end, page-aligned at both ends. The header is checked for that shape before it is believed.
// Blocks under a page never are (the smallest mmap threshold glibc takes is a page).
bool GlibcMappedChunk(track::MemoryReader& reader, const ScanBlock& b, RootRange* extent);

// Loaded objects' writable segments (their data and bss: globals, as LeakSanitizer scans them): of
// every object, of libc alone, or of a sanitizer runtime (liblsan, libasan) alone.
enum class Objects { kAll, kLibc, kSanitizerRuntime };

struct WritableSegments {
  Array<RootRange>* ranges;
  Objects which;
};

bool IsSanitizerRuntime(const char* name);

int CollectWritableSegments(struct dl_phdr_info* info, size_t, void* arg);

// glibc's main arena (glibc_arena.h), or 0 when it cannot be found. libc's writable segment is searched
// in place where `in_place_maps` (when not null) says all of it is readable, else in a copy read through
// `reader` (which reads the other arenas either way).
uintptr_t MainArena(track::MemoryReader& reader, const track::ProcMaps* in_place_maps);

// glibc's other arenas, from the main arena's list (`next`): up to `max` of them into arenas[]; how
// many. Each lies in the first of its heaps, mappings of its own that threads' blocks are carved from.
size_t OtherArenas(track::MemoryReader& reader, uintptr_t main_arena, uintptr_t* arenas, size_t max);

// Whether mapping m is a heap of one of arenas[0, n): a writable anonymous mapping at a 64 MiB
// boundary (glibc's HEAP_MAX_SIZE on 64-bit) whose header's first word (heap_info.ar_ptr) is one of
// them. A heap that holds no live block is the allocator's all the same: its free chunks keep what
// their blocks held, which no detector reads (memcheck and LeakSanitizer replace the allocator).
bool ArenaHeap(track::MemoryReader& reader, const track::Mapping& m, const uintptr_t* arenas, size_t n);

// A thread stack glibc keeps for reuse: `m`, an anonymous writable mapping after a guard page
// (`before`), whose top holds a thread descriptor that is no live thread's (in.threads, whose thread
// pointers lie tp_off from their states). The part that was the stack, which no detector reads (the
// descriptor and the static TLS below it, tls_span bytes, stay), else {0, 0}. `window`: room for
// kDescriptorWindow bytes, where the mapping's top is read.
constexpr size_t kDescriptorWindow = 65536;
RootRange DeadThreadStack(const track::Mapping& before, const track::Mapping& m, track::MemoryReader& reader,
                          uintptr_t* window, const ScanInputs& in, intptr_t tp_off, uintptr_t tls_span);

// Sorts ranges[0, n) by begin and merges, in place, those that overlap or touch; returns how many
// remain (sorted, disjoint).
size_t SortAndMerge(RootRange* ranges, size_t n);

// ranges[0, n) (sorted by begin, disjoint) less exclude[0, nexclude) (sorted by begin, may overlap),
// into `out`.
bool Subtract(const RootRange* ranges, size_t n, const RootRange* exclude, size_t nexclude, Array<RootRange>* out);

// A block's bytes as LeakSanitizer counts them: it serves malloc(0) with one byte.
inline uint64_t LsanBytes(const ScanBlock& b) { return b.size() > 0 ? b.size() : 1; }

inline bool IsLost(const ScanBlock& b) {
  return b.kind() == LeakKind::kDefinitelyLost || b.kind() == LeakKind::kIndirectlyLost;
}

// The lost blocks of blocks[0, n) that sit in pools (what a detector below cannot see), their bytes
// as `bytes` counts them.
track::LeakTotal LostInPools(const ScanBlock* blocks, size_t n, uint64_t (*bytes)(const ScanBlock&));

// The same, for blocks whose lost ones are those with kept[i] zero.
track::LeakTotal LostInPools(const ScanBlock* blocks, const uint8_t* kept, size_t n, uint64_t (*bytes)(const ScanBlock&));

// `from`'s blocks classified into `blocks` (a copy) over `roots`.
bool ClassifyCopy(const ScanBlock* from, size_t n, const RootRange* roots, size_t nroots,
                  track::MemoryReader& root_reader, track::MemoryReader& heap_reader, Array<ScanBlock>* blocks);

// LeakSanitizer's view of the real blocks (ScanOutcome::lsan_*): classified by memcheck's rules over
// LeakSanitizer's roots, its leaked blocks are memcheck's definitely and indirectly lost ones (an
// interior pointer keeps a block for both); a leaked block that another leaked block points into
// (anywhere in it) is indirect, the rest direct, as LeakSanitizer splits them (a cycle is all
// indirect).
bool ClassifyForLsan(const ScanBlock* dblocks, size_t n, const RootRange* roots, size_t nroots,
                     track::MemoryReader& root_reader, track::MemoryReader& heap_reader, ScanOutcome* out);

// Above this many real blocks LeakSanitizer's view is not computed: a third classification of the
// heap would cost the exit about a third more.
constexpr size_t kLsanViewMaxBlocks = size_t{1} << 20;
constexpr char kLsanTooManyBlocks[] = "more than 1,048,576 blocks: not computed (it would cost the exit a third more)";

struct RangeSink {
  Array<RootRange>* ranges;
  bool* ok;
};

void PushRange(uintptr_t b, uintptr_t e, void* arg);

// Memory about to be written, faulted in and touched by a thread that has nothing else to do yet: a
// fresh page's first access costs more than the walk that fills it on some machines (1.4 ms a MiB in
// the hypervisor here, whether or not the kernel faulted the page in ahead). One byte a page is read
// after each step is faulted in. No other thread may write [begin, end) meanwhile. Stop() (or the
// destructor) ends it at its next step and waits: the memory must outlive it.
class Prefaulter {
 public:
  ~Prefaulter() { Stop(); }
  void Start(char* begin, char* end) {  // page-aligned
    begin_ = begin;
    end_ = end;
    running_ = thread_.Start(Run, this);
  }
  void Stop() {
    if (!running_) return;
    stop_.store(true, std::memory_order_relaxed);
    thread_.Join();
    running_ = false;
  }

 private:
  static int Run(void* arg) {
    auto* self = static_cast<Prefaulter*>(arg);
    constexpr size_t kStep = size_t{256} << 10;
    for (char* from = self->begin_; from < self->end_; from += kStep) {
      if (self->stop_.load(std::memory_order_relaxed)) break;
      const size_t len = std::min<size_t>(kStep, self->end_ - from);
      madvise(from, len, MADV_POPULATE_WRITE);
      for (size_t off = 0; off < len; off += 4096) (void)__atomic_load_n(from + off, __ATOMIC_RELAXED);
    }
    return 0;
  }
  char* begin_ = nullptr;
  char* end_ = nullptr;
  std::atomic<bool> stop_{false};
  bool running_ = false;
  SideThread thread_;
};

struct Collect {
  Array<ScanBlock>* tracked;  // the live table's blocks
  Array<ScanBlock>* blocks;   // the pools' live blocks, pool by pool in the walk's order
  Array<ScanBlock>* pools;    // the pools' real blocks
  Array<RootRange>* arena_roots;
  bool ok;
};

void CollectPool(uintptr_t r, size_t rb, uintptr_t base, size_t bytes, bool arena, void* arg);

void CollectPooledBlock(uintptr_t p, uint64_t size, void* arg);

// Sorts a[0, n) by start. A list made mostly in address order (`mostly_in_order`) moves only where it
// is out of order, with room for an eighth of its records; otherwise it takes a radix sort.
bool SortByStart(ScanBlock* a, size_t n, bool mostly_in_order);

// Merges b[0, nb) (sorted by start, a copy kept elsewhere) into a[0, na) (sorted, with room for nb
// more after it) from the end: the merge never overwrites a record it has yet to move.
void MergeInto(ScanBlock* a, size_t na, const ScanBlock* b, size_t nb);

// Sorts *a (records mostly in address order: the pools', or their blocks) with more[0, n) (sorted by
// start, a copy kept elsewhere) merged in. A few records, as the unpooled blocks beside millions of
// pools are, go in with the records the sort finds out of order and are merged back with them: one
// pass over the array where sorting and then merging took two. False when there is no memory.
bool SortWithMore(Array<ScanBlock>* a, const ScanBlock* more, size_t n);

struct DetectorJob {
  ScanBlock* blocks;
  size_t n;
  const RootRange* roots;
  size_t nroots;
  track::MemoryReader* root_reader;
  track::MemoryReader* heap_reader;
  track::ReachabilityResult result;
  bool ok;
  // Then, when lsan_roots is not null, LeakSanitizer's view of the same blocks into *lsan_out
  // (ScanOutcome::lsan_leaked, _direct, _indirect), through lsan_root_reader and heap_reader: its roots
  // are lsan_roots[0] (the words of its ranges that memcheck's view reads too) and lsan_extra (those of
  // the rest; lsan_roots[1] is their range). Both views are marked in one pass when the extra words
  // allow it (track::ClassifyBesideMarked), else one after the other.
  const RootRange* lsan_roots;
  const uint64_t* lsan_extra;
  size_t nlsan_extra;
  track::MemoryReader* lsan_root_reader;
  ScanOutcome* lsan_out;
  bool lsan_ok;
  // With pools (pools_reached): blocks[0..n) are the pools and the unpooled blocks, and memcheck's view
  // classifies unpooled[0..nunpooled) beside the pools, each reachable through the pool list.
  bool pools_reached = false;
  ScanBlock* unpooled = nullptr;
  size_t nunpooled = 0;
};

// Scratch memory given back when the scan returns.
struct ScratchMapping {
  void* p;
  size_t bytes;
  ~ScratchMapping() {
    if (p != nullptr) g_scratch.Unmap(p, bytes);
  }
};

struct FileCloser {
  int fd;
  ~FileCloser() {
    if (fd >= 0) close(fd);
  }
};

// How long the helper that reads the other threads' registers may take (it stops each for a few
// microseconds; a thread the kernel cannot stop in time is read without its registers).
constexpr uint64_t kRegistersTimeoutMs = 500;

// Whether that helper may run: not under valgrind (its threads' registers are the tool's), no seccomp
// filter (one may kill the process for clone or ptrace), no tracer (a thread has one at most).
bool RegistersReadable();

int ClassifyForDetector(void* arg);

// The second thread's other jobs in a lone process (leak_scan.cc's Classify runs them; scan_views.cc).

// Pooled blocks (as the counters say) from which the pool walk is split between two threads.
constexpr size_t kSplitWalkBlocks = size_t{1} << 16;

// What the second thread's part of a split pool walk writes: its arrays (their sizes, at each block)
// and its flag, on cache lines of their own (alignas). Beside the first part's on a stack, a line
// written by both threads at every block made each walker wait for the other's core: the two halves
// of python3's 3.6M pools took 30 to 270 ms each, where one thread walked all of them in 68.
struct alignas(128) SecondWalk {
  SecondWalk()
      : blocks(g_scratch), pools(g_scratch), arena_roots(g_scratch), c{nullptr, &blocks, &pools, &arena_roots, true} {}
  Array<ScanBlock> blocks, pools;
  Array<RootRange> arena_roots;
  Collect c;
};

// The second half of the pool walk, into the arrays of `c`, which it faults in first.
struct WalkJob {
  const ScanInputs* in;
  Collect* c;
};
int WalkSecondHalf(void* arg);

// The program's view's array: the pools' blocks (when the walk was split, its two parts, `first` and
// `second`, joined in it), sorted, and the live table's (sorted already) merged in. On the second
// thread while the pools' array is sorted, or on the scan's own.
struct ProgramSort {
  Array<ScanBlock>* blocks;
  Array<ScanBlock>* first;  // null when the walk was not split
  Array<ScanBlock>* second;
  Array<ScanBlock>* tracked;
  bool ok;
};
int SortProgramBlocks(void* arg);

// The program's view's index, built while the roots are gathered.
struct IndexJob {
  track::BlockIndex* index;
  ScanBlock* blocks;
  size_t n;
  bool ok;
};
int BuildIndex(void* arg);

// Joins a started thread when it goes (at any return), unless it was joined already.
struct JoinAtExit {
  SideThread* thread;
  bool* running;
  ~JoinAtExit() {
    if (*running) thread->Join();
    *running = false;
  }
};

}  // namespace scan
}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_LEAK_SCAN_INTERNAL_H_
