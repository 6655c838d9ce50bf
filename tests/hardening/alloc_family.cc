// File: tests/hardening/alloc_family.cc
//
// A multi-threaded program that allocates through the whole malloc family and every form of
// operator new/delete, hands a share of its blocks to another thread to verify and free (cross-thread
// frees), and prints only facts that do not depend on addresses or timing, so its stdout is the same
// bytes bare and under any stack of preloaded allocators/profilers.
//
// Usage: alloc_family [ITERATIONS [no-pvalloc]]   (default 300 per thread; 4 worker threads)
//   no-pvalloc: skip pvalloc, for allocators that do not define it (jemalloc): glibc's pvalloc then
//   serves the request from glibc's heap and the allocator's free() crashes on it, bare or not.
// Alignment checked for malloc: min(16, largest power of two <= size), at least 8 (tcmalloc and
// mimalloc hand out 8-byte-aligned blocks for sizes <= 8; glibc always 16).
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace {

constexpr int kThreads = 4;

inline void Escape(void* p) { asm volatile("" : : "g"(p) : "memory"); }

// A block handed to another thread: how to free it, and what it must contain.
struct Handoff {
  void* p;
  size_t n;
  unsigned char byte;
  int how;  // 0 free, 1 delete, 2 delete[]
};

std::mutex g_mu;
std::deque<Handoff> g_queue[kThreads];

struct Result {
  uint64_t checksum = 0;
  long blocks = 0;
  long bad_align = 0;
  long bad_contents = 0;
  long bad_zero = 0;
  long bad_usable = 0;
  long received = 0;
};
Result g_results[kThreads];
int g_iterations = 300;
bool g_pvalloc = true;

uint64_t Mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

struct Worker {
  int id;
  Result* r;
  uint32_t rng;

  uint32_t Next() {
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
  }

  void Fill(void* p, size_t n, unsigned char b) { memset(p, b, n); }
  void Check(const void* p, size_t n, unsigned char b) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
      if (c[i] != b) {
        ++r->bad_contents;
        return;
      }
    }
    r->checksum = Mix(r->checksum, n * 131 + b);
  }
  void Aligned(const void* p, size_t a) {
    if (reinterpret_cast<uintptr_t>(p) % a != 0) ++r->bad_align;
  }
  void Zero(const void* p, size_t n) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
      if (c[i] != 0) {
        ++r->bad_zero;
        return;
      }
    }
  }
  void Usable(void* p, size_t n) {
    if (malloc_usable_size(p) < n) ++r->bad_usable;
  }

  void Give(void* p, size_t n, unsigned char b, int how) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_queue[(id + 1) % kThreads].push_back(Handoff{p, n, b, how});
  }

  void Drain() {
    std::deque<Handoff> mine;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      mine.swap(g_queue[id]);
    }
    for (const Handoff& h : mine) Release(h);
  }

  void Release(const Handoff& h) {
    // Contents only (the order blocks arrive in depends on timing, so no checksum here).
    const unsigned char* c = static_cast<const unsigned char*>(h.p);
    for (size_t i = 0; i < h.n; ++i) {
      if (c[i] != h.byte) {
        ++r->bad_contents;
        break;
      }
    }
    ++r->received;
    if (h.how == 0) free(h.p);
    else if (h.how == 1) delete static_cast<char*>(h.p);
    else delete[] static_cast<char*>(h.p);
  }

  void Iterate(int it) {
    size_t n = 1 + Next() % 200;  // mostly small, some above a 64-byte pool
    unsigned char b = static_cast<unsigned char>(1 + (it + id) % 250);
    ++r->blocks;
    // malloc / free
    void* m = malloc(n);
    Escape(m);
    Aligned(m, n >= 16 ? 16 : 8);
    Usable(m, n);
    Fill(m, n, b);
    Check(m, n, b);
    // calloc: zero
    void* c = calloc(n, 3);
    Escape(c);
    Zero(c, n * 3);
    Fill(c, n * 3, b);
    // realloc grow / shrink, contents kept
    m = realloc(m, n * 2 + 50);
    Check(m, n, b);
    Fill(m, n * 2 + 50, b);
    m = realloc(m, n / 2 + 1);
    Check(m, n / 2 + 1, b);
    void* ra = reallocarray(nullptr, n, 2);
    Escape(ra);
    Fill(ra, n * 2, b);
    ra = reallocarray(ra, n, 3);
    Check(ra, n * 2, b);
    void* pm = nullptr;
    if (posix_memalign(&pm, 64, n) != 0) pm = nullptr;
    Aligned(pm, 64);
    Fill(pm, n, b);
    void* aa = aligned_alloc(32, 64);
    Aligned(aa, 32);
    Fill(aa, 64, b);
    void* ma = memalign(128, n);
    Aligned(ma, 128);
    Fill(ma, n, b);
    void* va = (it % 16 == 0) ? valloc(n) : nullptr;
    if (va != nullptr) {
      Aligned(va, 4096);
      Fill(va, n, b);
    }
    void* pv = (g_pvalloc && it % 32 == 0) ? pvalloc(n) : nullptr;
    if (pv != nullptr) {
      Aligned(pv, 4096);
      Fill(pv, n, b);
    }
    // C++: plain, nothrow, sized, aligned, aligned nothrow, arrays
    char* o1 = new char[n];
    Fill(o1, n, b);
    int* o2 = new int(it);
    int* o3 = new (std::nothrow) int(it + 1);
    struct alignas(64) Big { char x[64]; };
    Big* o4 = new Big;
    Aligned(o4, 64);
    Fill(o4, sizeof(Big), b);
    Big* o5 = new (std::nothrow) Big[3];
    Aligned(o5, 64);
    std::string s(n, static_cast<char>('a' + it % 26));
    std::vector<int> v(n % 40 + 1, it);
    r->checksum = Mix(r->checksum, s.size() + v.size() + static_cast<uint64_t>(*o2 + *o3));
    // hand two blocks to the next thread, free the rest here
    Give(m, n / 2 + 1, b, 0);
    Give(o1, n, b, 2);
    Check(c, n * 3, b);
    free(c);
    Check(ra, n * 2, b);
    free(ra);
    Check(pm, n, b);
    free(pm);
    Check(aa, 64, b);
    free(aa);
    Check(ma, n, b);
    free(ma);
    free(va);
    free(pv);
    free(nullptr);
    delete o2;
    ::operator delete(o3, std::nothrow);
    delete o4;
    delete[] o5;
    if (it % 8 == 7) Drain();
  }
};

void* Run(void* arg) {
  int id = static_cast<int>(reinterpret_cast<intptr_t>(arg));
  Worker w{id, &g_results[id], static_cast<uint32_t>(id * 7919 + 1)};
  for (int it = 0; it < g_iterations; ++it) w.Iterate(it);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_iterations = atoi(argv[1]);
  if (argc > 2 && strcmp(argv[2], "no-pvalloc") == 0) g_pvalloc = false;
  pthread_t t[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    pthread_create(&t[i], nullptr, Run, reinterpret_cast<void*>(static_cast<intptr_t>(i)));
  }
  for (int i = 0; i < kThreads; ++i) pthread_join(t[i], nullptr);
  // Whatever is still queued is verified and freed by main (blocks of threads that have ended).
  Result leftovers;
  Worker w{0, &leftovers, 1};
  for (auto& q : g_queue) {
    for (const Handoff& h : q) w.Release(h);
    q.clear();
  }
  long bad = leftovers.bad_contents;
  long received = leftovers.received;
  long align = 0, contents = leftovers.bad_contents, zero = 0, usable = 0;
  for (int i = 0; i < kThreads; ++i) {
    const Result& r = g_results[i];
    printf("thread %d: blocks=%ld checksum=%016llx\n", i, r.blocks,
           static_cast<unsigned long long>(r.checksum));
    bad += r.bad_align + r.bad_contents + r.bad_zero + r.bad_usable;
    align += r.bad_align;
    contents += r.bad_contents;
    zero += r.bad_zero;
    usable += r.bad_usable;
    received += r.received;
  }
  printf("handed over and freed on another thread: %ld\n", received);
  printf("problems: alignment %ld, contents %ld, calloc zero %ld, usable size %ld\n", align, contents, zero,
         usable);
  return bad == 0 ? 0 : 1;
}
