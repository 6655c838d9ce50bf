// File: interpose/leak_exit.cc
//
// See leak_exit.h.
//
// Why the flush: the library's destructor runs inside exit(), before glibc flushes the stdio buffers
// (_IO_cleanup runs after every exit handler and destructor). Ending the process there with _exit
// would drop whatever the program printed without flushing: all of it, when its stdout is a file or
// a pipe. (LeakSanitizer's exitcode ends the process that way and loses that output.) So stdio is
// flushed first, but fflush(NULL) takes the lock of every stream, stdin's included, and blocks for
// good when another thread holds one (a thread waiting in fgets on a pipe nobody writes to). Hence:
//   - this thread is the process's only thread (the kernel's count, which also sees threads that
//     never allocated): fflush(NULL), every stream, as exit() would have done;
//   - otherwise only stdout and stderr, each under ftrylockfile, tried for a short while and skipped
//     when its lock stays taken. Output left in other streams the program never closed is lost.
#include "interpose/leak_exit.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "interpose/internal.h"
#include "interpose/real.h"
#include "interpose/tracking.h"

namespace poolscope {
namespace {

// The baseline (TakeLeakBaseline). Written while nothing else runs (start-up, a fork() child), read
// at exit.
uintptr_t* g_base_blocks = nullptr;  // addresses of the live blocks, sorted (track=1)
size_t g_base_count = 0;
size_t g_base_bytes = 0;  // of the mapping that holds g_base_blocks
int64_t g_base_logical = 0;  // the ledger's live blocks (track=0)
int g_base_stdio = 0;        // standard streams that had a buffer of stdio's own

// glibc's flag (libio.h, _IO_USER_BUF) for a buffer the program gave with setbuf/setvbuf.
constexpr int kIoUserBuf = 0x0001;

// The buffers stdio allocated for stdin, stdout and stderr (not the one byte inside the FILE of an
// unbuffered stream, nor a buffer of the program's own). Returns how many, addresses in `out`.
int StdioBuffers(uintptr_t out[3]) {
  FILE* const streams[3] = {stdin, stdout, stderr};
  int n = 0;
  for (FILE* f : streams) {
    if (f == nullptr) continue;
    const char* base = f->_IO_buf_base;
    if (base == nullptr || base == f->_shortbuf || (f->_flags & kIoUserBuf) != 0) continue;
    out[n++] = reinterpret_cast<uintptr_t>(base);
  }
  return n;
}

struct Collect {
  uintptr_t* out;
  size_t cap;
  size_t n;
};

}  // namespace

void TakeLeakBaseline(int64_t logical_live) {
  if (g_base_blocks != nullptr) InternalFree(g_base_blocks, g_base_bytes);  // a fork child's parent's
  g_base_blocks = nullptr;
  g_base_count = g_base_bytes = 0;
  g_base_logical = logical_live;
  uintptr_t bufs[3];
  g_base_stdio = StdioBuffers(bufs);
  if (!TrackingOn()) return;
  MarkArenaBaseline();
  size_t live = 0;
  ForEachLiveBlock([](uintptr_t, void* arg) { ++*static_cast<size_t*>(arg); }, &live);
  if (live == 0) return;
  // Room for a few more, should another thread allocate meanwhile; any beyond are left out of the
  // baseline, so they count as the program's (the judgement errs towards a leak, never away from one).
  size_t cap = live + 256;
  size_t bytes = cap * sizeof(uintptr_t);
  auto* blocks = static_cast<uintptr_t*>(InternalAlloc(bytes));
  if (blocks == nullptr) return;
  Collect c{blocks, cap, 0};
  ForEachLiveBlock(
      [](uintptr_t ptr, void* arg) {
        auto* c = static_cast<Collect*>(arg);
        if (c->n < c->cap) c->out[c->n++] = ptr;
      },
      &c);
  std::sort(blocks, blocks + c.n);
  g_base_blocks = blocks;
  g_base_count = c.n;
  g_base_bytes = bytes;
}

void CountProgramLeaks(int64_t logical_live, ProgramLeaks* out) {
  *out = ProgramLeaks{};
  uintptr_t bufs[3];
  const int nbufs = StdioBuffers(bufs);
  if (!TrackingOn()) {
    // From the ledger: blocks freed that poolscope never saw allocated (before it was loaded) make
    // it low, even negative; hence the clamp, and `exact` false.
    const int64_t stdio = nbufs > g_base_stdio ? nbufs - g_base_stdio : 0;
    const int64_t own = logical_live - g_base_logical - stdio;
    out->live_blocks = logical_live;
    out->live_at_start = g_base_logical;
    out->stdio_buffers = stdio;
    out->blocks = own > 0 ? own : 0;
    return;
  }
  struct Tally {
    int nbufs;
    const uintptr_t* bufs;
    ProgramLeaks* out;
  } tally{nbufs, bufs, out};
  ForEachLiveBlock(
      [](uintptr_t ptr, void* arg) {
        auto* t = static_cast<Tally*>(arg);
        ++t->out->live_blocks;
        if (std::binary_search(g_base_blocks, g_base_blocks + g_base_count, ptr)) {
          ++t->out->live_at_start;
        } else if (std::find(t->bufs, t->bufs + t->nbufs, ptr) != t->bufs + t->nbufs) {
          ++t->out->stdio_buffers;
        } else {
          ++t->out->blocks;
        }
      },
      &tally);
  uint64_t arena_blocks, arena_new;
  CountArenaBlocks(&arena_blocks, &arena_new);
  out->live_blocks += static_cast<int64_t>(arena_blocks);
  out->live_at_start += static_cast<int64_t>(arena_blocks - arena_new);
  out->blocks += static_cast<int64_t>(arena_new);
  out->exact = true;
}

namespace {

// Whether the kernel counts one thread in this process (read without allocating). False when it
// cannot tell.
bool OnlyThread() {
  char buf[4096];
  if (!ReadSelfStatus(buf, sizeof buf)) return false;
  const char* line = strstr(buf, "\nThreads:");
  return line != nullptr && strtol(line + 9, nullptr, 10) == 1;
}

// Flushes `f` if it may hold output and its lock can be had within about 100 ms.
void FlushIfUnlocked(FILE* f) {
  if (f == nullptr) return;
  // Nothing waiting in a byte-oriented stream (read without the lock): no need to wait for it. A wide
  // stream keeps its output elsewhere first.
  if (f->_mode <= 0 && f->_IO_write_ptr <= f->_IO_write_base) return;
  for (int i = 0; i < 50; ++i) {
    if (ftrylockfile(f) == 0) {
      fflush_unlocked(f);
      funlockfile(f);
      return;
    }
    struct timespec pause = {0, 2 * 1000 * 1000};
    nanosleep(&pause, nullptr);
  }
}

}  // namespace

void ExitForLeaks(int status) {
  if (OnlyThread()) {
    fflush(nullptr);
  } else {
    FlushIfUnlocked(stdout);
    FlushIfUnlocked(stderr);
  }
  if (g_real.exit_ != nullptr) g_real.exit_(status);
  for (;;) syscall(SYS_exit_group, status);
}

}  // namespace poolscope
