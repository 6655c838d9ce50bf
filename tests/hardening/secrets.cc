// File: tests/hardening/secrets.cc
//
// Pooled memory never carries data between blocks (docs/design.md: memory handed out from a pool is
// zero). Run with pooling on and tag=small, so that every request of at most
// `pool_size` bytes (argv[1], default 64) is carved from a pool:
//   1. one thread writes a secret into blocks of every small size (malloc, calloc, realloc,
//      new[]) and frees them itself; it then allocates again and looks for the secret;
//   2. a writer thread fills blocks with the secret and hands them to a freer thread (cross-thread
//      frees), then ends (its pools are orphaned or cached); reader threads and the main thread
//      allocate blocks of every small size and look for any secret byte or any nonzero byte.
// Prints the counts; exits 1 when a secret or a nonzero byte was seen in a fresh block.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace {

constexpr unsigned char kSecret[] = "S3CR3T-K3Y!";  // bytes that are never zero
size_t g_max = 64;
std::atomic<long> g_secret_seen{0};
std::atomic<long> g_nonzero_seen{0};
std::atomic<long> g_blocks_checked{0};

inline void Escape(void* p) { asm volatile("" : : "g"(p) : "memory"); }

void WriteSecret(void* p, size_t n) {
  unsigned char* c = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) c[i] = kSecret[i % (sizeof kSecret - 1)];
}

void Inspect(const void* p, size_t n) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  bool nonzero = false, secret = false;
  for (size_t i = 0; i < n; ++i) {
    if (c[i] != 0) nonzero = true;
    if (c[i] == kSecret[i % (sizeof kSecret - 1)] && c[i] != 0) secret = true;
  }
  ++g_blocks_checked;
  if (secret) ++g_secret_seen;
  if (nonzero) ++g_nonzero_seen;
}

// Allocates blocks of every size 1..g_max, inspects them (before writing anything), frees them.
void AllocateAndInspect(int rounds) {
  std::vector<void*> blocks;
  for (int r = 0; r < rounds; ++r) {
    for (size_t n = 1; n <= g_max; ++n) {
      void* p = (n % 3 == 0) ? static_cast<void*>(new char[n]) : malloc(n);
      Escape(p);
      Inspect(p, n);
      blocks.push_back(p);
      if (n % 3 == 0) {
        delete[] static_cast<char*>(p);
        blocks.pop_back();
      }
    }
    for (void* p : blocks) free(p);
    blocks.clear();
  }
}

// Phase 1: write the secret into every small size, free, allocate again on the same thread.
void* SameThread(void*) {
  for (int r = 0; r < 20; ++r) {
    std::vector<void*> blocks;
    for (size_t n = 1; n <= g_max; ++n) {
      void* p = malloc(n);
      WriteSecret(p, n);
      blocks.push_back(p);
      void* c = calloc(1, n);
      WriteSecret(c, n);
      blocks.push_back(c);
      void* q = realloc(nullptr, n / 2 + 1);
      WriteSecret(q, n / 2 + 1);
      q = realloc(q, n);  // may move within pools: the new block's tail is written below
      WriteSecret(q, n);
      blocks.push_back(q);
      char* a = new char[n];
      WriteSecret(a, n);
      delete[] a;
    }
    for (void* p : blocks) free(p);
    AllocateAndInspect(1);
  }
  return nullptr;
}

// Phase 2: the writer hands its blocks to the freer, then ends.
std::mutex g_mu;
std::vector<void*> g_handed;

void* Writer(void*) {
  for (int r = 0; r < 50; ++r) {
    std::vector<void*> mine;
    for (size_t n = 1; n <= g_max; ++n) {
      void* p = malloc(n);
      WriteSecret(p, n);
      mine.push_back(p);
    }
    std::lock_guard<std::mutex> lock(g_mu);
    for (void* p : mine) g_handed.push_back(p);
  }
  return nullptr;
}

void* Freer(void*) {
  std::vector<void*> all;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    all.swap(g_handed);
  }
  for (void* p : all) free(p);
  AllocateAndInspect(5);  // the freer took the emptied pools into its cache: carve from them
  return nullptr;
}

void* Reader(void*) {
  AllocateAndInspect(10);
  return nullptr;
}

void Run(void* (*fn)(void*)) {
  pthread_t t;
  pthread_create(&t, nullptr, fn, nullptr);
  pthread_join(t, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_max = static_cast<size_t>(atoi(argv[1]));
  if (g_max < 1 || g_max > 4096) g_max = 64;
  SameThread(nullptr);     // main thread
  Run(SameThread);         // another thread
  Run(Writer);             // the writer ends ...
  Run(Freer);              // ... and another thread frees its blocks
  pthread_t readers[4];
  for (auto& r : readers) pthread_create(&r, nullptr, Reader, nullptr);
  for (auto& r : readers) pthread_join(r, nullptr);
  AllocateAndInspect(10);  // main again
  printf("blocks inspected: %ld\n", g_blocks_checked.load());
  printf("fresh blocks holding secret bytes: %ld\n", g_secret_seen.load());
  printf("fresh blocks holding nonzero bytes: %ld\n", g_nonzero_seen.load());
  return (g_secret_seen == 0 && g_nonzero_seen == 0) ? 0 : 1;
}
