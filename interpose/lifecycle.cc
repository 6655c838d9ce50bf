// File: interpose/lifecycle.cc
//
// The process's life cycle: load (OnLoad), the warning when another allocator shadows poolscope,
// exit and unload with the exit report (on a stack of its own when needed), and snapshots of every
// counter for the report.
#include "interpose/shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "interpose/attach.h"
#include "interpose/internal.h"
#include "interpose/leak_exit.h"
#include "interpose/leak_scan.h"
#include "interpose/real.h"
#include "interpose/shim_internal.h"
#include "interpose/signals.h"
#include "interpose/snapshot.h"
#include "interpose/tracking.h"

namespace poolscope {

// The report's poolscope_version.
extern const char* const kVersion;
const char* const kVersion = "0.1.0";

// ---- process life cycle and snapshots -----------------------------------------------------------------

namespace {
void OnQuickExit() { OnExitCall(); }

// A report signal that stopped this thread while poolscope worked on it (perhaps inside the allocator
// below, or holding a lock of tracking's): taken over, its report written when the outermost Guard
// or Busy ends (signals.h).
bool DeferSignalReport(int sig) {
  ThreadState& ts = t_state;
  if (ts.guard == 0 && ts.busy == 0) return false;
  ts.pending_signal = sig;
  return true;
}

// The address a dynamic-section entry of `lm` points at: the loader rewrote most objects' entries to
// addresses when it relocated them, but not those it could not write (the vDSO's), which stay offsets.
uintptr_t DynamicAddress(const struct link_map* lm, ElfW(Addr) value) {
  return value < lm->l_addr ? lm->l_addr + value : value;
}

// The dynamic symbol `name` of `lm`, through its GNU or SysV hash table; nullptr when it has none.
// (dladdr1's answer for an address, the same entry, costs a pass over every symbol of the object:
// 1.7M instructions for GCC's cc1 and its 28,902 symbols.)
const ElfW(Sym)* FindDynamicSymbol(const struct link_map* lm, const char* name) {
  const uint32_t* gnu = nullptr;
  const uint32_t* sysv = nullptr;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  for (const ElfW(Dyn)* d = lm->l_ld; d != nullptr && d->d_tag != DT_NULL; ++d) {
    const uintptr_t at = DynamicAddress(lm, d->d_un.d_ptr);
    switch (d->d_tag) {
      case DT_GNU_HASH: gnu = reinterpret_cast<const uint32_t*>(at); break;
      case DT_HASH: sysv = reinterpret_cast<const uint32_t*>(at); break;
      case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(at); break;
      case DT_STRTAB: strtab = reinterpret_cast<const char*>(at); break;
      default: break;
    }
  }
  if (symtab == nullptr || strtab == nullptr) return nullptr;
  if (gnu != nullptr) {
    uint32_t h = 5381;
    for (const char* c = name; *c != '\0'; ++c) h = h * 33 + static_cast<uint8_t>(*c);
    const uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_words = gnu[2];
    if (nbuckets == 0) return nullptr;
    const uint32_t* buckets = gnu + 4 + bloom_words * (sizeof(ElfW(Addr)) / 4);
    const uint32_t* chain = buckets + nbuckets;
    uint32_t i = buckets[h % nbuckets];
    if (i < symoffset) return nullptr;
    for (;; ++i) {
      const uint32_t hi = chain[i - symoffset];
      if ((hi | 1) == (h | 1) && strcmp(strtab + symtab[i].st_name, name) == 0) return &symtab[i];
      if (hi & 1) return nullptr;
    }
  }
  if (sysv != nullptr) {
    uint32_t h = 0;
    for (const char* c = name; *c != '\0'; ++c) {
      h = (h << 4) + static_cast<uint8_t>(*c);
      h ^= (h >> 24) & 0xf0;
    }
    h &= 0x0fffffff;
    const uint32_t nbuckets = sysv[0], nchain = sysv[1];
    if (nbuckets == 0) return nullptr;
    const uint32_t* chain = sysv + 2 + nbuckets;
    for (uint32_t i = sysv[2 + h % nbuckets]; i != STN_UNDEF && i < nchain; i = chain[i]) {
      if (strcmp(strtab + symtab[i].st_name, name) == 0) return &symtab[i];
    }
  }
  return nullptr;
}

// The program as the warning names it: its argv[0] (the executable's own entry has no name).
const char* ProgramName() {
  return program_invocation_name != nullptr && program_invocation_name[0] != '\0' ? program_invocation_name
                                                                                  : "the program";
}

bool Defines(const struct link_map* lm, const char* name) {
  const ElfW(Sym)* sym = FindDynamicSymbol(lm, name);
  return sym != nullptr && sym->st_shndx != SHN_UNDEF && sym->st_value != 0;
}

// The object the program's calls to `name` bind to: the first object in the global search order that
// defines it. That is where dlsym(RTLD_DEFAULT) points, except for a non-PIE executable that takes the
// function's address (python3 and GCC's cc1 do): it exports a "canonical PLT" entry, an undefined
// symbol with the address of its PLT slot. dlsym returns that; calls skip it and bind to the next
// definition, which is looked up here object by object, in load order. nullptr when none is found.
const struct link_map* CallsBindTo(const char* name) {
  struct dl_find_object obj;
  void* fn = dlsym(RTLD_DEFAULT, name);
  if (fn == nullptr || _dl_find_object(fn, &obj) != 0 || obj.dlfo_link_map == nullptr) return nullptr;
  const struct link_map* lm = obj.dlfo_link_map;
  if (Defines(lm, name)) return lm;
  for (lm = lm->l_next; lm != nullptr; lm = lm->l_next) {
    if (Defines(lm, name)) return lm;
  }
  return nullptr;
}

// Whether the process's malloc and free are this library's. A program that defines its own (or an
// allocator preloaded ahead of this library) comes first in symbol lookup: poolscope then sees none
// of the program's allocations, and its report would say nothing without saying why. One warning line
// names the object whose function wins.
void WarnIfShadowed() {
  struct dl_find_object self;
  if (_dl_find_object(reinterpret_cast<void*>(&OnLoad), &self) != 0 || self.dlfo_link_map == nullptr) return;
  for (const char* name : {"malloc", "free"}) {
    const struct link_map* theirs = CallsBindTo(name);
    if (theirs == nullptr || theirs == self.dlfo_link_map) continue;
    char line[600];
    snprintf(line, sizeof line,
             "%s() comes from %s, not from poolscope: the program's allocations are not seen, and the report "
             "counts none of them",
             name, theirs->l_name != nullptr && theirs->l_name[0] != '\0' ? theirs->l_name : ProgramName());
    WarnLine(nullptr, line);
    return;
  }
}
}  // namespace

void OnLoad() {
  ThreadState& ts = t_state;
  Enter(ts);
  if (ts.phase == kActive) {
    SetLimits(ts);
    // leak_exitcode: the blocks library initialisers made before this constructor ran (poolscope's
    // own dependencies among them) are not the program's leaks.
    if (g_options.leak_exitcode > 0) {
      Guard guard(ts);
      SnapshotNow snap;
      if (snap.get() != nullptr) TakeLeakBaseline(LogicalLive(*snap.get()));
    }
    if (g_tracking && g_options.reachability) PrepareScan();
    TimelineStart(strcmp(g_options.report, "none") != 0);
    StartSnapshots(g_options);
    // quick_exit() runs the at_quick_exit handlers, then glibc's internal _exit (which the interposed
    // _exit never sees): the report is written by a handler of our own. Registered before the
    // program's, it runs after them.
    Guard guard(ts);
    at_quick_exit(OnQuickExit);
    // Loaded into a running process (`poolscope attach`): its signal dispositions stay as they are,
    // and its calls reach poolscope through the GOT entries attach.cc rewrites, not by symbol lookup.
    if (AttachMode()) return;
    // SIGTERM, SIGINT and SIGHUP with their default action write the exit report first (signals.h).
    if (strcmp(g_options.report, "none") != 0) {
      g_pending_signal_report = RunDeferredSignalReport;
      InstallSignalReport(OnExitCall, DeferSignalReport);
    }
    WarnIfShadowed();
  }
}

// The exit-time report is written on a stack of its own when the process ends from a thread other
// than the main one: writing it (the snapshot, symbolizing, the JSON) on the stack of a thread that
// called exit() needs a 24 KiB thread (16 and 20 KiB are too small), and programs make threads as
// small as PTHREAD_STACK_MIN (16 KiB, their TLS included). The stack is mapped for the call (only the
// pages used are touched), with its lowest page left inaccessible, and unmapped afterwards. The main
// thread's stack is the process's (RLIMIT_STACK) and is used as it is (exit() from a coroutine of
// 8 KiB on it works).
namespace {
constexpr size_t kExitStackBytes = size_t{1} << 20;

// The exiting thread's stack pointer where poolscope's exit work began: the reachability scan reads
// that thread's stack from there up.
uintptr_t g_exit_sp = 0;

void ForEachPoolForScan(void (*pool_fn)(uintptr_t real, size_t real_bytes, uintptr_t base, size_t pool_bytes,
                                        bool explicit_arena, void* arg),
                        void (*block_fn)(uintptr_t block, uint64_t size, void* arg), void* arg, int part,
                        int parts) {
  if (g_domain == nullptr) return;
  const size_t bytes = g_domain->pool_bytes();
  const size_t real_bytes = g_domain->real_bytes();
  auto on_pool = [&](char* base, bool explicit_arena, void* real) {
    pool_fn(reinterpret_cast<uintptr_t>(real), real_bytes, reinterpret_cast<uintptr_t>(base), bytes, explicit_arena,
            arg);
  };
  g_domain->ForEachPoolWithBlocks(
      on_pool, [&](void* p, pool::BlockInfo info) { block_fn(reinterpret_cast<uintptr_t>(p), info.size, arg); },
      static_cast<size_t>(part), static_cast<size_t>(parts));
}

size_t PoolsListedForScan(int part, int parts) {
  return g_domain != nullptr ? g_domain->ListedEntries(static_cast<size_t>(part), static_cast<size_t>(parts)) : 0;
}

void ForEachMetaChunkForScan(void (*fn)(uintptr_t begin, uintptr_t end, void* arg), void* arg) {
  if (g_domain != nullptr) g_domain->ForEachMetaChunk([&](uintptr_t b, uintptr_t e) { fn(b, e, arg); });
}

// The pooled blocks live now (hits less pooled frees, settled as TakeSnapshot settles them): the
// scan's hint for its arrays, without a snapshot's reading of poolscope's own resident memory.
uint64_t PooledBlocksNow() {
  SpinLockHolder lock(&g_registry_lock);
  pool::PoolStats total = g_ended_pool;
  for (ThreadState* ts = g_threads; ts != nullptr; ts = ts->next) {
    ThreadCounters c;
    pool::PoolStats stats;
    SettledCopy(*ts, &c, &stats);
    pool::AddStats(&total, stats);
  }
  return total.hits > total.pooled_frees ? total.hits - total.pooled_frees : 0;
}

// reachability=1: classifies the live blocks before the exit report is written (once).
void ScanBeforeExitReport() {
  const Options& o = g_options;
  if (!g_tracking || !o.reachability || (o.leak_exitcode <= 0 && strcmp(o.report, "none") == 0)) return;
  ScanThread* threads = nullptr;
  int n = 0;
  {
    SpinLockHolder lock(&g_registry_lock);
    for (ThreadState* ts = g_threads; ts != nullptr; ts = ts->next) ++n;
    threads = static_cast<ScanThread*>(InternalAlloc(sizeof(ScanThread) * (n + 1)));
    if (threads == nullptr) return;
    int i = 0;
    for (ThreadState* ts = g_threads; ts != nullptr && i < n; ts = ts->next) {
      threads[i++] = ScanThread{ts->tid, reinterpret_cast<uintptr_t>(ts)};
    }
  }
  ScanInputs in = {};
  in.threads = threads;
  in.nthreads = n;
  in.exit_sp = g_exit_sp;
  if (poolscope_exit_registers[6] == 1) in.exit_registers = poolscope_exit_registers;
  if (const uint64_t signalled = ReportSignalNs(); signalled != 0) in.deadline_ns = signalled + kScanBudgetMs * 1000000;
  in.self_state = reinterpret_cast<uintptr_t>(&t_state);
  in.for_each_pool = ForEachPoolForScan;
  in.for_each_meta_chunk = ForEachMetaChunkForScan;
  in.pools_listed = PoolsListedForScan;
  in.pooled_blocks_hint = PooledBlocksNow();
  ScanAtExit(in);
  InternalFree(threads, sizeof(ScanThread) * (n + 1));
}

struct ExitReport {
  bool may_change_status;
  int status;
  ucontext_t caller;
};

// makecontext passes int arguments: the ExitReport's address comes in two halves.
void WriteExitReportOnOwnStack(unsigned hi, unsigned lo) {
  auto* r = reinterpret_cast<ExitReport*>((uintptr_t{hi} << 32) | lo);
  ScanBeforeExitReport();
  r->status = WriteReportAtExit(g_options, r->may_change_status);
  ReleaseScan();
}  // back to r->caller (uc_link)

int WriteExitReport(bool may_change_status) {
  // Set once, before getcontext: nothing after the context switch may see it change.
  char* const stack = GetTid() != getpid() ? static_cast<char*>(InternalAlloc(kExitStackBytes)) : nullptr;
  ucontext_t context;
  if (stack == nullptr || mprotect(stack, 4096, PROT_NONE) != 0 || getcontext(&context) != 0) {
    InternalFree(stack, kExitStackBytes);
    ScanBeforeExitReport();
    const int status = WriteReportAtExit(g_options, may_change_status);
    ReleaseScan();
    return status;
  }
  ExitReport r;
  r.may_change_status = may_change_status;
  r.status = 0;
  context.uc_stack.ss_sp = stack;
  context.uc_stack.ss_size = kExitStackBytes;
  context.uc_link = &r.caller;
  const uintptr_t a = reinterpret_cast<uintptr_t>(&r);
  makecontext(&context, reinterpret_cast<void (*)()>(WriteExitReportOnOwnStack), 2,
              static_cast<unsigned>(a >> 32), static_cast<unsigned>(a));
  const unsigned id = VALGRIND_STACK_REGISTER(stack, stack + kExitStackBytes);
  if (swapcontext(&r.caller, &context) != 0) {
    ScanBeforeExitReport();
    r.status = WriteReportAtExit(g_options, may_change_status);
    ReleaseScan();
  }
  VALGRIND_STACK_DEREGISTER(id);
  InternalFree(stack, kExitStackBytes);
  return r.status;
}
}  // namespace

// _exit() and _Exit(): the report is written, and the status is the program's own whatever it leaks
// (docs/report-schema.md, `leak_check`): these calls skip the exit-time cleanup on purpose (fork()
// children after their work, dash, 127 after a failed exec), so what is live then was let go, not
// forgotten; LeakSanitizer does not check leaks there either.
void OnExitCall() {
  ThreadState& ts = t_state;
  if (g_init.load(std::memory_order_acquire) != 2) return;
  // A vfork() child shares its parent's memory and ran no fork handler: it must not touch our state.
  if (getpid() != g_process.pid) return;
  Guard guard(ts);
  if (g_exit_sp == 0) g_exit_sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  WriteExitReport(false);
}

// `poolscope attach` interrupted: the report now, from the thread gdb runs the call on; the process
// goes on, and writes no report at its exit.
void WriteDetachReport() {
  ThreadState& ts = t_state;
  if (g_init.load(std::memory_order_acquire) != 2) return;
  Guard guard(ts);
  g_exit_sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  WriteExitReport(false);
}

void OnUnload() {
  ThreadState& ts = t_state;
  if (g_init.load(std::memory_order_acquire) != 2) return;
  Guard guard(ts);
  // The walk up to exit()'s frame, at every exit, a scan or not: without it LeakSanitizer below
  // poolscope (report=none), checking after this, finds the address of one of supp_leaks' aligned
  // blocks on its own stack and misses a leak it reports bare (suppressions_adapt_test). Zeroing the
  // dead stack below this frame instead (2 or 16 KiB) does not help, so what the walk changes is not
  // only the stack its frames overwrite (they reach 1.0-1.4 KiB below this one); it is not known yet.
  if (g_exit_sp == 0) {
    track::StartFrame from;
    g_exit_sp = ProgramFrame(&from, __builtin_return_address(0), __builtin_dwarf_cfa(), __builtin_frame_address(0))
                    ? ExitPathSp(from)
                    : reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  }
  if (g_options.drain_at_exit && ts.phase == kActive) {
    uint64_t before = ts.tc.stats().pools_released;
    ts.tc.Drain();
    g_drained_at_exit = ts.tc.stats().pools_released - before;
  }
  // exit() in a vfork() child (which it must not call) would be judging its parent's blocks.
  int status = WriteExitReport(getpid() == g_process.pid);
  if (status != 0) ExitForLeaks(status);
}

const Options& CurrentOptions() { return g_options; }
const ProcessInfo& CurrentProcess() { return g_process; }

void TakeSnapshot(Snapshot* s) {
  ThreadState& self = t_state;
  SpinLockHolder lock(&g_registry_lock);
  s->totals = g_ended;
  s->tracked_bytes = TrackedBytesNow();
  s->pool = g_ended_pool;
  s->records = g_records;
  s->records_omitted = g_records_omitted;
  s->live_threads = 0;
  s->pools_cached = 0;
  for (ThreadState* ts = g_threads; ts != nullptr; ts = ts->next) {
    // Other threads keep counting: settle a copy.
    ThreadCounters c;
    pool::PoolStats stats;
    SettledCopy(*ts, &c, &stats);
    AddCounters(&s->totals, c);
    pool::AddStats(&s->pool, stats);
    s->pools_cached += static_cast<uint64_t>(ts->tc.cached());
    if (s->live_threads < Snapshot::kMaxLive) {
      LiveThread& lt = s->live[s->live_threads++];
      lt.tid = ts->tid;
      lt.self = ts == &self;
      lt.c = c;
      lt.pool = stats;
      lt.cached = ts->tc.cached();
    }
  }
  s->pooling = g_pooling;
  s->pool_size = g_pool_size;
  s->pools_per_thread = g_domain != nullptr ? g_domain->config().max_cached : g_options.pools;
  s->fork_carryover = g_fork_carryover;
  s->threads_lost_at_fork = g_threads_lost_at_fork;
  s->drained_at_exit = g_drained_at_exit;
  InternalSnapshot(&s->internal);
  s->internal.bootstrap_allocs = g_bootstrap_allocs;
  s->internal.bootstrap_bytes = g_bootstrap_bytes;
  s->internal.passthrough_allocs = g_passthrough_allocs.load(std::memory_order_relaxed);
  s->internal.passthrough_frees = g_passthrough_frees.load(std::memory_order_relaxed);
}


}  // namespace poolscope
