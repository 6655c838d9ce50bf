// A deterministic random walk over the malloc family: `alloc_fuzz SEED OPS THREADS`. Each thread keeps
// 256 slots; an operation picks one and allocates into it (malloc, calloc, realloc(NULL), aligned_alloc,
// posix_memalign, memalign; sizes mostly small, sometimes up to 8 KiB), or checks what it holds and then
// frees it, reallocs it (larger or smaller: the kept prefix must survive) or hands it to the next
// thread, which checks and frees it later. A third of the operations take the slot allocated last. Every block is filled with a byte derived from its slot and
// generation and checked before it is freed or resized; calloc memory must be zero;
// malloc_usable_size must cover the request; alignment must hold. Prints the number of operations and
// of failed checks (the test wants 0) and a checksum of the fill bytes, which is the same with and
// without a preloaded allocator.
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kSlots = 256, kMaxThreads = 8, kHandoff = 64 };

typedef struct {
  unsigned char* p;
  size_t n;
  unsigned char fill;
} Block;

typedef struct {
  pthread_mutex_t lock;
  Block blocks[kHandoff];
  int count;
} Mailbox;

static Mailbox mailboxes[kMaxThreads];
static int nthreads = 1;
static long ops_per_thread = 100000;
static unsigned long seed0 = 1;

typedef struct {
  int index;
  unsigned long rng;
  long failures;
  unsigned long checksum;
} Worker;

static unsigned long next_rand(unsigned long* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static size_t pick_size(Worker* w) {
  unsigned long r = next_rand(&w->rng) % 100;
  if (r < 70) return 1 + next_rand(&w->rng) % 64;
  if (r < 90) return 65 + next_rand(&w->rng) % 448;
  if (r < 98) return 513 + next_rand(&w->rng) % 7680;
  return 0;  // malloc(0) and friends: a unique pointer or NULL, either is fine
}

static void fail(Worker* w, const char* what, size_t n) {
  if (w->failures++ < 5) fprintf(stderr, "alloc_fuzz: thread %d: %s (size %zu)\n", w->index, what, n);
}

static void check(Worker* w, const Block* b) {
  for (size_t i = 0; i < b->n; ++i) {
    if (b->p[i] != b->fill) {
      fail(w, "a block's contents changed", b->n);
      return;
    }
  }
  w->checksum = w->checksum * 31 + b->fill + b->n;
}

static void fill(Block* b, unsigned char f) {
  b->fill = f;
  if (b->p != NULL) memset(b->p, f, b->n);
}

static void allocate(Worker* w, Block* b, unsigned char f) {
  size_t n = pick_size(w);
  void* p = NULL;
  size_t align = 0;
  switch (next_rand(&w->rng) % 8) {
    case 0:
    case 1:
    case 2:
      p = malloc(n);
      break;
    case 3: {
      p = calloc(1, n);
      for (size_t i = 0; p != NULL && i < n; ++i) {
        if (((unsigned char*)p)[i] != 0) {
          fail(w, "calloc memory not zero", n);
          break;
        }
      }
      break;
    }
    case 4:
      p = realloc(NULL, n);
      break;
    case 5:
      align = (size_t)16 << (next_rand(&w->rng) % 4);
      p = aligned_alloc(align, (n + align - 1) / align * align);
      break;
    case 6:
      align = (size_t)8 << (next_rand(&w->rng) % 5);
      if (posix_memalign(&p, align, n) != 0) p = NULL;
      break;
    default:
      align = (size_t)32 << (next_rand(&w->rng) % 3);
      p = memalign(align, n);
      break;
  }
  if (p == NULL && n != 0) fail(w, "allocation failed", n);
  if (p != NULL && align != 0 && ((uintptr_t)p & (align - 1)) != 0) fail(w, "misaligned", n);
  if (p != NULL && ((uintptr_t)p & 7) != 0) fail(w, "not 8-aligned", n);
  if (p != NULL && malloc_usable_size(p) < n) fail(w, "usable size below the request", n);
  b->p = p;
  b->n = p != NULL ? n : 0;
  fill(b, f);
}

static void resize(Worker* w, Block* b, unsigned char f) {
  size_t n = pick_size(w);
  if (n == 0) n = 1;  // realloc(p, 0) frees p: not what this step tests
  unsigned char* q = realloc(b->p, n);
  if (q == NULL) {
    fail(w, "realloc failed", n);
    return;
  }
  size_t kept = n < b->n ? n : b->n;
  for (size_t i = 0; i < kept; ++i) {
    if (q[i] != b->fill) {
      fail(w, "realloc lost the kept prefix", n);
      break;
    }
  }
  if (malloc_usable_size(q) < n) fail(w, "usable size below the realloc request", n);
  b->p = q;
  b->n = n;
  fill(b, f);
}

static void* run(void* arg) {
  Worker* w = arg;
  Block slots[kSlots];
  memset(slots, 0, sizeof slots);
  Mailbox* mine = &mailboxes[w->index];
  Mailbox* next = &mailboxes[(w->index + 1) % nthreads];
  // The slots allocated last, newest on top: a third of the operations take the newest, so blocks are
  // also freed and resized in the reverse order of their allocation, as temporaries are.
  int recent[16];
  int nrecent = 0;
  for (long op = 0; op < ops_per_thread; ++op) {
    unsigned char f = (unsigned char)(1 + (op * 7 + w->index) % 251);
    int slot = (int)(next_rand(&w->rng) % kSlots);
    if (nrecent > 0 && next_rand(&w->rng) % 3 == 0) slot = recent[--nrecent];
    Block* b = &slots[slot];
    if (b->p == NULL) {
      allocate(w, b, f);
      if (nrecent == 16) {
        memmove(recent, recent + 1, sizeof recent - sizeof recent[0]);
        --nrecent;
      }
      recent[nrecent++] = slot;
      continue;
    }
    check(w, b);
    unsigned long r = next_rand(&w->rng) % 10;
    if (r < 5) {
      free(b->p);
      b->p = NULL;
    } else if (r < 9) {
      resize(w, b, f);
    } else if (nthreads > 1) {
      pthread_mutex_lock(&next->lock);
      if (next->count < kHandoff) {
        next->blocks[next->count++] = *b;
        b->p = NULL;
      }
      pthread_mutex_unlock(&next->lock);
    }
    if (op % 64 == 0) {
      // Blocks other threads handed over: checked and freed here.
      pthread_mutex_lock(&mine->lock);
      for (int i = 0; i < mine->count; ++i) {
        check(w, &mine->blocks[i]);
        free(mine->blocks[i].p);
      }
      mine->count = 0;
      pthread_mutex_unlock(&mine->lock);
    }
  }
  for (int i = 0; i < kSlots; ++i) {
    if (slots[i].p != NULL) check(w, &slots[i]);
    free(slots[i].p);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) seed0 = strtoul(argv[1], NULL, 10);
  if (argc > 2) ops_per_thread = strtol(argv[2], NULL, 10);
  if (argc > 3) nthreads = atoi(argv[3]);
  if (nthreads < 1 || nthreads > kMaxThreads || seed0 == 0) {
    fprintf(stderr, "usage: alloc_fuzz SEED(>0) OPS THREADS(1..%d)\n", kMaxThreads);
    return 2;
  }
  Worker workers[kMaxThreads];
  pthread_t threads[kMaxThreads];
  for (int i = 0; i < nthreads; ++i) {
    pthread_mutex_init(&mailboxes[i].lock, NULL);
    workers[i] = (Worker){i, seed0 * 2654435761u + (unsigned long)i * 40503u + 1, 0, 0};
  }
  for (int i = 0; i < nthreads; ++i) pthread_create(&threads[i], NULL, run, &workers[i]);
  long failures = 0;
  for (int i = 0; i < nthreads; ++i) {
    pthread_join(threads[i], NULL);
    failures += workers[i].failures;
  }
  for (int i = 0; i < nthreads; ++i) {  // what was handed over last
    for (int k = 0; k < mailboxes[i].count; ++k) {
      check(&workers[i], &mailboxes[i].blocks[k]);
      free(mailboxes[i].blocks[k].p);
    }
  }
  failures = 0;
  for (int i = 0; i < nthreads; ++i) failures += workers[i].failures;
  if (nthreads == 1) {
    printf("operations %ld failures %ld checksum %lx\n", ops_per_thread, failures, workers[0].checksum);
  } else {
    // Which thread frees a handed-over block first depends on timing: no checksum.
    printf("operations %ld threads %d failures %ld\n", ops_per_thread, nthreads, failures);
  }
  return failures == 0 ? 0 : 1;
}
