// File: tests/programs/size_mix.cc
//
// Every pooled request size through malloc, calloc, operator new and new[], freed in LIFO order (the
// inline LIFO free, with and without other blocks live) and in FIFO order (the owner's free of a block
// that is not the last), plus requests above the pool. `size_mix [ROUNDS]`; prints one line.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace {

struct Node {
  long a, b, c;  // 24 bytes: a pooled operator new
};

// Dirties the block: a pool that hands it out again without zeroing it shows in the calloc blocks,
// which are checked.
unsigned long Touch(void* p, size_t n) {
  memset(p, 0x5A, n);
  return static_cast<unsigned char*>(p)[n - 1];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 20;
  const bool pairs_only = argc > 2 && strcmp(argv[2], "pairs") == 0;
  unsigned long sum = 0;
  bool zeros_ok = true;
  void* held[64];
  for (int r = 0; r < rounds; ++r) {
    // LIFO pairs of every size up to 300: the pool's own size and beyond.
    for (size_t n = 1; n <= 300; ++n) {
      void* p = malloc(n);
      sum += Touch(p, n);
      free(p);
    }
    if (pairs_only) continue;
    // LIFO pairs with an older block live, so that the LIFO free leaves the pool in use.
    void* keep = malloc(8);
    for (size_t n = 1; n <= 200; n += 3) {
      char* p = new char[n];
      sum += Touch(p, n);
      delete[] p;
      Node* q = new Node();
      sum += static_cast<unsigned long>(q->a + q->b + q->c);
      delete q;
    }
    free(keep);
    // Several blocks live, freed oldest first.
    int k = 0;
    for (size_t n = 1; n <= 190 && k < 64; n += 11) {
      held[k] = calloc(1, n);
      for (size_t i = 0; i < n; ++i) zeros_ok &= static_cast<unsigned char*>(held[k])[i] == 0;
      sum += Touch(held[k++], n);
    }
    for (size_t n = 2; n <= 150 && k < 64; n += 13) held[k++] = malloc(n);
    for (int i = 0; i < k; ++i) free(held[i]);
    // Blocks freed newest first: every free is a LIFO free.
    k = 0;
    for (size_t n = 120; n <= 140 && k < 64; ++n) held[k++] = malloc(n);
    while (k > 0) free(held[--k]);
  }
  printf("size_mix: %d rounds, %lu blocks written, calloc %s\n", rounds, sum / 0x5A,
         zeros_ok ? "zeroed" : "NOT ZEROED");
  return zeros_ok ? 0 : 1;
}
