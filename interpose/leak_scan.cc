// File: interpose/leak_scan.cc
//
// See leak_scan.h. All memory here is poolscope's own (InternalAlloc, so the scan's own arrays are
// in the registry of internal mappings and never among the roots).
#include "interpose/leak_scan.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <valgrind/valgrind.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include "interpose/internal.h"
#include "interpose/leak_scan_internal.h"
#include "interpose/real.h"
#include "interpose/root_words.h"
#include "interpose/scan_memory.h"
#include "interpose/side_thread.h"
#include "interpose/thread_registers.h"
#include "interpose/tracking.h"
#include "track/frame_rules.h"
#include "track/proc_maps.h"
#include "track/radix_sort.h"
#include "track/sorted_search.h"

namespace poolscope {
namespace {

using namespace scan;  // the scan's pieces (leak_scan_internal.h)
using track::LeakKind;
using track::RootRange;
using track::ScanBlock;

ScanOutcome g_outcome;
bool g_done = false;
// The program's blocks, sorted by start, with their kinds, kept for ScannedKind.
ScanBlock* g_blocks = nullptr;
size_t g_nblocks = 0;
size_t g_blocks_bytes = 0;  // as mapped
// The maps the scan read, kept for the report's symbolizer (which would read them again: 0.3-0.5 ms of
// cc1's exit) until ReleaseScan; made in place in g_maps_room.
alignas(track::ProcMaps) unsigned char g_maps_room[sizeof(track::ProcMaps)];
track::ProcMaps* g_maps = nullptr;

uint64_t NowMs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000 + static_cast<uint64_t>(t.tv_nsec) / 1000000;
}

// The process's threads, -1 when they cannot be listed.
int CountTasks() {
  size_t n = 0;
  return ListThreads(nullptr, 0, &n) ? static_cast<int>(n) : -1;
}

// Below these a second thread costs more than it saves (0.1-0.3 ms, where a tiny process's whole
// scan takes 1): the pooled blocks' array faults in as it fills, the views run one after the other.
constexpr size_t kPrefaultBlocks = size_t{1} << 14;
constexpr size_t kParallelViewBlocks = size_t{1} << 11;

void Classify(const ScanInputs& in, ScanOutcome* out) {
  const uint64_t t0 = NowMs();
  Array<ScanBlock> tracked(g_scratch), blocks(g_scratch, /*sparse=*/true), pools(g_scratch, /*sparse=*/true);
  // Explicit arenas' blocks are not blocks of the scan: their pools' carved bytes are the program's
  // memory, read as roots (the pools' real blocks are in the heap, left out of the roots).
  Array<RootRange> arena_roots(g_scratch);
  // The program's threads, counted before the scan makes one of its own.
  const int tasks = CountTasks();
  Prefaulter prefault;  // stopped before the arrays go, at any return
  Collect c{&tracked, &blocks, &pools, &arena_roots, true};
  ForEachTrackedBlockInfo(
      [](uintptr_t p, uint64_t size, bool is_pooled, void* arg) {
        auto* c = static_cast<Collect*>(arg);
        c->ok = c->ok && c->tracked->Push(ScanBlock::Of(p, size, is_pooled));
      },
      &c);
  // Both views' arrays go in address order; the classifier then sorts nothing. The pools were made,
  // and are walked, mostly in address order, and so are their blocks (a pool's lie inside it, in
  // order); the live table's blocks, in hash order, take a radix sort.
  c.ok = c.ok && SortByStart(tracked.data(), tracked.size(), false);
  // The pools and their blocks in one walk (a pool's header, marks and block words lie on the lines
  // the walk loads anyway): the detector's view takes the pools, the program's view their blocks. The
  // pooled blocks' array gets the room the counters give. Alone, with many pools, a second thread
  // walks the second half of the pool list, each thread into its part of both arrays' rooms (the
  // pools' sized by the list, the blocks' by the counters, shared as the list's entries are), faulting
  // its parts in; the parts are joined after. Else a second thread faults in the array while this
  // thread walks.
  const size_t room = in.pooled_blocks_hint + in.pooled_blocks_hint / 16 + tracked.size() + 64;
  Array<ScanBlock> blocks1(g_scratch), pools1(g_scratch);
  SecondWalk second;
  Array<ScanBlock>& blocks2 = second.blocks;
  Array<ScanBlock>& pools2 = second.pools;
  Array<RootRange>& arena_roots2 = second.arena_roots;
  Collect& c2 = second.c;
  WalkJob walk{&in, &c2};
  SideThread walker;
  bool split = in.for_each_pool != nullptr && in.pools_listed != nullptr && tasks == 1 &&
               in.pooled_blocks_hint >= kSplitWalkBlocks && SideThread::Usable();
  if (split) {
    const size_t listed1 = in.pools_listed(0, 2), listed2 = in.pools_listed(1, 2);
    const size_t hint = in.pooled_blocks_hint, slack = hint / 32 + 64;
    const size_t share1 = listed1 + listed2 == 0 ? hint / 2 : hint / (listed1 + listed2) * listed1;
    split = RoomInTwoParts(&blocks, share1 + slack, hint - share1 + slack, tracked.size(), &blocks1, &blocks2) &&
            RoomInTwoParts(&pools, listed1, listed2, tracked.size() + 64, &pools1, &pools2) &&
            walker.Start(WalkSecondHalf, &walk);
    if (split) {
      c.blocks = &blocks1;
      c.pools = &pools1;
    }
  }
  // The program's array sorted on the second thread when the walk was split, while this one appends
  // and sorts the pools' (it ends before the maps are read: its stack must not go while the scan reads
  // poolscope's memory).
  ProgramSort program_sort{&blocks, split ? &blocks1 : nullptr, &blocks2, &tracked, false};
  SideThread sorter;
  bool sorting = false;
  if (split) {
    blocks1.FaultIn();
    pools1.FaultIn();
    in.for_each_pool(CollectPool, CollectPooledBlock, &c, 0, 2);
    walker.Join();
    c.ok = c.ok && c2.ok;
    sorting = c.ok && sorter.Start(SortProgramBlocks, &program_sort);
    c.ok = c.ok && JoinTwoParts(&pools, &pools1, &pools2) && PushAll(arena_roots2, &arena_roots);
  } else if (in.for_each_pool != nullptr) {
    if (in.pooled_blocks_hint >= kPrefaultBlocks && SideThread::Usable() && blocks.Reserve(room)) {
      char* const b = reinterpret_cast<char*>(blocks.data());
      prefault.Start(b, b + (blocks.capacity() * sizeof(ScanBlock) & ~size_t{4095}));
    }
    in.for_each_pool(CollectPool, CollectPooledBlock, &c, 0, 1);
  }
  // The detector's view's array: the pools' real blocks and the unpooled blocks (taken from the live
  // table's, sorted once for both views).
  Array<ScanBlock> unpooled(g_scratch);
  for (size_t i = 0; i < tracked.size() && c.ok; ++i) {
    if (!tracked[i].pooled()) c.ok = unpooled.Push(tracked[i]);
  }
  const size_t npools = pools.size();
  c.ok = c.ok && SortWithMore(&pools, unpooled.data(), unpooled.size());
  // (The unpooled blocks stay apart too: with pools, the detector's view looks up those alone.)
  if (npools == 0) unpooled.Free();
  if (sorting) sorter.Join();
  Array<ScanBlock>& dblocks = pools;
  if (!c.ok || dblocks.size() >= ~uint32_t{0}) {
    out->not_scanned_why = "no memory for the scan";
    return;
  }

  // Nothing live, no pool: every class is empty in both views, with no memory to read.
  if (tracked.size() == 0 && npools == 0) {
    out->scanned = true;
    out->scan_ms = NowMs() - t0;
    return;
  }
  // Its stack gone before the maps are read: no root may lie in memory that goes during the scan.
  prefault.Stop();
  // The other threads' registers, which a detector reads as roots (a thread spinning with the only
  // pointer to a block in a register keeps it); read once, now, each thread stopped only for that.
  Array<RootRange> register_roots(g_scratch);
  RegistersRead registers = {0, tasks > 1 ? static_cast<size_t>(tasks - 1) : 0};
  ThreadRegisters* regs = nullptr;
  const size_t regs_room = tasks > 1 ? static_cast<size_t>(tasks) + 64 : 0;
  void* helper_stack = nullptr;
  if (tasks > 1 && in.deadline_ns == 0 && RegistersReadable()) {
    regs = static_cast<ThreadRegisters*>(g_scratch.Map(regs_room * sizeof(ThreadRegisters)));
    helper_stack = g_scratch.Map(kHelperStackBytes);
    if (regs != nullptr && helper_stack != nullptr) {
      registers = ReadOtherThreadsRegisters(regs, regs_room, helper_stack, kRegistersTimeoutMs);
      for (size_t i = 0; i < registers.read && c.ok; ++i) {
        c.ok = register_roots.Push(RootRange{reinterpret_cast<uintptr_t>(regs[i].words),
                                             reinterpret_cast<uintptr_t>(regs[i].words + ThreadRegisters::kWords)});
      }
    }
    if (helper_stack != nullptr) g_scratch.Unmap(helper_stack, kHelperStackBytes);
  }
  ScratchMapping regs_mapping{regs, regs_room * sizeof(ThreadRegisters)};
  if (g_maps == nullptr) g_maps = new (g_maps_room) track::ProcMaps(g_scratch);
  track::ProcMaps& maps = *g_maps;
  if (!maps.Read()) {
    out->not_scanned_why = "/proc/self/maps could not be read";
    return;
  }
  // With the program's array sorted already, its index is built on a second thread while this one
  // gathers the roots, from now until poolscope's own mappings are listed: its stack and the index's
  // memory are in no list of mappings the roots come from, and the build maps but never unmaps.
  track::BlockIndex program_index(g_scratch);
  IndexJob index_job{&program_index, blocks.data(), blocks.size(), false};
  SideThread indexer;
  bool indexing = sorting && program_sort.ok && c.ok && SideThread::Usable() && indexer.Start(BuildIndex, &index_job);
  const JoinAtExit join_indexer{&indexer, &indexing};
  // The spans of the real blocks and the live table's (the program's pooled blocks lie in pools), both
  // sorted, in which the roots' words may point at a block. (Room for a span a block, of which a
  // heap's few spans touch a page or two.)
  Array<RootRange> spans(g_scratch, /*sparse=*/true), tracked_spans(g_scratch, /*sparse=*/true),
      merged_spans(g_scratch);
  constexpr uintptr_t kSpanGap = uintptr_t{1} << 16;
  bool spans_ok = spans.Resize(dblocks.size()) && tracked_spans.Resize(tracked.size());
  if (spans_ok) {
    spans.Resize(scan::BlockSpans(dblocks.data(), dblocks.size(), kSpanGap, spans.data()));
    tracked_spans.Resize(scan::BlockSpans(tracked.data(), tracked.size(), kSpanGap, tracked_spans.data()));
    spans_ok = PushAll(spans, &merged_spans) && PushAll(tracked_spans, &merged_spans);
  }
  const size_t nspans = spans_ok ? SortAndMerge(merged_spans.data(), merged_spans.size()) : 0;
  spans.Free();
  tracked_spans.Free();
  const bool vm_reader = track::ProcessVmReader::Available();
  track::ProcessVmReader safe_reader;
  track::DirectMemoryReader direct_reader;
  const bool alone = tasks == 1;
  const bool on_valgrind = RUNNING_ON_VALGRIND != 0;
  track::MemoryReader& safe_root_reader = vm_reader ? static_cast<track::MemoryReader&>(safe_reader) : direct_reader;
  // Which pages of a mapping the program ever touched (a page never touched holds no pointer): for
  // the roots (below), and for large blocks, whose untouched pages are not read (TouchedPagesReader)
  // while no other thread runs and not under valgrind (memcheck's view reads through its own reader).
  const FileCloser pagemap{open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)};
  const bool skip_untouched = alone && !on_valgrind && pagemap.fd >= 0;
  TouchedPagesReader touched_reader(direct_reader, pagemap.fd);
  // Other threads may free (and unmap) blocks while they run.
  track::MemoryReader& safe_heap_reader = !alone && vm_reader ? static_cast<track::MemoryReader&>(safe_reader)
                                          : skip_untouched    ? static_cast<track::MemoryReader&>(touched_reader)
                                                              : direct_reader;
  // Blocks are read only where the maps say they can be (a live block may hold a page the program
  // made inaccessible): one reader for each view's thread.
  Array<RootRange> readable(g_scratch);
  for (size_t i = 0; i < maps.size() && c.ok; ++i) {
    if (!maps[i].readable()) continue;
    if (readable.size() > 0 && readable[readable.size() - 1].end == maps[i].start) {
      readable[readable.size() - 1].end = maps[i].end;
    } else {
      c.ok = readable.Push(RootRange{maps[i].start, maps[i].end});
    }
  }
  if (!c.ok) {
    out->not_scanned_why = "no memory for the scan";
    return;
  }
  const bool heap_direct = &safe_heap_reader == &direct_reader;
  CheckedReader checked_heap(safe_heap_reader, readable.data(), readable.size(), heap_direct);
  CheckedReader detector_checked_heap(safe_heap_reader, readable.data(), readable.size(), heap_direct);
  // The check costs a lookup a block: only when some real block (the program's pooled blocks lie in
  // pools, so in these) is not readable whole, as when the program made a page of one PROT_NONE. Every
  // real block lies in one of the spans: when each span is readable whole, so is each block (a test a
  // span, where a pass over the blocks reads millions of records); else each block is tested.
  auto spans_readable = [&] {
    size_t r = 0;
    for (size_t i = 0; i < nspans; ++i) {
      const RootRange& sp = merged_spans[i];
      while (r < readable.size() && readable[r].end <= sp.begin) ++r;
      if (r == readable.size() || readable[r].begin > sp.begin || readable[r].end < sp.end) return false;
    }
    return true;
  };
  const bool checked = !(spans_ok && spans_readable()) &&
                       !track::AllWithinRanges(dblocks.data(), dblocks.size(), readable.data(), readable.size());
  track::MemoryReader& plain_heap = safe_heap_reader;
  MemcheckViewReader memcheck_roots(safe_root_reader),
      memcheck_heap(checked ? static_cast<track::MemoryReader&>(checked_heap) : plain_heap),
      detector_memcheck_heap(checked ? static_cast<track::MemoryReader&>(detector_checked_heap) : plain_heap);
  track::MemoryReader& root_reader = on_valgrind ? static_cast<track::MemoryReader&>(memcheck_roots) : safe_root_reader;
  track::MemoryReader& heap_reader = on_valgrind ? static_cast<track::MemoryReader&>(memcheck_heap)
                                     : checked   ? static_cast<track::MemoryReader&>(checked_heap)
                                                 : plain_heap;
  track::MemoryReader& detector_heap_reader = on_valgrind ? static_cast<track::MemoryReader&>(detector_memcheck_heap)
                                              : checked   ? static_cast<track::MemoryReader&>(detector_checked_heap)
                                                          : plain_heap;
  out->threads_stopped = static_cast<int>(registers.read);
  out->threads_not_stopped = static_cast<int>(registers.failed);

  // What no detector scans: the allocator's heap, dead threads' cached stacks, the exiting thread's
  // stack below its stack pointer. What a detector below poolscope scans but the program's view does
  // not: poolscope's own memory.
  Array<RootRange> both(g_scratch), own(g_scratch);
  Array<uint8_t> hit(g_scratch);
  for (size_t i = 0; i < maps.size() && c.ok; ++i) c.ok = hit.Push(0);
  if (!c.ok) {
    out->not_scanned_why = "no memory for the scan";
    return;
  }
  // Every address the real allocator handed out: a mapping holding one is the allocator's heap, but
  // for glibc's large blocks, each a mapping of its own, which the kernel merges with an anonymous
  // mapping of the program's beside it (python's arenas) whenever they land next to each other: those
  // leave out their own extent alone, so the program's memory stays a root wherever the block lands.
  const bool glibc_below = RealAllocatorIsGlibc();
  track::MarkMappingsHoldingBlocks(maps, dblocks.data(), dblocks.size(), hit.data(), [&](const ScanBlock& b) {
    RootRange extent;
    if (!glibc_below || !GlibcMappedChunk(heap_reader, b, &extent)) return false;
    c.ok = c.ok && both.Push(extent);
    return true;
  });
  // The allocator's own state is no root: glibc's main arena, and the other arenas' heaps whole (each
  // arena lives in its first heap), whether or not they hold a live block.
  uintptr_t arenas[64];
  size_t narenas = 0;
  if (glibc_below) {
    // In place alone and not under valgrind, as the loaded objects' roots are (below).
    const uintptr_t arena = MainArena(root_reader, alone && !on_valgrind ? &maps : nullptr);
    if (arena != 0) {
      c.ok = c.ok && both.Push(RootRange{arena, arena + kArenaBytes});
      narenas = OtherArenas(root_reader, arena, arenas, 64);
    }
  }
  OwnObject self_object = {};
  dl_iterate_phdr(FindOwnObject, &self_object);
  // Offsets from a thread's ThreadState to its thread pointer and to its TLS block of ours.
  const intptr_t tp_off = static_cast<intptr_t>(reinterpret_cast<uintptr_t>(pthread_self()) - in.self_state);
  const intptr_t tls_off = static_cast<intptr_t>(self_object.tls_data - in.self_state);
  // How far below its thread pointer a thread's static TLS begins (the same in every thread).
  uintptr_t lowest_tls = reinterpret_cast<uintptr_t>(pthread_self());
  dl_iterate_phdr(FindLowestTls, &lowest_tls);
  const uintptr_t tls_span = reinterpret_cast<uintptr_t>(pthread_self()) - lowest_tls;
  // (Sparse: it is read into only for a mapping that may be a stack glibc keeps for reuse.)
  auto* window = static_cast<uintptr_t*>(g_scratch.MapSparse(kDescriptorWindow));
  if (window == nullptr) {
    out->not_scanned_why = "no memory for the scan";
    return;
  }
  for (size_t i = 0; i < maps.size() && c.ok; ++i) {
    const track::Mapping& m = maps[i];
    if (hit[i] || ArenaHeap(root_reader, m, arenas, narenas)) {
      c.ok = both.Push(RootRange{m.start, m.end});
      continue;
    }
    if (m.start <= in.exit_sp && in.exit_sp < m.end) {
      c.ok = both.Push(RootRange{m.start, in.exit_sp});
      continue;
    }
    // Only when every thread is registered (a live thread poolscope never saw could own it).
    if (i > 0 && tasks == in.nthreads) {
      const RootRange dead = DeadThreadStack(maps[i - 1], m, root_reader, window, in, tp_off, tls_span);
      if (dead.end != 0) c.ok = both.Push(dead);
    }
  }
  g_scratch.Unmap(window, kDescriptorWindow);
  if (indexing) {
    indexer.Join();
    indexing = false;
  }
  // poolscope's own: its mappings, its writable segments, and each thread's static TLS block of ours;
  // `used_end[i]`, where the part of mapping own[i] ever written ends (InternalNoteUsed), unless it
  // was made pointer_free, where a detector below would find nothing: its start then.
  Array<uintptr_t> used_end(g_scratch);
  RangeSink own_sink{&own, &c.ok};
  for (size_t room = 256;;) {
    // Allocating may add a mapping: ask again until the room is enough.
    const size_t bytes = 3 * room * sizeof(uintptr_t) + room;
    auto* b = static_cast<uintptr_t*>(g_scratch.Map(bytes));
    if (b == nullptr) {
      c.ok = false;
      break;
    }
    uint8_t* const pointer_free = reinterpret_cast<uint8_t*>(b + 3 * room);
    const size_t n = InternalMappings(b, b + room, b + 2 * room, pointer_free, room);
    if (n <= room) {
      for (size_t i = 0; i < n && c.ok; ++i) {
        PushRange(b[i], b[room + i], &own_sink);
        c.ok = c.ok && used_end.Push(pointer_free[i] ? b[i] : b[2 * room + i]);
      }
      g_scratch.Unmap(b, bytes);
      break;
    }
    g_scratch.Unmap(b, bytes);
    room = 2 * n;
  }
  // (Its mappings first: own[0, own_mappings). LeakSanitizer reads none of them, even where the kernel
  // merged one with a thread's stack or TLS mapping.)
  const size_t own_mappings = own.size();
  for (int i = 0; i < self_object.nwritable; ++i) PushRange(self_object.writable[i].begin, self_object.writable[i].end, &own_sink);
  for (int t = 0; t < in.nthreads && self_object.tls_data != 0; ++t) {
    const uintptr_t b = static_cast<uintptr_t>(static_cast<intptr_t>(in.threads[t].state) + tls_off);
    PushRange(b, b + self_object.tls_bytes, &own_sink);
  }
  if (!c.ok) {
    out->not_scanned_why = "no memory for the scan";
    return;
  }
  g_scratch.ForEachLive([&](const RootRange& r) { c.ok = c.ok && both.Push(r); });
  auto by_begin = [](const RootRange& a, const RootRange& b) { return a.begin < b.begin; };
  Array<RootRange> program_exclude(g_scratch);
  c.ok = c.ok && PushAll(both, &program_exclude) && PushAll(own, &program_exclude);
  // Nor, for the program's view, a sanitizer runtime's globals: its allocator's state lies there, and
  // its other pointers into the heap point at blocks poolscope allocated, which a run without
  // poolscope does not have (the detector's view reads them, as LeakSanitizer below does).
  WritableSegments runtime{&program_exclude, Objects::kSanitizerRuntime};
  if (c.ok) dl_iterate_phdr(CollectWritableSegments, &runtime);
  if (!c.ok) {
    out->not_scanned_why = "no memory for the scan";
    return;
  }
  std::sort(program_exclude.data(), program_exclude.data() + program_exclude.size(), by_begin);
  // The roots leave out the pages of the program's anonymous mappings that were never touched
  // (`pagemap`): reserved address space is most of a large program's roots.
  auto roots_of = [&](Array<RootRange>& exclude, Array<RootRange>* roots) {
    size_t cap = 1024;
    for (;;) {
      RootRange* r = static_cast<RootRange*>(g_scratch.Map(cap * sizeof(RootRange)));
      if (r == nullptr) return false;
      size_t n = track::BuildRootRanges(maps, exclude.data(), exclude.size(), r, cap, pagemap.fd);
      if (n <= cap) {
        bool ok = true;
        for (size_t i = 0; i < n && ok; ++i) ok = roots->Push(r[i]);
        g_scratch.Unmap(r, cap * sizeof(RootRange));
        return ok;
      }
      g_scratch.Unmap(r, cap * sizeof(RootRange));
      cap = n;
    }
  };
  // The process's memory as a root (the same for the program's view and the detector's), then the
  // program's view's: its extra roots and those.
  Array<RootRange> base_roots(g_scratch), program_roots(g_scratch), detector_roots(g_scratch);
  // The detector reads poolscope's memory wherever it lies, even in a mapping the kernel merged with
  // the allocator's heap; not the scan's own arrays, which do not exist when the detector looks.
  // Much of it is address space reserved and never touched (the tables' room to grow): only its
  // touched pages are read (poolscope's memory is anonymous, and a page never touched reads as zeros),
  // found as the program's roots are (pagemap).
  // The pool list is not read: what it holds of the heap is a pointer at the start of each pool's
  // real block, which makes every pool reachable in the detector's view, and the view takes them so
  // (ClassifyBesideReached) rather than look them up. Nor is what holds no pointer into the heap by
  // design (stack records, hidden block addresses, counters, frame rules), where the detector finds
  // nothing: most of poolscope's memory (cc1: 1.9 of 2.2 MB; a large live table's arrays whole). Its
  // mappings of that kind end where they start (used_end); its .bss of that kind is left out here.
  Array<RootRange> own_roots(g_scratch), unread(g_scratch), own_pieces(g_scratch);
  RangeSink unread_sink{&unread, &c.ok};
  if (in.for_each_meta_chunk != nullptr) in.for_each_meta_chunk(PushRange, &unread_sink);
  track::ForEachFrameRuleMemory(PushRange, &unread_sink);
  std::sort(unread.data(), unread.data() + unread.size(), by_begin);
  Array<RootRange> detector_extra(g_scratch);
  for (size_t i = 0; i < own.size() && c.ok; ++i) {
    const RootRange o{own[i].begin, i < own_mappings ? used_end[i] : own[i].end};
    bool scratch = false;
    g_scratch.ForEachLive([&](const RootRange& r) { scratch = scratch || (o.begin < r.end && r.begin < o.end); });
    if (scratch) continue;
    own_pieces.Resize(0);
    c.ok = Subtract(&o, 1, unread.data(), unread.size(), &own_pieces);
    for (size_t k = 0; k < own_pieces.size() && c.ok; ++k) {
      track::ForEachTouchedRun(pagemap.fd, own_pieces[k].begin, own_pieces[k].end,
                               [&](uintptr_t b, uintptr_t e) { c.ok = c.ok && own_roots.Push(RootRange{b, e}); });
    }
  }
  c.ok = c.ok && PushAll(own_roots, &detector_extra);
  // The program's registers at its call into exit(), which the exit path's frames below exit_sp save.
  const RootRange exit_registers =
      in.exit_registers != nullptr
          ? RootRange{reinterpret_cast<uintptr_t>(in.exit_registers), reinterpret_cast<uintptr_t>(in.exit_registers + 6)}
          : RootRange{0, 0};
  if (exit_registers.end != 0) c.ok = c.ok && arena_roots.Push(exit_registers);
  c.ok = c.ok && PushAll(register_roots, &arena_roots) && PushAll(register_roots, &detector_extra);
  const bool roots_ok = c.ok && roots_of(program_exclude, &base_roots) &&
                        PushAll(arena_roots, &program_roots) && PushAll(base_roots, &program_roots);
  if (!roots_ok) {
    out->not_scanned_why = "no memory for the scan";
    return;
  }
  for (size_t i = 0; i < program_roots.size(); ++i) out->roots_bytes += program_roots[i].end - program_roots[i].begin;

  // The detector's view (the real blocks: unpooled blocks and pools, poolscope's memory as roots) on a
  // second thread where one may help, while this one classifies the program's blocks.
  std::sort(own_roots.data(), own_roots.data() + own_roots.size(), by_begin);
  OwnInPlaceReader own_in_place(root_reader, own_roots.data(), alone && !on_valgrind ? own_roots.size() : 0);
  // A signal's report cuts the scan off at its deadline: each view's reads through readers that stop
  // (only then: a layer of reader costs a call per block).
  ScanDeadline deadline(in.deadline_ns);
  DeadlineReader deadline_program_heap(heap_reader, deadline),
      deadline_detector_roots(own_in_place, deadline), deadline_detector_heap(detector_heap_reader, deadline);
  const bool timed = in.deadline_ns != 0;
  auto pick = [timed](track::MemoryReader& with_deadline, track::MemoryReader& plain) -> track::MemoryReader& {
    return timed ? with_deadline : plain;
  };
  track::MemoryReader& program_heap_reader = pick(deadline_program_heap, heap_reader);
  // LeakSanitizer's roots: the loaded objects' globals and the threads' stacks and TLS (the mappings
  // holding a thread's stack pointer; of those holding a thread pointer, what it reads there), less
  // what no detector scans.
  Array<RootRange> lsan_candidates(g_scratch), lsan_roots(g_scratch), program_lsan_roots(g_scratch);
  bool lsan_wanted = false;
  if (dblocks.size() > kLsanViewMaxBlocks || in.pooled_blocks_hint + tracked.size() > kLsanViewMaxBlocks) {
    out->lsan_not_scanned_why = kLsanTooManyBlocks;
  } else if (timed) {
    out->lsan_not_scanned_why = "not computed for a signal's report";
  } else {
    Array<RootRange> exclude(g_scratch);
    bool ok = true;
    WritableSegments globals{&lsan_candidates, Objects::kAll};
    dl_iterate_phdr(CollectWritableSegments, &globals);
    // A thread's static TLS ends with its descriptor, which glibc places at the top of a thread's stack
    // (LeakSanitizer reads the stack up to it) and, for the main thread, in memory the dynamic loader
    // mapped for itself, where LeakSanitizer reads the static TLS alone: the kernel may have merged
    // that mapping with one of the program's, which it does not read.
    const StaticTls static_tls = GlibcStaticTls();
    const pid_t pid = getpid();
    for (size_t i = 0; i < maps.size() && ok; ++i) {
      const track::Mapping& m = maps[i];
      if (!m.readable() || !m.writable()) continue;
      if (strcmp(m.path, "[stack]") == 0 || (m.start <= in.exit_sp && in.exit_sp < m.end)) {
        ok = lsan_candidates.Push(RootRange{m.start, m.end});
        continue;
      }
      for (int t = 0; t < in.nthreads && ok && m.path[0] == '\0'; ++t) {
        const uintptr_t tp = static_cast<uintptr_t>(static_cast<intptr_t>(in.threads[t].state) + tp_off);
        if (tp < m.start || m.end <= tp) continue;
        RootRange r{m.start, m.end};
        if (static_tls.bytes != 0) {
          r.end = std::min(m.end, tp + static_tls.descriptor);
          if (in.threads[t].tid == pid) r.begin = std::max(m.start, r.end - static_tls.bytes);
        }
        ok = lsan_candidates.Push(r);
      }
    }
    // The exiting thread's stack from where its exit work runs now, not from the program's call into
    // exit(): LeakSanitizer checks from an exit handler and reads what its stack pointer leaves above
    // it, dead frames included.
    const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    for (size_t i = 0; i < both.size() && ok; ++i) {
      RootRange x = both[i];
      if (x.end == in.exit_sp && x.begin < here && here < in.exit_sp) x.end = here;
      ok = exclude.Push(x);
    }
    for (size_t i = 0; i < own_mappings && ok; ++i) ok = exclude.Push(own[i]);
    // (Nor poolscope's globals that hold no pointer into the heap: LeakSanitizer would read them, and
    // find nothing.)
    ok = ok && PushAll(unread, &exclude);
    // Of the objects' globals (a library's .bss may be megabytes reserved) and the stacks, only the
    // touched pages of anonymous memory are read, as of the other views' roots: an untouched page
    // reads as zeros.
    Array<RootRange> whole(g_scratch);
    auto touched_parts = [&](Array<RootRange>* roots) {
      bool pushed = true;
      for (size_t i = 0; i < whole.size() && pushed; ++i) {
        track::ForEachTouchedPart(maps, whole[i].begin, whole[i].end, pagemap.fd, [&](uintptr_t b, uintptr_t e) {
          pushed = pushed && roots->Push(RootRange{b, e});
        });
      }
      whole.Resize(0);
      return pushed;
    };
    size_t k = 0;
    if (ok) {
      std::sort(exclude.data(), exclude.data() + exclude.size(), by_begin);
      // Overlapping candidates (a segment inside a stack mapping cannot be, but be safe) merged.
      k = SortAndMerge(lsan_candidates.data(), lsan_candidates.size());
      ok = Subtract(lsan_candidates.data(), k, exclude.data(), exclude.size(), &whole) && touched_parts(&lsan_roots);
    }
    ok = ok && PushAll(register_roots, &lsan_roots);
    // For the program's blocks, poolscope's own memory is no root and the exiting thread's stack
    // starts at the program's call into exit() (below it lies poolscope's exit work, where
    // LeakSanitizer run alone has its own): those it loses that sit in pools are what LeakSanitizer
    // below cannot report.
    ok = ok &&
         Subtract(lsan_candidates.data(), k, program_exclude.data(), program_exclude.size(), &whole) &&
         touched_parts(&program_lsan_roots) &&
         (exit_registers.end == 0 || program_lsan_roots.Push(exit_registers)) &&
         PushAll(register_roots, &program_lsan_roots);
    lsan_wanted = ok;
    if (!ok) out->lsan_not_scanned_why = "no memory for the scan";
  }
  // LeakSanitizer's roots outside memcheck's, for each set of blocks: of the objects' writable segments
  // what is read-only now (RELRO: the GOT and .data.rel.ro, which hold pointers into code and data,
  // not the heap), where memcheck reads nothing, and for the real blocks the exiting thread's stack
  // below the program's call into exit(). When they hold no word that would change a class, each
  // LeakSanitizer view is marked within memcheck's (below): for the real blocks, the words of
  // lsan_common first, then those of detector_lsan_only.
  Array<RootRange> lsan_only(g_scratch), lsan_common(g_scratch), detector_lsan_only(g_scratch);
  if (lsan_wanted) {
    // The parts of `view`'s ranges outside those of `within` and `also` (any order, may overlap) into
    // *only, and the parts inside them into *common (when not null).
    auto split = [&](Array<RootRange>& view, Array<RootRange>& within, Array<RootRange>* also,
                     Array<RootRange>* only, Array<RootRange>* common) {
      Array<RootRange> w(g_scratch), v(g_scratch);
      if (!PushAll(within, &w) || (also != nullptr && !PushAll(*also, &w)) || !PushAll(view, &v)) return false;
      const size_t nw = SortAndMerge(w.data(), w.size()), nv = SortAndMerge(v.data(), v.size());
      return Subtract(v.data(), nv, w.data(), nw, only) &&
             (common == nullptr || Subtract(v.data(), nv, only->data(), only->size(), common));
    };
    if (!split(program_lsan_roots, program_roots, nullptr, &lsan_only, nullptr) ||
        !split(lsan_roots, base_roots, &detector_extra, &detector_lsan_only, &lsan_common)) {
      lsan_wanted = false;
      out->lsan_not_scanned_why = "no memory for the scan";
    }
  }
  // Every view's roots read once (root_words.h): the words that may point at a block, in the spans
  // found above.
  Array<uint64_t> program_words(g_scratch), detector_words(g_scratch), lsan_words(g_scratch),
      program_lsan_words(g_scratch), lsan_only_words(g_scratch), detector_lsan_only_words(g_scratch);
  const RootView views[] = {{program_roots.data(), program_roots.size()},
                            {base_roots.data(), base_roots.size()},
                            {lsan_common.data(), lsan_common.size()},
                            {program_lsan_roots.data(), lsan_wanted ? program_lsan_roots.size() : 0},
                            {lsan_only.data(), lsan_only.size()},
                            {detector_lsan_only.data(), detector_lsan_only.size()}};
  Array<uint64_t>* const words[] = {&program_words,       &detector_words,  &lsan_words,
                                    &program_lsan_words,  &lsan_only_words, &detector_lsan_only_words};
  RootWordsRead roots_read;
  // Alone and not under valgrind, the touched pages of private anonymous mappings are read in place
  // (nothing unmaps them meanwhile, and untouched pages, guard pages among them, are no roots), and so
  // are the loaded objects' writable segments (their data, relocated data and GOT) where the maps say
  // they are readable: a file truncated under them would fault the program's own next use of its
  // globals and the exit's destructors as well. Only other files' mappings, which a truncated file can
  // make fault where the program never looks, go through the kernel (a system call and a page pinned
  // per page: 0.4 ms for the 280 KB of relocated data LeakSanitizer's views read in `as`).
  Array<RootRange> in_place_ranges(g_scratch), segments(g_scratch);
  bool in_place_ok = true;
  if (skip_untouched) {
    WritableSegments loaded{&segments, Objects::kAll};
    dl_iterate_phdr(CollectWritableSegments, &loaded);
    segments.Resize(SortAndMerge(segments.data(), segments.size()));
    // Each view's ranges lie within one mapping or none (BuildRootRanges, ForEachTouchedPart), but for
    // a few of poolscope's own, which own_roots covers.
    auto add_anonymous = [&](Array<RootRange>& ranges) {
      for (size_t i = 0; i < ranges.size() && in_place_ok; ++i) {
        const RootRange& r = ranges[i];
        const size_t lo = track::PartitionPoint(0, maps.size(), [&](size_t k) { return maps[k].end <= r.begin; });
        if (lo < maps.size() && maps[lo].start <= r.begin && r.end <= maps[lo].end &&
            (track::IsPrivateAnonymous(maps[lo]) ||
             (maps[lo].readable() && InsideOne(segments.data(), segments.size(), r.begin, r.end)))) {
          in_place_ok = in_place_ranges.Push(r);
        }
      }
    };
    add_anonymous(base_roots);
    if (lsan_wanted) {
      add_anonymous(lsan_roots);
      add_anonymous(program_lsan_roots);
    }
    in_place_ok = in_place_ok && PushAll(own_roots, &in_place_ranges);
    in_place_ranges.Resize(in_place_ok ? SortAndMerge(in_place_ranges.data(), in_place_ranges.size()) : 0);
  }
  OwnInPlaceReader roots_in_place(root_reader, in_place_ranges.data(), in_place_ok ? in_place_ranges.size() : 0);
  DeadlineReader deadline_roots_in_place(roots_in_place, deadline);
  if (!spans_ok || !CollectRootWords(views, 6, pick(deadline_roots_in_place, roots_in_place), merged_spans.data(), nspans,
                                     g_scratch, words, &roots_read)) {
    out->not_scanned_why = "no memory for the scan";
    return;
  }
  out->roots_read_bytes = roots_read.bytes_read;
  base_roots.Free();
  // Each view's roots: its words, read in place; the detector's extra roots, poolscope's memory, first.
  track::DirectMemoryReader in_place;
  WordsInPlaceReader program_root_reader(in_place, program_words.data(), program_words.size()),
      detector_root_reader(pick(deadline_detector_roots, own_in_place), detector_words.data(), detector_words.size()),
      program_lsan_root_reader(in_place, program_lsan_words.data(), program_lsan_words.size());
  const RootRange program_words_range = program_root_reader.range(),
                  program_lsan_words_range = program_lsan_root_reader.range();
  // LeakSanitizer's roots of the real blocks: the words of both its parts (read in place, as words).
  const RootRange lsan_words_ranges[2] = {
      {reinterpret_cast<uintptr_t>(lsan_words.data()), reinterpret_cast<uintptr_t>(lsan_words.data() + lsan_words.size())},
      {reinterpret_cast<uintptr_t>(detector_lsan_only_words.data()),
       reinterpret_cast<uintptr_t>(detector_lsan_only_words.data() + detector_lsan_only_words.size())}};
  if (!PushAll(detector_extra, &detector_roots) || !detector_roots.Push(detector_root_reader.range())) {
    out->not_scanned_why = "no memory for the scan";
    return;
  }
  // (LeakSanitizer's view of the real blocks reads through the detector's heap reader once memcheck's
  // is done, on the same thread; the program's view counts what could not be read.)
  DetectorJob job{dblocks.data(), dblocks.size(), detector_roots.data(), detector_roots.size(),
                  &detector_root_reader, &pick(deadline_detector_heap, detector_heap_reader),
                  {}, false,
                  lsan_wanted ? lsan_words_ranges : nullptr, detector_lsan_only_words.data(),
                  detector_lsan_only_words.size(), &in_place, out, false,
                  npools > 0, unpooled.data(), unpooled.size()};
  SideThread side;
  const bool parallel = blocks.size() + tracked.size() + dblocks.size() >= kParallelViewBlocks &&
                        SideThread::Usable() &&
                        side.Start(ClassifyForDetector, &job);
  // Meanwhile the program's view: the pools' blocks and the live table's, in the pooled blocks' array,
  // sorted here while the detector's view starts (unless sorted already).
  if (!sorting) SortProgramBlocks(&program_sort);
  bool program_ok = c.ok && program_sort.ok;
  tracked.Free();
  // LeakSanitizer's view of the program's blocks is marked within the program's own, first, when its
  // roots' words are among the program's (all but those of lsan_only, which then holds none): what its
  // roots alone mark is what it keeps (ClassifyIndexedAfter), and the program's classes stay those of
  // its own roots.
  Array<uint8_t> lsan_kept(g_scratch);
  const bool lsan_shared = lsan_wanted && program_ok && blocks.size() <= kLsanViewMaxBlocks &&
                           lsan_only_words.size() == 0 && lsan_kept.Resize(blocks.size());
  // (The index the second thread built, else one built here.)
  track::BlockIndex own_index(g_scratch);
  track::BlockIndex& index = index_job.ok ? program_index : own_index;
  program_ok = program_ok && (index_job.ok || own_index.Build(blocks.data(), blocks.size())) &&
               (lsan_shared ? track::ClassifyIndexedAfter(index, &program_lsan_words_range, 1, program_lsan_root_reader,
                                                          lsan_kept.data(), &program_words_range, 1,
                                                          program_root_reader, program_heap_reader, g_scratch,
                                                          &out->program)
                            : track::ClassifyIndexed(index, &program_words_range, 1, program_root_reader,
                                                     program_heap_reader, g_scratch, &out->program));
  // (What the program's view could not read; LeakSanitizer's view below reads some of it again.)
  out->unreadable_bytes = checked_heap.unreadable();
  Array<ScanBlock> program_lsan(g_scratch);
  const bool lsan_program_ok =
      lsan_shared ? program_ok
                  : lsan_wanted && program_ok && blocks.size() <= kLsanViewMaxBlocks &&
                        ClassifyCopy(blocks.data(), blocks.size(), &program_lsan_words_range, 1,
                                     program_lsan_root_reader, heap_reader, &program_lsan);
  if (parallel) {
    side.Join();
  } else if (program_ok) {
    ClassifyForDetector(&job);
  }
  out->detector = job.ok ? job.result : track::ReachabilityResult{};
  out->parallel = parallel;
  if (!program_ok) {
    out->program = {};
    out->detector = {};
    out->not_scanned_why = "no memory for the scan";
    return;
  }
  if (deadline.passed()) {
    out->program = {};
    out->detector = {};
    out->not_scanned_why = "cut off at the deadline of the signal's report";
    return;
  }
  // LeakSanitizer's views, classified beside the others (the detector's on the side thread after
  // memcheck's, the program's here): either both or none.
  if (lsan_wanted && (!lsan_program_ok || !job.lsan_ok || blocks.size() > kLsanViewMaxBlocks)) {
    out->lsan_leaked = out->lsan_direct = out->lsan_indirect = out->lsan_hidden_in_pools = {};
    out->lsan_not_scanned_why = blocks.size() > kLsanViewMaxBlocks ? kLsanTooManyBlocks : "no memory for the scan";
  } else if (lsan_wanted) {
    out->lsan_scanned = true;
    out->lsan_hidden_in_pools = lsan_shared ? LostInPools(blocks.data(), lsan_kept.data(), blocks.size(), LsanBytes)
                                            : LostInPools(program_lsan.data(), program_lsan.size(), LsanBytes);
  }
  out->hidden_in_pools = out->program.pooled_lost;
  g_blocks = blocks.data();
  g_nblocks = blocks.size();
  g_blocks_bytes = blocks.capacity() * sizeof(ScanBlock);
  blocks.Release();

  out->scanned = true;
  out->scan_ms = NowMs() - t0;
}

}  // namespace

const ScanOutcome& ScanAtExit(const ScanInputs& in) {
  if (!g_done) {
    g_done = true;
    g_outcome = ScanOutcome{};
    const int saved_errno = errno;
    Classify(in, &g_outcome);
    g_scratch.ReleaseIdle();
    errno = saved_errno;
  }
  return g_outcome;
}

void ReleaseScan() {
  if (g_maps != nullptr) {
    g_maps->~ProcMaps();
    g_maps = nullptr;
  }
  if (g_blocks != nullptr) {
    memset(g_blocks, 0, g_nblocks * sizeof(ScanBlock));
    g_scratch.Unmap(g_blocks, g_blocks_bytes);
    g_blocks = nullptr;
    g_nblocks = 0;
  }
  g_scratch.ReleaseIdle();
}

const ScanOutcome* LastScan() { return g_done ? &g_outcome : nullptr; }

// (A read that failed left no mapping.)
const track::ProcMaps* ScanMaps() { return g_maps != nullptr && g_maps->size() > 0 ? g_maps : nullptr; }

LeakKind ScannedKind(uintptr_t p) {
  // The report asks while it walks the pools, nearly in address order: from where the last answer was.
  // A hint only, so a relaxed atomic is enough.
  static std::atomic<size_t> last{0};
  const size_t i = track::LowerBoundFrom(g_blocks, g_nblocks, last.load(std::memory_order_relaxed), p,
                                         [](const ScanBlock& b) { return uint64_t{b.start}; });
  last.store(i, std::memory_order_relaxed);
  if (i < g_nblocks && g_blocks[i].start == p) return g_blocks[i].kind();
  return LeakKind::kStillReachable;
}

}  // namespace poolscope
