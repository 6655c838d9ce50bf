// File: tests/programs/fork_pipeline.cc
//
// fork() without exec while four threads are allocating, ROUNDS times (default 3). Each child
// allocates (on its own thread and on a new thread), prints, runs a shell pipeline with system() and
// exits with status 10 + round; the parent waits for it and prints its status. An allocator that
// takes no locks around fork() (or leaves per-thread state of the parent's threads behind in the
// child) deadlocks or crashes here. The output is deterministic: the worker threads print nothing,
// stdout is flushed before every fork() and every system().
//
// Usage: fork_pipeline [ROUNDS]
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

namespace {

constexpr int kWorkers = 4;

std::atomic<bool> g_stop{false};
std::atomic<long> g_progress[kWorkers];
std::atomic<long> g_bad{0};

inline void Escape(void* p) { asm volatile("" : : "g"(p) : "memory"); }

// A worker: mixed sizes, C and C++ entry points, a ring of live blocks so frees are not LIFO.
void* Worker(void* raw) {
  const int id = static_cast<int>(reinterpret_cast<intptr_t>(raw));
  void* ring[16] = {};
  size_t sizes[16] = {};
  long n = 0;
  while (!g_stop.load(std::memory_order_relaxed)) {
    const int slot = static_cast<int>(n % 16);
    if (ring[slot] != nullptr) {
      const unsigned char* c = static_cast<const unsigned char*>(ring[slot]);
      if (c[0] != static_cast<unsigned char>(slot + id) ||
          c[sizes[slot] - 1] != static_cast<unsigned char>(slot + id)) {
        g_bad.fetch_add(1);
      }
      free(ring[slot]);
    }
    const size_t size = 8 + static_cast<size_t>((n * 37 + id * 11) % 300);
    ring[slot] = malloc(size);
    sizes[slot] = size;
    if (ring[slot] != nullptr) memset(ring[slot], slot + id, size);
    std::string* s = new std::string(static_cast<size_t>(20 + n % 50), 'x');
    Escape(s);
    delete s;
    void* r = realloc(nullptr, 16);
    r = realloc(r, 80 + static_cast<size_t>(n % 40));
    free(r);
    g_progress[id].store(++n, std::memory_order_relaxed);
  }
  for (void* p : ring) free(p);
  return nullptr;
}

void* ChildThread(void* raw) {
  long* out = static_cast<long*>(raw);
  std::vector<std::string> words;
  for (int i = 0; i < 200; ++i) words.push_back(std::string(static_cast<size_t>(i % 70 + 1), 'a' + i % 26));
  long total = 0;
  for (const std::string& w : words) total += static_cast<long>(w.size());
  *out = total;
  return nullptr;
}

[[noreturn]] void Child(int round) {
  // Allocate on the forking thread, the only thread the child has.
  std::vector<char*> blocks;
  long sum = 0;
  for (int i = 0; i < 500; ++i) {
    const size_t size = 1 + static_cast<size_t>(i % 130);
    char* p = static_cast<char*>(malloc(size));
    if (p == nullptr) _exit(90);
    memset(p, i & 0x7f, size);
    blocks.push_back(p);
  }
  // Every byte of every block still holds its own fill (a block handed out twice, or over the vector's
  // buffer, shows here, or as a wrong sum or a crash).
  int corrupt = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const size_t size = 1 + i % 130;
    for (size_t k = 0; k < size; ++k) {
      if (blocks[i][k] != static_cast<char>(i & 0x7f)) {
        ++corrupt;
        break;
      }
    }
  }
  for (char* p : blocks) {
    sum += p[0];
    free(p);
  }
  // And on a thread created in the child.
  long thread_total = 0;
  pthread_t t;
  if (pthread_create(&t, nullptr, ChildThread, &thread_total) != 0) _exit(91);
  pthread_join(t, nullptr);
  printf("child %d: sum=%ld thread_total=%ld corrupt=%d\n", round, sum, thread_total, corrupt);
  fflush(stdout);
  const int rc = system("printf 'a\\nb\\nc\\n' | sort -r | tr a-z A-Z");
  printf("child %d: pipeline status=%d\n", round, WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
  fflush(stdout);
  exit(10 + round);  // exit(), not _exit(): the child's atexit handlers (its report) must run
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3;
  if (argc > 1) rounds = atoi(argv[1]);
  if (rounds < 1 || rounds > 100) {
    fprintf(stderr, "usage: fork_pipeline [ROUNDS 1..100]\n");
    return 2;
  }
  pthread_t workers[kWorkers];
  for (int i = 0; i < kWorkers; ++i) {
    if (pthread_create(&workers[i], nullptr, Worker, reinterpret_cast<void*>(static_cast<intptr_t>(i))) != 0) {
      fprintf(stderr, "fork_pipeline: pthread_create failed\n");
      return 3;
    }
  }
  printf("parent: %d workers started\n", kWorkers);
  for (int round = 0; round < rounds; ++round) {
    // Fork only while every worker is running its allocation loop.
    for (int i = 0; i < kWorkers; ++i) {
      const long seen = g_progress[i].load();
      while (g_progress[i].load() < seen + 100) sched_yield();
    }
    fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 3;
    }
    if (pid == 0) Child(round);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) {
      perror("waitpid");
      return 3;
    }
    if (WIFEXITED(status)) {
      printf("parent: child %d exited %d\n", round, WEXITSTATUS(status));
    } else {
      printf("parent: child %d killed by signal %d\n", round, WTERMSIG(status));
    }
  }
  g_stop.store(true);
  for (int i = 0; i < kWorkers; ++i) pthread_join(workers[i], nullptr);
  printf("parent: workers stopped, corrupt blocks=%ld\n", g_bad.load());
  return g_bad.load() == 0 ? 0 : 1;
}
