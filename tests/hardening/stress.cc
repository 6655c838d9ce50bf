// File: tests/hardening/stress.cc
//
// Stress workloads for poolscope, one per mode. Each prints deterministic lines (no addresses, no
// timings), so the output is the same bare and preloaded, and exits 0 when every check held.
//
//   stress threads N          N short-lived threads (waves of 16), each allocating, freeing, and
//                             leaving one block for the next wave to free after it has ended
//   stress storm N            4 producers malloc/new N blocks in total, 4 consumers verify and free
//                             them (every free is a cross-thread free)
//   stress fork ROUNDS        4 threads allocate without pause while main forks ROUNDS times; each
//                             child allocates (and starts a thread), exits 0 through exit()
//   stress dlopen PLUGIN N    dlopen / call / dlclose of PLUGIN, N times
//   stress signals MS         SIGALRM every 100 us (a handler that does not allocate) for MS ms while
//                             main and 2 threads allocate
//   stress large              1 GiB malloc/calloc touched and freed; impossible sizes fail with ENOMEM
//                             (bad_alloc / nullptr for operator new)
//   stress small N            N live small blocks (1..64 bytes) at once, verified, freed in shuffled
//                             order; then N malloc/free pairs
//   stress spin MS            allocates and frees (a live set of 256 blocks) for MS ms (for kill tests)
//   stress hello CODE         prints one line, allocates a little, exits with status CODE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>
#include <vector>

namespace {

inline void Escape(void* p) { asm volatile("" : : "g"(p) : "memory"); }

int g_failures = 0;
void Expect(bool ok, const char* what) {
  if (!ok) {
    ++g_failures;
    fprintf(stderr, "stress: check failed: %s\n", what);
  }
}

// A size the compiler cannot fold.
size_t Opaque(size_t n) {
  volatile size_t v = n;
  return v;
}

bool Filled(const void* p, size_t n, unsigned char b) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) {
    if (c[i] != b) return false;
  }
  return true;
}

// ---- threads ------------------------------------------------------------------------------------
constexpr int kWave = 16;
void* g_carry[kWave];
std::atomic<long> g_thread_bad{0};

void* ShortLived(void* arg) {
  int slot = static_cast<int>(reinterpret_cast<intptr_t>(arg));
  if (g_carry[slot] != nullptr) {
    if (!Filled(g_carry[slot], 24, static_cast<unsigned char>(slot + 1))) ++g_thread_bad;
    free(g_carry[slot]);
  }
  void* blocks[8];
  for (int i = 0; i < 8; ++i) {
    blocks[i] = malloc(8 + i * 8);
    memset(blocks[i], i + 1, 8 + i * 8);
  }
  int* n = new int(slot);
  for (int i = 0; i < 8; ++i) {
    if (!Filled(blocks[i], 8 + i * 8, static_cast<unsigned char>(i + 1))) ++g_thread_bad;
    free(blocks[i]);
  }
  delete n;
  g_carry[slot] = malloc(24);
  memset(g_carry[slot], slot + 1, 24);
  return nullptr;
}

int Threads(long n) {
  long made = 0;
  while (made < n) {
    pthread_t t[kWave];
    int k = static_cast<int>(n - made < kWave ? n - made : kWave);
    for (int i = 0; i < k; ++i) {
      if (pthread_create(&t[i], nullptr, ShortLived, reinterpret_cast<void*>(static_cast<intptr_t>(i))) != 0) {
        Expect(false, "pthread_create");
        return 1;
      }
    }
    for (int i = 0; i < k; ++i) pthread_join(t[i], nullptr);
    made += k;
  }
  for (void*& p : g_carry) {
    free(p);
    p = nullptr;
  }
  Expect(g_thread_bad == 0, "thread blocks kept their contents");
  printf("threads: %ld short-lived threads, contents ok=%d\n", made, g_thread_bad == 0);
  return 0;
}

// ---- storm --------------------------------------------------------------------------------------
struct Item {
  void* p;
  unsigned size;
  unsigned char byte;
  bool cxx;
};
std::mutex g_qmu;
std::condition_variable g_qcv;
std::deque<Item> g_q;
int g_producers_left;
std::atomic<long> g_consumed{0};
std::atomic<long> g_storm_bad{0};
long g_storm_each;

void* Producer(void* arg) {
  uint32_t rng = static_cast<uint32_t>(reinterpret_cast<intptr_t>(arg)) * 2654435761u + 1;
  std::vector<Item> batch;
  for (long i = 0; i < g_storm_each; ++i) {
    rng = rng * 1664525u + 1013904223u;
    unsigned size = 1 + (rng >> 8) % 96;
    unsigned char byte = static_cast<unsigned char>(1 + (rng >> 20) % 200);
    bool cxx = (i & 3) == 0;
    void* p = cxx ? static_cast<void*>(new char[size]) : malloc(size);
    memset(p, byte, size);
    batch.push_back(Item{p, size, byte, cxx});
    if (batch.size() == 32 || i + 1 == g_storm_each) {
      std::lock_guard<std::mutex> lock(g_qmu);
      for (const Item& it : batch) g_q.push_back(it);
      batch.clear();
      g_qcv.notify_all();
    }
  }
  std::lock_guard<std::mutex> lock(g_qmu);
  --g_producers_left;
  g_qcv.notify_all();
  return nullptr;
}

void* Consumer(void*) {
  for (;;) {
    std::vector<Item> mine;
    {
      std::unique_lock<std::mutex> lock(g_qmu);
      g_qcv.wait(lock, [] { return !g_q.empty() || g_producers_left == 0; });
      if (g_q.empty()) return nullptr;
      for (int i = 0; i < 16 && !g_q.empty(); ++i) {
        mine.push_back(g_q.front());
        g_q.pop_front();
      }
    }
    for (const Item& it : mine) {
      if (!Filled(it.p, it.size, it.byte)) ++g_storm_bad;
      if (it.cxx) delete[] static_cast<char*>(it.p);
      else free(it.p);
      ++g_consumed;
    }
  }
}

int Storm(long n) {
  constexpr int kP = 4, kC = 4;
  g_storm_each = n / kP;
  g_producers_left = kP;
  pthread_t p[kP], c[kC];
  for (int i = 0; i < kC; ++i) pthread_create(&c[i], nullptr, Consumer, nullptr);
  for (int i = 0; i < kP; ++i) pthread_create(&p[i], nullptr, Producer, reinterpret_cast<void*>(static_cast<intptr_t>(i)));
  for (int i = 0; i < kP; ++i) pthread_join(p[i], nullptr);
  for (int i = 0; i < kC; ++i) pthread_join(c[i], nullptr);
  Expect(g_consumed == g_storm_each * kP, "every block consumed");
  Expect(g_storm_bad == 0, "storm blocks kept their contents");
  printf("storm: %ld blocks freed on another thread, contents ok=%d\n", g_consumed.load(), g_storm_bad == 0);
  return 0;
}

// ---- fork ---------------------------------------------------------------------------------------
std::atomic<bool> g_stop{false};

void* Churn(void* arg) {
  uint32_t rng = static_cast<uint32_t>(reinterpret_cast<intptr_t>(arg)) + 17;
  void* keep[64] = {};
  while (!g_stop.load(std::memory_order_relaxed)) {
    rng = rng * 1664525u + 1013904223u;
    int slot = (rng >> 8) % 64;
    free(keep[slot]);
    keep[slot] = malloc(1 + (rng >> 16) % 120);
    Escape(keep[slot]);
    if ((rng & 7) == 0) delete new long(rng);
  }
  for (void* p : keep) free(p);
  return nullptr;
}

void* ChildThread(void*) {
  for (int i = 0; i < 100; ++i) {
    void* p = malloc(16 + i % 48);
    memset(p, 1, 16 + i % 48);
    free(p);
  }
  return nullptr;
}

int ChildWork(int round) {
  std::vector<void*> blocks;
  for (int i = 0; i < 200; ++i) {
    void* p = malloc(1 + (i * 7 + round) % 100);
    if (p == nullptr) return 3;
    memset(p, i, 1 + (i * 7 + round) % 100);
    blocks.push_back(p);
  }
  pthread_t t;
  if (pthread_create(&t, nullptr, ChildThread, nullptr) != 0) return 4;
  pthread_join(t, nullptr);
  for (void* p : blocks) free(p);
  delete[] new char[40];
  return 0;
}

int Fork(int rounds) {
  constexpr int kT = 4;
  pthread_t t[kT];
  for (int i = 0; i < kT; ++i) pthread_create(&t[i], nullptr, Churn, reinterpret_cast<void*>(static_cast<intptr_t>(i)));
  int ok = 0;
  for (int r = 0; r < rounds; ++r) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
      Expect(false, "fork");
      break;
    }
    if (pid == 0) exit(ChildWork(r));  // exit(): atexit handlers run, the child writes its report
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      ++ok;
    } else {
      fprintf(stderr, "stress: fork round %d: child status 0x%x\n", r, status);
    }
    for (int i = 0; i < 50; ++i) free(malloc(32));
  }
  g_stop = true;
  for (int i = 0; i < kT; ++i) pthread_join(t[i], nullptr);
  Expect(ok == rounds, "every child exited 0");
  printf("fork: %d rounds, %d children exited 0\n", rounds, ok);
  return 0;
}

// ---- dlopen -------------------------------------------------------------------------------------
int Dlopen(const char* plugin, int loops) {
  long sum = 0;
  for (int i = 0; i < loops; ++i) {
    void* h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      fprintf(stderr, "stress: dlopen: %s\n", dlerror());
      Expect(false, "dlopen");
      return 1;
    }
    auto fn = reinterpret_cast<long (*)(int)>(dlsym(h, "hardening_plugin_call"));
    if (fn == nullptr) {
      Expect(false, "dlsym");
      dlclose(h);
      return 1;
    }
    sum += fn(i % 7);
    Expect(dlclose(h) == 0, "dlclose");
  }
  printf("dlopen: %d loops, sum=%ld\n", loops, sum);
  return 0;
}

// ---- signals ------------------------------------------------------------------------------------
volatile sig_atomic_t g_ticks = 0;
void OnAlarm(int) { g_ticks = g_ticks + 1; }  // no allocation, async-signal-safe

void* SignalWorker(void*) {
  void* keep[32] = {};
  unsigned i = 0;
  while (!g_stop.load(std::memory_order_relaxed)) {
    unsigned slot = i++ % 32;
    free(keep[slot]);
    keep[slot] = (i & 1) ? malloc(1 + i % 80) : calloc(1, 1 + i % 200);
    Escape(keep[slot]);
    if ((i & 15) == 0) delete[] new int[i % 20 + 1];
  }
  for (void* p : keep) free(p);
  return nullptr;
}

long NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int Signals(long ms) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnAlarm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, nullptr);
  g_stop = false;
  pthread_t t[2];
  for (auto& th : t) pthread_create(&th, nullptr, SignalWorker, nullptr);
  struct itimerval it = {{0, 100}, {0, 100}};
  setitimer(ITIMER_REAL, &it, nullptr);
  long end = NowMs() + ms;
  unsigned i = 0;
  void* keep[16] = {};
  size_t keep_n[16] = {};
  unsigned char keep_b[16] = {};
  long bad = 0;
  while (NowMs() < end) {
    for (int k = 0; k < 1000; ++k) {
      unsigned slot = i % 16;
      if (keep[slot] != nullptr && !Filled(keep[slot], keep_n[slot], keep_b[slot])) ++bad;
      free(keep[slot]);
      keep_n[slot] = 1 + i % 100;
      keep_b[slot] = static_cast<unsigned char>(i & 0xff);
      keep[slot] = malloc(keep_n[slot]);
      memset(keep[slot], keep_b[slot], keep_n[slot]);
      void* r = realloc(nullptr, 1 + i % 50);
      r = realloc(r, 1 + i % 90);
      free(r);
      ++i;
    }
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, nullptr);
  g_stop = true;
  for (auto& th : t) pthread_join(th, nullptr);
  for (void* p : keep) free(p);
  Expect(g_ticks > 0, "SIGALRM delivered");
  Expect(bad == 0, "blocks kept their contents while signals arrived");
  printf("signals: delivered=%d contents ok=%d\n", g_ticks > 0, bad == 0);
  return 0;
}

// ---- large --------------------------------------------------------------------------------------
void ExpectEnomem(void* p, const char* what) {
  int e = errno;
  bool ok = p == nullptr && e == ENOMEM;
  if (!ok) {
    ++g_failures;
    fprintf(stderr, "stress: %s: expected NULL with ENOMEM, got %s errno=%d\n", what, p ? "a block" : "NULL", e);
    free(p);
  }
  printf("large: %s -> %s\n", what, ok ? "NULL, ENOMEM" : "WRONG");
}

int Large() {
  const size_t gib = size_t{1} << 30;
  char* p = static_cast<char*>(malloc(Opaque(gib)));
  Expect(p != nullptr, "malloc(1 GiB)");
  if (p != nullptr) {
    for (size_t off = 0; off < gib; off += 64 << 20) p[off] = 1;
    p[gib - 1] = 2;
    Expect(malloc_usable_size(p) >= gib, "malloc_usable_size(1 GiB)");
    free(p);
  }
  printf("large: malloc(1 GiB) touched and freed: %s\n", p != nullptr ? "ok" : "FAILED");
  char* c = static_cast<char*>(calloc(Opaque(gib / 16), 16));
  Expect(c != nullptr && c[0] == 0 && c[gib - 1] == 0 && c[gib / 2] == 0, "calloc(1 GiB) zero");
  free(c);
  printf("large: calloc(1 GiB) zero and freed: %s\n", c != nullptr ? "ok" : "FAILED");
  errno = 0;
  ExpectEnomem(malloc(Opaque(SIZE_MAX)), "malloc(SIZE_MAX)");
  errno = 0;
  ExpectEnomem(malloc(Opaque(SIZE_MAX - 4096)), "malloc(SIZE_MAX - 4096)");
  errno = 0;
  ExpectEnomem(malloc(Opaque(size_t{PTRDIFF_MAX} + 1)), "malloc(PTRDIFF_MAX + 1)");
  errno = 0;
  ExpectEnomem(calloc(Opaque(SIZE_MAX / 2), 3), "calloc(SIZE_MAX / 2, 3)");
  errno = 0;
  ExpectEnomem(calloc(Opaque(size_t{1} << 62), 1), "calloc(2^62, 1)");
  errno = 0;
  ExpectEnomem(aligned_alloc(64, Opaque(SIZE_MAX - 63)), "aligned_alloc(64, SIZE_MAX - 63)");
  errno = 0;
  ExpectEnomem(memalign(4096, Opaque(SIZE_MAX - 8192)), "memalign(4096, SIZE_MAX - 8192)");
  errno = 0;
  ExpectEnomem(valloc(Opaque(SIZE_MAX - 100)), "valloc(SIZE_MAX - 100)");
  {
    void* q = malloc(32);
    memset(q, 9, 32);
    errno = 0;
    void* r = realloc(q, Opaque(SIZE_MAX - 10));
    int e = errno;
    bool ok = r == nullptr && e == ENOMEM && Filled(q, 32, 9);
    Expect(ok, "realloc(p, SIZE_MAX - 10) fails and keeps p");
    printf("large: realloc(p, SIZE_MAX - 10) -> %s\n", ok ? "NULL, ENOMEM, p kept" : "WRONG");
    errno = 0;
    r = reallocarray(q, Opaque(SIZE_MAX / 4), 8);
    e = errno;
    ok = r == nullptr && e == ENOMEM && Filled(q, 32, 9);
    Expect(ok, "reallocarray overflow fails and keeps p");
    printf("large: reallocarray(p, SIZE_MAX / 4, 8) -> %s\n", ok ? "NULL, ENOMEM, p kept" : "WRONG");
    free(q);
  }
  {
    void* out = reinterpret_cast<void*>(0x1234);
    int rc = posix_memalign(&out, 64, Opaque(SIZE_MAX - 4096));
    bool ok = rc == ENOMEM && out == reinterpret_cast<void*>(0x1234);
    Expect(ok, "posix_memalign(SIZE_MAX - 4096) ENOMEM, *memptr untouched");
    printf("large: posix_memalign(64, SIZE_MAX - 4096) -> %s\n", ok ? "ENOMEM, untouched" : "WRONG");
  }
  {
    bool threw = false;
    try {
      char* x = static_cast<char*>(::operator new(Opaque(SIZE_MAX - 4096)));
      Escape(x);
      ::operator delete(x);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    Expect(threw, "operator new(huge) throws bad_alloc");
    printf("large: operator new(SIZE_MAX - 4096) -> %s\n", threw ? "bad_alloc" : "WRONG");
    void* y = ::operator new[](Opaque(SIZE_MAX - 4096), std::nothrow);
    Expect(y == nullptr, "operator new[](huge, nothrow) is nullptr");
    printf("large: operator new[](SIZE_MAX - 4096, nothrow) -> %s\n", y == nullptr ? "nullptr" : "WRONG");
  }
  return 0;
}

// ---- small --------------------------------------------------------------------------------------
int Small(long n) {
  std::vector<void*> v(static_cast<size_t>(n));
  for (long i = 0; i < n; ++i) {
    size_t sz = 1 + static_cast<size_t>(i % 64);
    v[i] = malloc(sz);
    if (v[i] == nullptr) {
      Expect(false, "small malloc");
      return 1;
    }
    memset(v[i], static_cast<int>(i & 0xff), sz);
  }
  long bad = 0;
  for (long i = 0; i < n; ++i) {
    if (!Filled(v[i], 1 + static_cast<size_t>(i % 64), static_cast<unsigned char>(i & 0xff))) ++bad;
  }
  // Shuffle (deterministic) and free.
  uint32_t rng = 12345;
  for (long i = n - 1; i > 0; --i) {
    rng = rng * 1664525u + 1013904223u;
    long j = static_cast<long>((rng >> 4) % static_cast<uint32_t>(i + 1));
    std::swap(v[i], v[j]);
  }
  for (void* p : v) free(p);
  for (long i = 0; i < n; ++i) {
    void* p = malloc(1 + static_cast<size_t>(i % 64));
    Escape(p);
    free(p);
  }
  Expect(bad == 0, "small blocks kept their contents");
  printf("small: %ld live at once then freed, %ld pairs, contents ok=%d\n", n, n, bad == 0);
  return 0;
}

// ---- spin / hello ---------------------------------------------------------------------------------
int Spin(long ms) {
  long end = NowMs() + ms;
  void* keep[256] = {};
  unsigned i = 0;
  while (NowMs() < end) {
    for (int k = 0; k < 1000; ++k, ++i) {
      unsigned slot = (i * 7) % 256;
      free(keep[slot]);
      keep[slot] = malloc(1 + i % 120);
      Escape(keep[slot]);
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
  }
  for (void* p : keep) free(p);
  printf("spin: done\n");
  return 0;
}

int Hello(int code) {
  std::vector<int> v(100, 1);
  char* p = static_cast<char*>(malloc(40));
  snprintf(p, 40, "hello from stress, exit %d", code);
  printf("%s, sum %d\n", p, v[0] + v[99]);
  free(p);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: stress threads|storm|fork|dlopen|signals|large|small [ARGS]\n");
    return 2;
  }
  const char* mode = argv[1];
  long arg = argc > 2 ? atol(argv[2]) : 0;
  int rc = 2;
  if (strcmp(mode, "threads") == 0) rc = Threads(arg > 0 ? arg : 2000);
  else if (strcmp(mode, "storm") == 0) rc = Storm(arg > 0 ? arg : 400000);
  else if (strcmp(mode, "fork") == 0) rc = Fork(arg > 0 ? static_cast<int>(arg) : 20);
  else if (strcmp(mode, "dlopen") == 0 && argc > 2) rc = Dlopen(argv[2], argc > 3 ? atoi(argv[3]) : 200);
  else if (strcmp(mode, "signals") == 0) rc = Signals(arg > 0 ? arg : 2000);
  else if (strcmp(mode, "large") == 0) rc = Large();
  else if (strcmp(mode, "small") == 0) rc = Small(arg > 0 ? arg : 1000000);
  else if (strcmp(mode, "spin") == 0) rc = Spin(arg > 0 ? arg : 60000);
  else if (strcmp(mode, "hello") == 0) {
    fflush(stdout);
    return Hello(static_cast<int>(arg));
  }
  else fprintf(stderr, "stress: unknown mode %s\n", mode);
  fflush(stdout);
  return rc != 0 ? rc : (g_failures == 0 ? 0 : 1);
}
