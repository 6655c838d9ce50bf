// bazel run -c opt //track:reachability_benchmark
//
// ClassifyReachability over a synthetic heap shaped like a large process's at exit: `blocks` blocks of
// 16 to 128 bytes (72 on average) packed in one arena, every word of them a pointer to some block's
// start with probability 1/`pointer_every` and a small integer otherwise, handed over in random order
// (the sort is part of the measured time), or sorted already when the third argument is 0, with a 1 MiB root area that points at one block in 64.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "track/reachability.h"

namespace poolscope {
namespace track {
namespace {

void BM_Classify(benchmark::State& state) {
  const size_t nblocks = state.range(0);
  const uint64_t pointer_every = state.range(1);
  std::mt19937_64 rng(1);
  std::vector<ScanBlock> blocks;
  blocks.reserve(nblocks);
  size_t arena_bytes = nblocks * 80 + 4096;
  char* arena = static_cast<char*>(
      mmap(nullptr, arena_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  size_t offset = 0, heap_bytes = 0;
  for (size_t i = 0; i < nblocks; ++i) {
    size_t size = 16 * (1 + rng() % 8);
    blocks.push_back(ScanBlock::Of(reinterpret_cast<uintptr_t>(arena + offset), size));
    offset += size;
    heap_bytes += size;
  }
  for (const ScanBlock& b : blocks) {
    uint64_t* w = reinterpret_cast<uint64_t*>(b.start);
    for (size_t k = 0; k < b.size() / 8; ++k) {
      w[k] = rng() % pointer_every == 0 ? blocks[rng() % nblocks].start : rng() % 100000;
    }
  }
  std::vector<uint64_t> root_area(1 << 17);
  for (auto& w : root_area) w = rng() % 64 == 0 ? blocks[rng() % nblocks].start : rng() % 1000;
  RootRange roots[] = {{reinterpret_cast<uintptr_t>(root_area.data()),
                        reinterpret_cast<uintptr_t>(root_area.data() + root_area.size())}};
  std::vector<ScanBlock> shuffled = blocks;
  if (state.range(2)) std::shuffle(shuffled.begin(), shuffled.end(), rng);
  DirectMemoryReader reader;
  MmapScratchMemory scratch;
  ReachabilityResult r{};
  for (auto _ : state) {
    state.PauseTiming();
    blocks = shuffled;
    state.ResumeTiming();
    if (!ClassifyReachability(blocks.data(), blocks.size(), roots, 1, reader, reader, scratch, &r)) {
      state.SkipWithError("out of scratch memory");
    }
  }
  state.counters["heap_MiB"] = double(heap_bytes) / (1 << 20);
  state.counters["scanned_MiB"] = double(r.heap_bytes_scanned) / (1 << 20);
  state.counters["reachable"] = double(r.still_reachable.blocks);
  state.counters["definite"] = double(r.definitely_lost.blocks);
  munmap(arena, arena_bytes);
}
BENCHMARK(BM_Classify)
    ->Args({1 << 20, 8, 1})
    ->Args({1 << 20, 8, 0})
    ->Args({2 << 20, 8, 1})
    ->Args({2 << 20, 3, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace
}  // namespace track
}  // namespace poolscope

BENCHMARK_MAIN();
