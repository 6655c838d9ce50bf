// File: bench/article_bench.cc
//
// The allocator comparison of docs/BENCHMARKS.md, one binary for every allocator: bench/run_all.sh
// runs it bare and under each LD_PRELOAD (glibc alone, jemalloc, tcmalloc minimal, mimalloc,
// poolscope pool=0, poolscope pool=1), interleaved, and takes medians and ratios.
//
//   malloc_free/SIZE/threads:T   malloc(SIZE) + free, SIZE in 5 20 100 500 2000 8000
//   arena/threads:T              poolscope_arena_open, allocate an int (4 bytes, align 4) and 20 bytes
//                                (align 1, the JDK's Arena.allocate(long) default), close; through
//                                //interpose:client, so without libpoolscope.so it is calloc + free
//                                (one per block and one for the arena: the JDK 25 pattern)
//   call_floor/CALLS/threads:T   CALLS in 2 4: calls to empty functions in another shared object
//                                (bench/call_floor.c) through the PLT, as calls to an interposed
//                                malloc+free (2) or to the four arena functions (4) go: the least any
//                                allocator reached by such calls can cost here. With libpoolscope.so
//                                preloaded the figure is the same (nothing it interposes is called).
//
// T is 1, 2 and the number of online CPUs (deduplicated), registered at run time. Per-operation time
// is the cpu_time column: Google Benchmark sums the threads' CPU time and their iterations, so it is
// the CPU time one operation costs one thread whatever T is (flat with T means no contention). The
// real_time column is wall time / total iterations (a throughput figure); run_all.sh keeps both.
//
// Options besides Google Benchmark's: none. Filter with --benchmark_filter, e.g. 'threads:1$'.
#include <stdlib.h>
#include <unistd.h>

#include <set>
#include <string>

#include <benchmark/benchmark.h>

#include "interpose/poolscope.h"

extern "C" {
void* call_floor_take(size_t n);  // bench/call_floor.c: returns n + 16, does nothing else
void call_floor_give(void* p);    // does nothing
}

namespace {

void BM_MallocFree(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = malloc(size);
    benchmark::DoNotOptimize(p);  // the block escapes: the compiler cannot drop the pair
    free(p);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Arena(benchmark::State& state) {
  for (auto _ : state) {
    poolscope_arena* arena = poolscope_arena_open();
    void* i = poolscope_arena_alloc(arena, sizeof(int), alignof(int));
    void* b = poolscope_arena_alloc(arena, 20, 1);
    benchmark::DoNotOptimize(i);
    benchmark::DoNotOptimize(b);
    poolscope_arena_close(arena);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_CallFloor(benchmark::State& state) {
  const int64_t calls = state.range(0);
  for (auto _ : state) {
    void* p = call_floor_take(5);
    benchmark::DoNotOptimize(p);
    if (calls == 4) {  // open, two allocations, close
      void* q = call_floor_take(20);
      benchmark::DoNotOptimize(q);
      call_floor_give(q);
    }
    call_floor_give(p);
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

int main(int argc, char** argv) {
  std::set<int> threads = {1, 2};
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online > 0) threads.insert(static_cast<int>(online));
  for (int size : {5, 20, 100, 500, 2000, 8000}) {
    for (int t : threads) {
      benchmark::RegisterBenchmark("malloc_free", BM_MallocFree)->Arg(size)->Threads(t);
    }
  }
  for (int t : threads) benchmark::RegisterBenchmark("arena", BM_Arena)->Threads(t);
  for (int calls : {2, 4}) benchmark::RegisterBenchmark("call_floor", BM_CallFloor)->Arg(calls)->Threads(1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
