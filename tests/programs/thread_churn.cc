// File: tests/programs/thread_churn.cc
//
// Many short-lived threads that allocate through every entry point poolscope interposes, hand half
// of their blocks to a neighbour thread that frees them (cross-thread frees), and leave a few blocks
// behind when they end for a thread of the next wave to free (frees of blocks whose allocating thread
// is gone). Prints one deterministic line: the same bytes with and without poolscope preloaded.
//
// Usage: thread_churn [N]     N = iterations per thread (default 4).
//
// kThreads (200) threads run in waves of kWave (8); a wave is joined before the next one starts, so
// the number of threads does not depend on N. Each thread runs N iterations of Iterate(), and each
// iteration makes EXACTLY these calls (this list is what tests/thread_churn_n_test.sh relies on;
// change both together):
//
//   entry point      calls per iteration per thread   from
//   malloc           2     kMallocSmall, kMallocLarge
//   calloc           1     kCalloc
//   realloc          4     kRealloc: realloc(NULL,24), realloc(p,100), realloc(p,16);
//                          plus the receiver's realloc of the kMallocSmall block it was handed
//   reallocarray     2     kReallocarray: reallocarray(NULL,3,8), reallocarray(p,10,8)
//   posix_memalign   1     kPosixMemalign
//   aligned_alloc    1     kAlignedAlloc
//   memalign         1     kMemalign
//   valloc           1     kValloc
//   pvalloc          1     kPvalloc
//   free             11    one per C block (10 kinds) + one free(NULL)
//   new              7     kNew .. kNewExpr (plain, nothrow, sized, aligned, aligned nothrow,
//                          sized aligned, new-expression)
//   new[]            7     the same seven forms of new[]
//   delete           7     the matching delete of each new form
//   delete[]         7     the matching delete[] of each new[] form
//   => logical blocks created 24, released 24, resizes 4 (2 realloc + 1 reallocarray + receiver's).
//
// Per thread and independent of N: 1 malloc + 1 new at thread end (the carry-over blocks), freed by
// the same-numbered thread of the next wave (1 free + 1 delete), or by main after the last wave.
// Nothing else in a thread allocates (pthread barriers do not), so thread_churn N and thread_churn 2N
// differ by exactly N * kThreads * (the counts above) per entry point.
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <new>

namespace {

constexpr int kThreads = 200;
constexpr int kWave = 8;

// Keeps the compiler from proving a block unused and deleting the allocation.
inline void Escape(void* p) { asm volatile("" : : "g"(p) : "memory"); }

// A null pointer the compiler cannot see: GCC rewrites realloc(NULL, n) into malloc(n) otherwise,
// even at -O0, and the program must make exactly the calls its comment lists.
inline void* OpaqueNull() {
  void* p = nullptr;
  asm volatile("" : "+r"(p));
  return p;
}

enum Kind {
  kMallocSmall,
  kMallocLarge,
  kCalloc,
  kRealloc,
  kReallocarray,
  kPosixMemalign,
  kAlignedAlloc,
  kMemalign,
  kValloc,
  kPvalloc,
  kNew,
  kNewNothrow,
  kNewSized,
  kNewAligned,
  kNewAlignedNothrow,
  kNewSizedAligned,
  kNewExpr,
  kNewArr,
  kNewArrNothrow,
  kNewArrSized,
  kNewArrAligned,
  kNewArrAlignedNothrow,
  kNewArrSizedAligned,
  kNewArrExpr,
  kKinds,
};

// Kinds handed to the neighbour thread, which checks and frees them.
bool HandedOff(int kind) {
  return kind == kMallocSmall || kind % 2 == 1;
}

struct Obj {
  unsigned char bytes[40];
};

struct Block {
  void* p = nullptr;
  int kind = 0;
  size_t size = 0;
  unsigned char fill = 0;
};

struct Totals {
  uint64_t checksum = 0;
  uint64_t corrupt = 0;
  uint64_t misaligned = 0;
  uint64_t nonzero_calloc = 0;
  uint64_t null_results = 0;
};

std::atomic<uint64_t> g_checksum{0}, g_corrupt{0}, g_misaligned{0}, g_nonzero{0}, g_null{0};

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

void CheckAlign(Totals* t, const void* p, size_t align) {
  if (reinterpret_cast<uintptr_t>(p) % align != 0) ++t->misaligned;
}

void Fill(Block* b, size_t from) {
  memset(static_cast<unsigned char*>(b->p) + from, b->fill, b->size - from);
}

// Reads a block back: every byte must still be the fill byte. Adds the bytes to the checksum.
void Verify(Totals* t, const Block& b) {
  const unsigned char* c = static_cast<const unsigned char*>(b.p);
  uint64_t sum = 0;
  for (size_t i = 0; i < b.size; ++i) {
    if (c[i] != b.fill) ++t->corrupt;
    sum += c[i];
  }
  t->checksum += sum * (static_cast<uint64_t>(b.kind) + 1) + b.size;
}

// Allocates one block of `kind`. Exactly the calls listed in the file comment.
Block Allocate(Totals* t, int kind, int thread, int iter) {
  Block b;
  b.kind = kind;
  b.fill = static_cast<unsigned char>(thread * 131 + iter * 17 + kind * 7 + 1);
  switch (kind) {
    case kMallocSmall:
      b.size = 5 + static_cast<size_t>(thread + iter) % 60;  // 5 .. 64
      b.p = malloc(b.size);
      CheckAlign(t, b.p, 16);
      break;
    case kMallocLarge:
      b.size = 200 + static_cast<size_t>(thread % 50);
      b.p = malloc(b.size);
      CheckAlign(t, b.p, 16);
      break;
    case kCalloc: {
      b.size = 32;
      b.p = calloc(4, 8);
      if (b.p == nullptr) break;
      const unsigned char* c = static_cast<const unsigned char*>(b.p);
      for (size_t i = 0; i < b.size; ++i) t->nonzero_calloc += c[i] != 0;
      CheckAlign(t, b.p, 16);
      break;
    }
    case kRealloc: {
      b.size = 24;
      b.p = realloc(OpaqueNull(), 24);
      if (b.p == nullptr) break;
      Fill(&b, 0);
      void* q = realloc(b.p, 100);
      if (q == nullptr) { b.p = nullptr; break; }  // (leaks b.p; counted in null_results)
      b.p = q;
      b.size = 100;
      Block head = b;
      head.size = 24;
      Totals scratch;
      Verify(&scratch, head);
      t->corrupt += scratch.corrupt;
      Fill(&b, 24);
      q = realloc(b.p, 16);
      if (q == nullptr) { b.p = nullptr; break; }
      b.p = q;
      b.size = 16;
      CheckAlign(t, b.p, 16);
      break;
    }
    case kReallocarray: {
      b.size = 24;
      b.p = reallocarray(OpaqueNull(), 3, 8);
      if (b.p == nullptr) break;
      Fill(&b, 0);
      void* q = reallocarray(b.p, 10, 8);
      if (q == nullptr) { b.p = nullptr; break; }
      b.p = q;
      Totals scratch;
      Verify(&scratch, b);  // the first 24 bytes survived the move
      t->corrupt += scratch.corrupt;
      b.size = 80;
      Fill(&b, 24);
      CheckAlign(t, b.p, 16);
      break;
    }
    case kPosixMemalign: {
      b.size = 48;
      void* p = nullptr;
      if (posix_memalign(&p, 64, 48) != 0) p = nullptr;
      b.p = p;
      CheckAlign(t, b.p, 64);
      break;
    }
    case kAlignedAlloc:
      b.size = 64;
      b.p = aligned_alloc(32, 64);
      CheckAlign(t, b.p, 32);
      break;
    case kMemalign:
      b.size = 40;
      b.p = memalign(16, 40);
      CheckAlign(t, b.p, 16);
      break;
    case kValloc:
      b.size = 32;
      b.p = valloc(32);
      CheckAlign(t, b.p, PageSize());
      break;
    case kPvalloc:
      b.size = 32;
      b.p = pvalloc(32);
      CheckAlign(t, b.p, PageSize());
      break;
    case kNew:
      b.size = 40;
      b.p = ::operator new(40);
      CheckAlign(t, b.p, 16);
      break;
    case kNewNothrow:
      b.size = 24;
      b.p = ::operator new(24, std::nothrow);
      CheckAlign(t, b.p, 16);
      break;
    case kNewSized:
      b.size = 56;
      b.p = ::operator new(56);
      CheckAlign(t, b.p, 16);
      break;
    case kNewAligned:
      b.size = 48;
      b.p = ::operator new(48, std::align_val_t(64));
      CheckAlign(t, b.p, 64);
      break;
    case kNewAlignedNothrow:
      b.size = 48;
      b.p = ::operator new(48, std::align_val_t(64), std::nothrow);
      CheckAlign(t, b.p, 64);
      break;
    case kNewSizedAligned:
      b.size = 32;
      b.p = ::operator new(32, std::align_val_t(32));
      CheckAlign(t, b.p, 32);
      break;
    case kNewExpr:
      b.size = sizeof(Obj);
      b.p = new Obj;
      CheckAlign(t, b.p, 16);
      break;
    case kNewArr:
      b.size = 40;
      b.p = ::operator new[](40);
      CheckAlign(t, b.p, 16);
      break;
    case kNewArrNothrow:
      b.size = 24;
      b.p = ::operator new[](24, std::nothrow);
      CheckAlign(t, b.p, 16);
      break;
    case kNewArrSized:
      b.size = 56;
      b.p = ::operator new[](56);
      CheckAlign(t, b.p, 16);
      break;
    case kNewArrAligned:
      b.size = 48;
      b.p = ::operator new[](48, std::align_val_t(64));
      CheckAlign(t, b.p, 64);
      break;
    case kNewArrAlignedNothrow:
      b.size = 48;
      b.p = ::operator new[](48, std::align_val_t(64), std::nothrow);
      CheckAlign(t, b.p, 64);
      break;
    case kNewArrSizedAligned:
      b.size = 32;
      b.p = ::operator new[](32, std::align_val_t(32));
      CheckAlign(t, b.p, 32);
      break;
    case kNewArrExpr:
      b.size = 40;
      b.p = new unsigned char[40];
      CheckAlign(t, b.p, 16);
      break;
  }
  Escape(b.p);
  if (b.p == nullptr) {
    ++t->null_results;
    return b;
  }
  if (kind != kRealloc && kind != kReallocarray) Fill(&b, 0);
  return b;
}

// Releases one block with the deallocation function that matches its allocation. One call each.
void Release(const Block& b) {
  void* p = b.p;
  if (p == nullptr) return;
  switch (b.kind) {
    case kMallocSmall:
    case kMallocLarge:
    case kCalloc:
    case kRealloc:
    case kReallocarray:
    case kPosixMemalign:
    case kAlignedAlloc:
    case kMemalign:
    case kValloc:
    case kPvalloc:
      free(p);
      break;
    case kNew:
      ::operator delete(p);
      break;
    case kNewNothrow:
      ::operator delete(p, std::nothrow);
      break;
    case kNewSized:
      ::operator delete(p, static_cast<size_t>(56));
      break;
    case kNewAligned:
      ::operator delete(p, std::align_val_t(64));
      break;
    case kNewAlignedNothrow:
      ::operator delete(p, std::align_val_t(64), std::nothrow);
      break;
    case kNewSizedAligned:
      ::operator delete(p, static_cast<size_t>(32), std::align_val_t(32));
      break;
    case kNewExpr:
      delete static_cast<Obj*>(p);
      break;
    case kNewArr:
      ::operator delete[](p);
      break;
    case kNewArrNothrow:
      ::operator delete[](p, std::nothrow);
      break;
    case kNewArrSized:
      ::operator delete[](p, static_cast<size_t>(56));
      break;
    case kNewArrAligned:
      ::operator delete[](p, std::align_val_t(64));
      break;
    case kNewArrAlignedNothrow:
      ::operator delete[](p, std::align_val_t(64), std::nothrow);
      break;
    case kNewArrSizedAligned:
      ::operator delete[](p, static_cast<size_t>(32), std::align_val_t(32));
      break;
    case kNewArrExpr:
      delete[] static_cast<unsigned char*>(p);
      break;
  }
}

struct Wave {
  pthread_barrier_t barrier;
  Block slots[kWave][kKinds];  // slots[i]: the blocks thread i hands to thread (i + 1) % kWave
  int handed[kWave] = {};
};

// Blocks a thread leaves behind when it ends; the same-numbered thread of the next wave frees them.
struct Carry {
  void* malloced = nullptr;  // malloc(24)
  Obj* newed = nullptr;      // new Obj
};
Carry g_carry[kWave];

struct ThreadArg {
  Wave* wave;
  int index;   // 0 .. kWave-1 within the wave
  int thread;  // 0 .. kThreads-1
  int iterations;
};

void ReceiveAndFree(Totals* t, Block* blocks, int count) {
  for (int j = 0; j < count; ++j) {
    Block& b = blocks[j];
    if (b.p == nullptr) continue;
    Verify(t, b);
    if (b.kind == kMallocSmall) {
      // Grow a block that another thread allocated (its pool, if pooled, belongs to that thread).
      void* q = realloc(b.p, b.size + 100);
      if (q == nullptr) {
        ++t->null_results;
      } else {
        b.p = q;
        Verify(t, b);  // the first b.size bytes moved with it
      }
    }
    Release(b);
    b.p = nullptr;
  }
}

void* ThreadMain(void* raw) {
  ThreadArg* arg = static_cast<ThreadArg*>(raw);
  Wave* wave = arg->wave;
  const int me = arg->index;
  Totals t;

  // The carry-over of the previous wave's thread `me`, which has ended by now.
  Carry& carry = g_carry[me];
  if (carry.malloced != nullptr) {
    Block b;
    b.p = carry.malloced;
    b.kind = kMallocSmall;
    b.size = 24;
    b.fill = 0x5a;
    Verify(&t, b);
    free(carry.malloced);
    delete carry.newed;
    carry = Carry();
  }

  for (int iter = 0; iter < arg->iterations; ++iter) {
    Block* out = wave->slots[me];
    int handed = 0;
    Block own[kKinds];
    int owned = 0;
    for (int kind = 0; kind < kKinds; ++kind) {
      Block b = Allocate(&t, kind, arg->thread, iter);
      if (HandedOff(kind)) {
        out[handed++] = b;
      } else {
        own[owned++] = b;
      }
    }
    wave->handed[me] = handed;
    for (int j = 0; j < owned; ++j) {
      if (own[j].p == nullptr) continue;
      Verify(&t, own[j]);
      Release(own[j]);
    }
    free(OpaqueNull());  // counted in by_api["free"], releases nothing (a literal NULL would be elided)
    pthread_barrier_wait(&wave->barrier);
    const int from = (me + 1) % kWave;
    ReceiveAndFree(&t, wave->slots[from], wave->handed[from]);
    pthread_barrier_wait(&wave->barrier);
  }

  carry.malloced = malloc(24);
  if (carry.malloced != nullptr) memset(carry.malloced, 0x5a, 24);
  carry.newed = new Obj;
  memset(carry.newed->bytes, 0x33, sizeof(carry.newed->bytes));

  g_checksum.fetch_add(t.checksum);
  g_corrupt.fetch_add(t.corrupt);
  g_misaligned.fetch_add(t.misaligned);
  g_nonzero.fetch_add(t.nonzero_calloc);
  g_null.fetch_add(t.null_results);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = 4;
  if (argc > 1) {
    char* end = nullptr;
    errno = 0;
    iterations = strtol(argv[1], &end, 10);
    if (errno != 0 || end == argv[1] || *end != '\0' || iterations < 0 || iterations > 1000000) {
      fprintf(stderr, "usage: thread_churn [N]   (N iterations per thread, 0..1000000)\n");
      return 2;
    }
  }

  static Wave wave;  // reused by every wave; static so that it is not on a thread's stack
  for (int first = 0; first < kThreads; first += kWave) {
    pthread_barrier_init(&wave.barrier, nullptr, kWave);
    pthread_t threads[kWave];
    ThreadArg args[kWave];
    for (int i = 0; i < kWave; ++i) {
      args[i] = ThreadArg{&wave, i, first + i, static_cast<int>(iterations)};
      if (pthread_create(&threads[i], nullptr, ThreadMain, &args[i]) != 0) {
        fprintf(stderr, "thread_churn: pthread_create failed\n");
        return 3;
      }
    }
    for (int i = 0; i < kWave; ++i) pthread_join(threads[i], nullptr);
    pthread_barrier_destroy(&wave.barrier);
  }
  for (int i = 0; i < kWave; ++i) {  // the last wave's carry-over
    free(g_carry[i].malloced);
    delete g_carry[i].newed;
  }

  const uint64_t blocks = static_cast<uint64_t>(kThreads) * iterations * kKinds;
  printf("thread_churn threads=%d wave=%d iterations=%ld blocks=%llu checksum=%016llx corrupt=%llu "
         "misaligned=%llu nonzero_calloc=%llu null=%llu\n",
         kThreads, kWave, iterations, static_cast<unsigned long long>(blocks),
         static_cast<unsigned long long>(g_checksum.load()),
         static_cast<unsigned long long>(g_corrupt.load()),
         static_cast<unsigned long long>(g_misaligned.load()),
         static_cast<unsigned long long>(g_nonzero.load()),
         static_cast<unsigned long long>(g_null.load()));
  const bool ok = g_corrupt.load() == 0 && g_misaligned.load() == 0 && g_nonzero.load() == 0 &&
                  g_null.load() == 0;
  return ok ? 0 : 1;
}
