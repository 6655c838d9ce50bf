// File: tools/demo_workload.cc
//
// The bundled workload of `poolscope compare`: the confined-arena pattern that made the JDK pool
// small allocations. Several threads each run many rounds of "open an arena, allocate a pointer, a
// long, an int and a 20-byte string, write to them, compute a checksum, close the arena"; each
// round also makes a few plain mallocs of 5..64 bytes (most freed in the same round, some handed to
// the next thread through a small queue and freed there) and one larger block of 1..8 KiB that no
// pool takes. A few deliberate leaks come from named, noinline functions, so that a report has
// something true to say:
//   leak_config_table()   3 blocks of 48 bytes
//   leak_session_cache()  2 blocks of 200 bytes, three calls deep
// each cleared before it is written: a block's bytes past its text would otherwise hold whatever
// the allocator's last use of that memory left, now and then the address of another leaked block,
// which would make that one indirectly lost instead of definitely (as memcheck would say too).
// It prints one line, "checksum <hex> threads <n> rounds <n>", identical for identical flags, and
// exits 0 (1 when an arena hands out memory that is not zero, 2 for bad flags).
//
// It links //interpose:client, which calls libpoolscope.so when it is preloaded and falls back to
// malloc/free otherwise. Build with -fno-omit-frame-pointer -g so that leak stacks name these
// functions.
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "interpose/poolscope.h"

namespace {

#define DEMO_NOINLINE __attribute__((noinline))

// Keeps the compiler from proving a block unused and removing its allocation.
inline void Escape(void* p) { asm volatile("" : : "r"(p) : "memory"); }

std::atomic<int> g_nonzero_blocks{0};

// A small deterministic generator (splitmix64).
struct Random {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  size_t Between(size_t low, size_t high) { return low + Next() % (high - low + 1); }
};

uint64_t Mix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9E3779B97F4A7C15ULL + (hash << 6) + (hash >> 2);
  return hash;
}

// A bounded queue of blocks that another thread frees.
class FreeQueue {
 public:
  static constexpr size_t kCapacity = 64;

  // False when full: the caller frees the block itself.
  bool Push(void* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (blocks_.size() >= kCapacity) return false;
    blocks_.push_back(block);
    return true;
  }

  void FreeAll() {
    std::deque<void*> taken;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      taken.swap(blocks_);
    }
    for (void* block : taken) free(block);
  }

 private:
  std::mutex mutex_;
  std::deque<void*> blocks_;
};

bool AllZero(const void* block, size_t size) {
  const unsigned char* bytes = static_cast<const unsigned char*>(block);
  for (size_t i = 0; i < size; ++i) {
    if (bytes[i] != 0) return false;
  }
  return true;
}

void* ArenaAlloc(poolscope_arena* arena, size_t size, size_t align) {
  void* block = poolscope_arena_alloc(arena, size, align);
  if (block == nullptr) {
    std::fprintf(stderr, "demo_workload: poolscope_arena_alloc(%zu, %zu) failed\n", size, align);
    std::exit(1);
  }
  if (!AllZero(block, size)) g_nonzero_blocks.fetch_add(1, std::memory_order_relaxed);
  return block;
}

// One confined-arena round: four small allocations, a little work, close.
DEMO_NOINLINE uint64_t ArenaRound(uint64_t round, uint64_t thread_index) {
  poolscope_arena* arena = poolscope_arena_open();
  if (arena == nullptr) {
    std::fprintf(stderr, "demo_workload: poolscope_arena_open failed\n");
    std::exit(1);
  }
  auto** pointer = static_cast<long**>(ArenaAlloc(arena, sizeof(long*), alignof(long*)));
  auto* number = static_cast<long*>(ArenaAlloc(arena, sizeof(long), alignof(long)));
  auto* counter = static_cast<int*>(ArenaAlloc(arena, sizeof(int), alignof(int)));
  auto* text = static_cast<char*>(ArenaAlloc(arena, 20, 1));
  *number = static_cast<long>(round * 31 + thread_index);
  *pointer = number;
  *counter = static_cast<int>(round % 1000);
  std::snprintf(text, 20, "r%llu-t%llu", static_cast<unsigned long long>(round),
                static_cast<unsigned long long>(thread_index));
  uint64_t sum = static_cast<uint64_t>(**pointer) * 3 + static_cast<uint64_t>(*counter);
  for (size_t i = 0; i < 20 && text[i] != '\0'; ++i) sum = Mix(sum, static_cast<uint8_t>(text[i]));
  poolscope_arena_close(arena);
  return sum;
}

// Plain mallocs: small blocks (some freed by the next thread), and one block too big for a pool.
DEMO_NOINLINE uint64_t PlainRound(Random& random, FreeQueue& next_thread) {
  uint64_t sum = 0;
  int small_blocks = static_cast<int>(random.Between(2, 4));
  for (int i = 0; i < small_blocks; ++i) {
    size_t size = random.Between(5, 64);
    auto* block = static_cast<unsigned char*>(malloc(size));
    if (block == nullptr) std::exit(1);
    for (size_t k = 0; k < size; ++k) block[k] = static_cast<unsigned char>(k * 7 + size);
    sum = Mix(sum, block[size - 1] + size);
    if (i == 0 && random.Next() % 4 == 0) {
      if (!next_thread.Push(block)) free(block);
    } else {
      free(block);
    }
  }
  size_t large = random.Between(1024, 8192);
  auto* block = static_cast<unsigned char*>(malloc(large));
  if (block == nullptr) std::exit(1);
  std::memset(block, 0x5A, large);
  sum = Mix(sum, block[large / 2] + large);
  free(block);
  return sum;
}

void Worker(uint64_t thread_index, uint64_t rounds, FreeQueue* own, FreeQueue* next,
            uint64_t* result) {
  Random random{thread_index * 1000003ULL + 17};
  uint64_t sum = 0;
  for (uint64_t round = 0; round < rounds; ++round) {
    sum = Mix(sum, ArenaRound(round, thread_index));
    sum = Mix(sum, PlainRound(random, *next));
    if (round % 16 == 0) own->FreeAll();
  }
  own->FreeAll();
  *result = sum;
}

// ---- deliberate leaks ----------------------------------------------------------------------

DEMO_NOINLINE void* AllocateSessionSlot(int slot) {
  auto* block = static_cast<char*>(malloc(200));
  if (block != nullptr) {
    std::memset(block, 0, 200);
    std::snprintf(block, 200, "session-slot-%d", slot);
  }
  Escape(block);
  return block;
}

DEMO_NOINLINE void WarmSessionCache(int slots) {
  for (int slot = 0; slot < slots; ++slot) {
    void* block = AllocateSessionSlot(slot);
    Escape(block);  // the only pointer is dropped here: a definite leak
  }
}

DEMO_NOINLINE void leak_session_cache() { WarmSessionCache(2); }

DEMO_NOINLINE void leak_config_table() {
  for (int i = 0; i < 3; ++i) {
    auto* entry = static_cast<char*>(malloc(48));
    if (entry != nullptr) {
      std::memset(entry, 0, 48);
      std::snprintf(entry, 48, "config-entry-%d", i);
    }
    Escape(entry);
  }
}

bool ParseCount(const char* text, const char* flag, uint64_t low, uint64_t high, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (*text == '\0' || *end != '\0' || errno != 0 || text[0] == '-' || value < low ||
      value > high) {
    std::fprintf(stderr, "demo_workload: %s: expected a number from %llu to %llu, got '%s'\n",
                 flag, static_cast<unsigned long long>(low),
                 static_cast<unsigned long long>(high), text);
    return false;
  }
  *out = value;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t threads = 4, rounds = 20000;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value_of = [&](const char* name) -> const char* {
      std::string prefix = std::string(name) + "=";
      if (arg.rfind(prefix, 0) == 0) return argv[i] + prefix.size();
      if (arg == name && i + 1 < argc) return argv[++i];
      return nullptr;
    };
    if (arg == "-h" || arg == "--help") {
      std::printf(
          "usage: demo_workload [--threads=N] [--rounds=N]\n"
          "Threads run rounds of confined-arena allocations (a pointer, a long, an int, a 20-byte\n"
          "string), plain mallocs of 5..64 bytes (some freed by another thread) and of 1..8 KiB,\n"
          "and a few deliberate leaks. Prints one checksum line. Defaults: 4 threads, 20000 "
          "rounds.\n");
      return 0;
    }
    if (const char* v = value_of("--threads")) {
      if (!ParseCount(v, "--threads", 1, 256, &threads)) return 2;
    } else if (const char* v = value_of("--rounds")) {
      if (!ParseCount(v, "--rounds", 0, 100000000, &rounds)) return 2;
    } else {
      std::fprintf(stderr, "demo_workload: %s: unknown flag (see --help)\n", argv[i]);
      return 2;
    }
  }

  leak_config_table();

  std::vector<FreeQueue> queues(threads);
  std::vector<uint64_t> results(threads, 0);
  std::vector<std::thread> workers;
  for (uint64_t t = 0; t < threads; ++t) {
    workers.emplace_back(Worker, t, rounds, &queues[t], &queues[(t + 1) % threads], &results[t]);
  }
  for (std::thread& worker : workers) worker.join();
  for (FreeQueue& queue : queues) queue.FreeAll();

  leak_session_cache();

  uint64_t checksum = 0;
  for (uint64_t result : results) checksum = Mix(checksum, result);
  std::printf("checksum %016llx threads %llu rounds %llu\n",
              static_cast<unsigned long long>(checksum), static_cast<unsigned long long>(threads),
              static_cast<unsigned long long>(rounds));
  if (g_nonzero_blocks.load() != 0) {
    std::fprintf(stderr, "demo_workload: %d arena blocks were not zero when handed out\n",
                 g_nonzero_blocks.load());
    return 1;
  }
  return 0;
}
