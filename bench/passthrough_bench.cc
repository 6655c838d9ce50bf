// File: bench/passthrough_bench.cc
//
// malloc + free of one block, for the sizes of docs/BENCHMARKS.md: 5 and 20 (pooled by default),
// 100 and 500 (above the default pool size: pass-through), 2000 and 8000 (beyond glibc's tcache).
// The interesting number is the ratio between a bare run and a run with libpoolscope.so preloaded;
// bench/run_passthrough.sh runs them interleaved, pinned to one core, and prints medians and ratios.
// Single-threaded on purpose: the pass-through figures of docs/BENCHMARKS.md are single-threaded;
// BM_MallocFreeBatch keeps 64 blocks live so that a pool fills and is retired, which a lone
// malloc+free pair never does.
#include <stdlib.h>

#include <benchmark/benchmark.h>

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
BENCHMARK(BM_MallocFree)->Arg(5)->Arg(20)->Arg(100)->Arg(500)->Arg(2000)->Arg(8000);

void BM_MallocFreeBatch(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  constexpr int kBatch = 64;
  void* blocks[kBatch];
  for (auto _ : state) {
    for (void*& p : blocks) {
      p = malloc(size);
      benchmark::DoNotOptimize(p);
    }
    for (void* p : blocks) free(p);
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_MallocFreeBatch)->Arg(5)->Arg(20)->Arg(100);

}  // namespace
