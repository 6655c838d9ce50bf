// File: interpose/scan_roots.cc
//
// The exit scan's roots, piece by piece (leak_scan_internal.h): libpoolscope.so's own object and the
// threads' TLS, loaded objects' writable segments, what glibc's allocator keeps (its main arena, its
// blocks mapped for themselves), range arithmetic, and where the exiting thread's live stack begins
// (ExitPathSp, leak_scan.h).
#include <dlfcn.h>
#include <link.h>

#include <valgrind/valgrind.h>

#include <algorithm>
#include <cstring>

#include "interpose/leak_scan.h"
#include "interpose/leak_scan_internal.h"
#include "interpose/real.h"
#include "interpose/thread_registers.h"
#include "track/dynamic_symbol.h"
#include "track/frame_rules.h"

// glibc's own, private to it (LeakSanitizer reads them as well): the static TLS's bytes (the dynamic
// loader's) and a thread descriptor's (libc's, since 2.34). Weak: absent, they are null. Bound by the
// dynamic loader, not looked up with dlsym, which would clear a dlerror() the program has pending.
extern "C" void _dl_get_tls_static_info(size_t* bytes, size_t* align) __attribute__((weak));
extern "C" const unsigned int _thread_db_sizeof_pthread __attribute__((weak));

namespace poolscope {
namespace scan {

int FindOwnObject(struct dl_phdr_info* info, size_t, void* arg) {
  auto* own = static_cast<OwnObject*>(arg);
  const uintptr_t self = reinterpret_cast<uintptr_t>(&FindOwnObject);
  bool ours = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && self >= lo && self < lo + ph.p_memsz) ours = true;
  }
  if (!ours) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_W) != 0 && own->nwritable < 4) {
      own->writable[own->nwritable++] = RootRange{lo & ~uintptr_t{4095}, (lo + ph.p_memsz + 4095) & ~uintptr_t{4095}};
    }
    if (ph.p_type == PT_TLS) own->tls_bytes = ph.p_memsz;
  }
  own->tls_data = reinterpret_cast<uintptr_t>(info->dlpi_tls_data);
  return 1;
}

int FindLowestTls(struct dl_phdr_info* info, size_t, void* arg) {
  auto* lowest = static_cast<uintptr_t*>(arg);
  const uintptr_t tls = reinterpret_cast<uintptr_t>(info->dlpi_tls_data);
  if (tls != 0 && tls < *lowest) *lowest = tls;
  return 0;
}

bool RealAllocatorIsGlibc() {
  Dl_info info;
  return g_real.malloc != nullptr && dladdr(reinterpret_cast<void*>(g_real.malloc), &info) != 0 &&
         info.dli_fname != nullptr && strstr(info.dli_fname, "/libc.so") != nullptr;
}

bool GlibcMappedChunk(track::MemoryReader& reader, const ScanBlock& b, RootRange* extent) {
  constexpr uint64_t kPage = 4096, kIsMmapped = 0x2, kFlags = 0x7;
  if (b.size() + 16 < kPage || b.start < 16 + kPage) return false;
  uint64_t header[2];  // prev_size, size | flags
  if (reader.Read(b.start - 16, header, sizeof header) != sizeof header) return false;
  const uint64_t chunk = b.start - 16, offset = header[0], size = header[1] & ~kFlags;
  if ((header[1] & kFlags) != kIsMmapped || size < b.size() + 16 || offset > chunk) return false;
  if ((chunk - offset) % kPage != 0 || (offset + size) % kPage != 0) return false;
  *extent = RootRange{chunk - offset, chunk + size};
  return true;
}

bool IsSanitizerRuntime(const char* name) {
  return name != nullptr && (strstr(name, "/liblsan.so") != nullptr || strstr(name, "/libasan.so") != nullptr);
}

int CollectWritableSegments(struct dl_phdr_info* info, size_t, void* arg) {
  auto* want = static_cast<WritableSegments*>(arg);
  const bool libc = info->dlpi_name != nullptr && strstr(info->dlpi_name, "/libc.so") != nullptr;
  if (want->which == Objects::kLibc && !libc) return 0;
  if (want->which == Objects::kSanitizerRuntime && !IsSanitizerRuntime(info->dlpi_name)) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W) == 0 || ph.p_memsz == 0) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (!want->ranges->Push(RootRange{lo & ~uintptr_t{15}, lo + ph.p_memsz})) return 1;
  }
  return want->which == Objects::kLibc ? 1 : 0;
}

uintptr_t MainArena(track::MemoryReader& reader, const track::ProcMaps* in_place_maps) {
  Array<RootRange> data(g_scratch);
  WritableSegments libc{&data, Objects::kLibc};
  dl_iterate_phdr(CollectWritableSegments, &libc);
  uintptr_t found = 0;
  for (size_t i = 0; i < data.size() && found == 0; ++i) {
    const size_t n = (data[i].end - data[i].begin) / 8;
    if (n != 0 && in_place_maps != nullptr && track::ReadableThroughout(*in_place_maps, data[i].begin, data[i].end)) {
      found = FindMainArena(data[i].begin, reinterpret_cast<const uint64_t*>(data[i].begin), n, reader);
      continue;
    }
    Array<uint64_t> copy(g_scratch);
    if (n == 0 || !copy.Resize(n)) continue;
    if (reader.Read(data[i].begin, copy.data(), 8 * n) != 8 * n) continue;
    found = FindMainArena(data[i].begin, copy.data(), n, reader);
  }
  return found;
}

size_t OtherArenas(track::MemoryReader& reader, uintptr_t main_arena, uintptr_t* arenas, size_t max) {
  size_t n = 0;
  uintptr_t next = 0;
  if (reader.Read(main_arena + kArenaNext, &next, sizeof next) != sizeof next) return 0;
  for (size_t step = 0; step < 64 && n < max && next != main_arena && next != 0; ++step) {
    arenas[n++] = next;
    if (reader.Read(next + kArenaNext, &next, sizeof next) != sizeof next) break;
  }
  return n;
}

bool ArenaHeap(track::MemoryReader& reader, const track::Mapping& m, const uintptr_t* arenas, size_t n) {
  constexpr uintptr_t kHeapMax = uintptr_t{64} << 20;
  if (n == 0 || (m.start & (kHeapMax - 1)) != 0 || m.path[0] != '\0' || !m.writable()) return false;
  uint64_t ar_ptr = 0;
  if (reader.Read(m.start, &ar_ptr, sizeof ar_ptr) != sizeof ar_ptr) return false;
  for (size_t i = 0; i < n; ++i) {
    if (arenas[i] == ar_ptr) return true;
  }
  return false;
}

RootRange DeadThreadStack(const track::Mapping& before, const track::Mapping& m, track::MemoryReader& reader,
                          uintptr_t* window, const ScanInputs& in, intptr_t tp_off, uintptr_t tls_span) {
  if (m.path[0] != '\0' || !m.writable() || before.end != m.start || before.perms[0] != '-') return RootRange{0, 0};
  // The descriptor sits in the stack's last pages: read them once and look there for glibc's
  // tcbhead_t, whose `tcb` and `self` (two words on) both point at the descriptor itself.
  const uintptr_t top = m.end - m.start >= kDescriptorWindow ? m.end - kDescriptorWindow : m.start;
  const size_t got = reader.Read(top, window, m.end - top);
  uintptr_t descriptor = 0;
  for (size_t off = 0; off + 24 <= got && descriptor == 0; off += 64) {
    const uintptr_t a = top + off;
    if (window[off / 8] == a && window[off / 8 + 2] == a) descriptor = a;
  }
  if (descriptor == 0 || descriptor - tls_span <= m.start) return RootRange{0, 0};
  for (int t = 0; t < in.nthreads; ++t) {
    const uintptr_t tp = static_cast<uintptr_t>(static_cast<intptr_t>(in.threads[t].state) + tp_off);
    if (tp == descriptor) return RootRange{0, 0};  // a live thread's
  }
  return RootRange{m.start, descriptor - tls_span};
}

size_t SortAndMerge(RootRange* ranges, size_t n) {
  std::sort(ranges, ranges + n, [](const RootRange& a, const RootRange& b) { return a.begin < b.begin; });
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (k > 0 && ranges[i].begin <= ranges[k - 1].end) {
      ranges[k - 1].end = std::max(ranges[k - 1].end, ranges[i].end);
    } else {
      ranges[k++] = ranges[i];
    }
  }
  return k;
}

bool Subtract(const RootRange* ranges, size_t n, const RootRange* exclude, size_t nexclude, Array<RootRange>* out) {
  size_t e = 0;
  for (size_t i = 0; i < n; ++i) {
    uintptr_t b = ranges[i].begin;
    const uintptr_t end = ranges[i].end;
    while (e < nexclude && exclude[e].end <= b) ++e;
    for (size_t k = e; k < nexclude && exclude[k].begin < end && b < end; ++k) {
      if (exclude[k].end <= b) continue;
      if (exclude[k].begin > b && !out->Push(RootRange{b, exclude[k].begin})) return false;
      b = std::max(b, exclude[k].end);
    }
    if (b < end && !out->Push(RootRange{b, end})) return false;
  }
  return true;
}

void PushRange(uintptr_t b, uintptr_t e, void* arg) {
  auto* s = static_cast<RangeSink*>(arg);
  *s->ok = *s->ok && s->ranges->Push(RootRange{b, e});
}

bool RegistersReadable() {
  if (RUNNING_ON_VALGRIND != 0) return false;
  char buf[8192];
  return ReadSelfStatus(buf, sizeof buf) && !SeccompFiltered(buf) && !Traced(buf);
}

}  // namespace scan

using scan::RootRange;

namespace {

// libc's exit() and libc's extent.
struct ExitLookup {
  uintptr_t fn;
  RootRange exit;   // exit()'s code, or {0, 0}
  RootRange libc;   // libc's loaded segments, or {0, 0}
};

int FindExit(struct dl_phdr_info* info, size_t, void* arg) {
  auto* q = static_cast<ExitLookup*>(arg);
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    lo = std::min<uintptr_t>(lo, info->dlpi_addr + ph.p_vaddr);
    hi = std::max<uintptr_t>(hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  if (lo >= hi || info->dlpi_name == nullptr || strstr(info->dlpi_name, "/libc.so") == nullptr) return 0;
  q->libc = RootRange{lo, hi};
  // Only libc's exit (another preloaded object's: the walk then stops at libc's first frame).
  if (q->fn >= lo && q->fn < hi) {
    const ElfW(Sym)* sym = track::FindDynamicSymbol(info, "exit", q->fn);
    if (sym != nullptr) q->exit = RootRange{q->fn, q->fn + sym->st_size};
  }
  return 1;
}

// libc's exit(): [begin, end) of its code, and libc's extent; {0, 0} for what cannot be told.
ExitLookup FindExitFunction() {
  // libc's exit as ResolveReal found it (libpoolscope.so defines an exit() of its own that jumps to it).
  ResolveReal();
  ExitLookup q{reinterpret_cast<uintptr_t>(g_real.exit), {0, 0}, {0, 0}};
  if (q.fn != 0) dl_iterate_phdr(FindExit, &q);
  return q;
}

RootRange g_exit_fn = {0, 0};
RootRange g_libc = {0, 0};

}  // namespace

void PrepareScan() {
  if (g_exit_fn.end != 0) return;
  const ExitLookup q = FindExitFunction();
  g_exit_fn = q.exit;
  g_libc = q.libc;
}

scan::StaticTls scan::GlibcStaticTls() {
  if (&_dl_get_tls_static_info == nullptr || &_thread_db_sizeof_pthread == nullptr) return StaticTls{0, 0};
  size_t bytes = 0, align = 0;
  _dl_get_tls_static_info(&bytes, &align);
  const size_t descriptor = _thread_db_sizeof_pthread;
  if (descriptor == 0 || bytes < descriptor) return StaticTls{0, 0};
  return StaticTls{descriptor, bytes};
}

uintptr_t ExitPathSp(const track::StartFrame& from) {
  // A detector that follows the stack pointer reads the exiting thread's stack from the program's
  // call into exit() up: the frames of exit's own work below it were the program's dead frames before
  // (left by functions that returned; memcheck holds them undefined), so they are no roots. The walk
  // goes up to exit()'s frame, whose CFA is the caller's stack pointer at the call; a return from main
  // calls exit() too. When exit() is not met, the first frame of libc's exit path.
  // Both looked up at load: looking them up now would allocate, and move the heap's top the scan reads.
  const RootRange exit_fn = g_exit_fn;
  uintptr_t pc = from.ra, sp = from.sp, bp = from.bp;
  uintptr_t first_libc = 0;
  for (int step = 0; step < 48 && pc != 0; ++step) {
    if (first_libc == 0 && pc - 1 - g_libc.begin < g_libc.end - g_libc.begin) first_libc = sp;
    const track::FrameRule rule = track::LookupFrameRule(pc - 1);
    if (track::RuleKind(rule) != track::kRuleStep || (rule & track::kRuleCfaDeref) != 0) break;
    const uintptr_t cfa = ((rule & track::kRuleCfaOnRbp) != 0 ? bp : sp) + track::RuleCfaOffset(rule);
    if (pc - 1 - exit_fn.begin < exit_fn.end - exit_fn.begin) return cfa;
    switch (track::RuleRbp(rule)) {
      case track::kRbpAtCfa:
        bp = *reinterpret_cast<const uintptr_t*>(cfa + track::RuleRbpOffset(rule));
        break;
      case track::kRbpAtRbp:
        bp = *reinterpret_cast<const uintptr_t*>(bp + track::RuleRbpOffset(rule));
        break;
      default:
        break;
    }
    pc = *reinterpret_cast<const uintptr_t*>(cfa - 8);
    sp = cfa;
  }
  return first_libc != 0 ? first_libc : from.sp;
}

}  // namespace poolscope
