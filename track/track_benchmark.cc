// bazel run -c opt //track:track_benchmark [-- --benchmark_filter=...]
#include <execinfo.h>

#include <algorithm>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "track/fake_memory.h"
#include "track/live_table.h"
#include "track/stack_capture.h"
#include "track/stack_depot.h"
#include "track/symbolizer.h"

namespace poolscope {
namespace track {
namespace {

// Calls `fn` `depth` frames deep.
template <typename F>
__attribute__((noinline)) void AtDepth(int depth, F& fn) {
  if (depth == 0) {
    fn();
  } else {
    AtDepth(depth - 1, fn);
  }
  benchmark::ClobberMemory();
}

void BM_CaptureStack16(benchmark::State& state) {
  uintptr_t pcs[16];
  auto body = [&] {
    for (auto _ : state) benchmark::DoNotOptimize(CaptureStack(pcs, 16, 0));
  };
  AtDepth(24, body);
}
BENCHMARK(BM_CaptureStack16);

// The same stack again and again, with a memo: every frame is checked, none walked.
void BM_CaptureStack16Memo(benchmark::State& state) {
  uintptr_t pcs[16];
  CaptureMemo memo{};
  auto body = [&] {
    for (auto _ : state) benchmark::DoNotOptimize(CaptureStack(pcs, 16, 0, &memo));
  };
  AtDepth(24, body);
}
BENCHMARK(BM_CaptureStack16Memo);

void BM_CaptureStack16Unwinder(benchmark::State& state) {
  uintptr_t pcs[16];
  auto body = [&] {
    for (auto _ : state) benchmark::DoNotOptimize(CaptureStackWithUnwinder(pcs, 16, 0));
  };
  AtDepth(24, body);
}
BENCHMARK(BM_CaptureStack16Unwinder);

void BM_GlibcBacktrace16(benchmark::State& state) {
  void* pcs[17];
  auto body = [&] {
    for (auto _ : state) benchmark::DoNotOptimize(backtrace(pcs, 17));
  };
  AtDepth(24, body);
}
BENCHMARK(BM_GlibcBacktrace16);

void BM_DepotInsertKnown16(benchmark::State& state) {
  FakeMemory mem;
  StackDepot depot(&mem);
  std::vector<std::vector<uintptr_t>> stacks(1000, std::vector<uintptr_t>(16));
  std::mt19937_64 rng(1);
  for (auto& s : stacks) {
    for (auto& pc : s) pc = rng() & 0x7fffffffffff;
    depot.Insert(s.data(), 16);
  }
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(depot.Insert(stacks[i++ % stacks.size()].data(), 16));
}
BENCHMARK(BM_DepotInsertKnown16);

// Insert + Erase of one block, with `range(0)` other blocks live in the table.
void BM_LiveInsertErase(benchmark::State& state) {
  static FakeMemory* mem;
  static LiveTable* table;
  if (state.thread_index() == 0) {
    mem = new FakeMemory;
    table = new LiveTable(mem);
    for (int64_t i = 0; i < state.range(0); ++i) table->Insert(0x7f0000000000 + i * 64, 32, 1, 0);
  }
  uintptr_t p = 0x100000000 + (uintptr_t(state.thread_index()) << 32);
  for (auto _ : state) {
    table->Insert(p, 32, 5, 1);
    LiveEntry e;
    benchmark::DoNotOptimize(table->Erase(p, &e));
    p += 48;
  }
  if (state.thread_index() == 0) {
    delete table;
    delete mem;
  }
}
BENCHMARK(BM_LiveInsertErase)->Arg(0)->Arg(1 << 20);

// The live table under address shapes that stress where it places keys: `range(0)` selects
//   0: 2^20 blocks of 48 bytes at random addresses (no locality), freed in random order;
//   1: 2^20 blocks of 16 bytes back to back (dense pooled blocks), freed in allocation order;
//   2: 4 heaps 64 MiB apart (glibc's thread arenas are aligned so), 2^18 blocks of 32 bytes each,
//      freed in allocation order.
// Each iteration inserts the whole set and erases it again; items are blocks.
void BM_LiveShapes(benchmark::State& state) {
  std::vector<uintptr_t> keys;
  std::mt19937_64 rng(1);
  const int shape = static_cast<int>(state.range(0));
  for (uintptr_t i = 0; i < (uintptr_t{1} << 20); ++i) {
    if (shape == 0) keys.push_back(((rng() % (uintptr_t{1} << 36)) + (uintptr_t{1} << 32)) & ~uintptr_t{15});
    if (shape == 1) keys.push_back(0x7f0000000000 + i * 16);
    if (shape == 2) keys.push_back(0x7f0000000000 + (i & 3) * (uintptr_t{64} << 20) + (i >> 2) * 32);
  }
  std::vector<uintptr_t> order = keys;
  if (shape == 0) std::shuffle(order.begin(), order.end(), rng);
  FakeMemory mem;
  LiveTable table(&mem);
  for (auto _ : state) {
    for (uintptr_t k : keys) table.Insert(k, 32, 1, 0);
    LiveEntry e;
    for (uintptr_t k : order) benchmark::DoNotOptimize(table.Erase(k, &e));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(keys.size()));
}
BENCHMARK(BM_LiveShapes)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LiveInsertErase)->Arg(1 << 16)->Threads(2);

void BM_SymbolizeCached(benchmark::State& state) {
  Symbolizer sym;
  uintptr_t pc = reinterpret_cast<uintptr_t>(&BM_SymbolizeCached);
  sym.SymbolizeAddress(pc);
  for (auto _ : state) benchmark::DoNotOptimize(sym.SymbolizeAddress(pc));
}
BENCHMARK(BM_SymbolizeCached);

// A fresh symbolizer per iteration: /proc/self/maps, then this binary's symbols and lines.
void BM_SymbolizeFirst(benchmark::State& state) {
  uintptr_t pc = reinterpret_cast<uintptr_t>(&BM_SymbolizeCached);
  for (auto _ : state) {
    Symbolizer sym;
    benchmark::DoNotOptimize(sym.SymbolizeAddress(pc));
  }
}
BENCHMARK(BM_SymbolizeFirst)->Unit(benchmark::kMillisecond);

// New addresses in an object already loaded: the per-frame cost of a report.
void BM_SymbolizeUncachedAddresses(benchmark::State& state) {
  Symbolizer sym;
  uintptr_t base = reinterpret_cast<uintptr_t>(&BM_SymbolizeCached);
  sym.SymbolizeAddress(base);
  uintptr_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(sym.SymbolizeAddress(base + (++i % 4096) + (i / 4096) * 1000000007 % 97));
}
BENCHMARK(BM_SymbolizeUncachedAddresses)->Iterations(4000);

}  // namespace
}  // namespace track
}  // namespace poolscope

BENCHMARK_MAIN();
