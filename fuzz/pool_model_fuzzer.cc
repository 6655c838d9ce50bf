// File: fuzz/pool_model_fuzzer.cc
//
// libFuzzer target: the pool's carve/free sequence (pool::ThreadCache over pool::FakeBackend) against
// a model. The input picks a configuration, then a sequence of operations on two simulated threads
// (two ThreadCaches used from this one OS thread, so a free through the other cache takes the
// cross-thread path): carve(n), free(k-th live block), double free, interior free, usable size, drain,
// thread-cache shutdown (the "thread" ends and a new one takes its slot). After every step:
//   - a carved block is inside a pool, 8/16-aligned as configured, zero, and overlaps no live block;
//   - every live block still holds the bytes written into it (nothing zeroed or re-carved under it);
//   - a free of a live block answers kFreed; a double, interior or stale free never answers kFreed;
//   - the counters reconcile: hits - pooled_frees == live blocks, double + invalid == bad frees made,
//     FakeBackend's live pools == pools_created - pools_released;
// and at the end, once every block is freed and every cache shut down, no pool and no header is left.
#include <fuzzer/FuzzedDataProvider.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "pool/fake_backend.h"
#include "pool/pool.h"
#include "pool/thread_cache.h"

using poolscope::pool::Config;
using poolscope::pool::Domain;
using poolscope::pool::PoolHeader;
using poolscope::pool::PoolStats;
using poolscope::pool::TestDomain;
using poolscope::pool::ThreadCache;

namespace {

struct Block {
  size_t n;
  uint8_t fill;
};

const char* ResultName(Domain::FreeResult r) {
  switch (r) {
    case Domain::FreeResult::kFreed: return "kFreed";
    case Domain::FreeResult::kInvalid: return "kInvalid";
    case Domain::FreeResult::kDouble: return "kDouble";
    case Domain::FreeResult::kArenaBlock: return "kArenaBlock";
  }
  return "?";
}

#define CHECK(cond, ...)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "pool_model_fuzzer: step %d: check failed: %s: ", step, #cond); \
      fprintf(stderr, __VA_ARGS__);                                         \
      fprintf(stderr, "\n");                                                \
      abort();                                                              \
    }                                                                       \
  } while (0)

constexpr size_t kPoolSizes[] = {8, 16, 24, 40, 64, 64, 96, 128, 256, 1000, 4096};
constexpr size_t kMaxLive = 400;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  int step = 0;
  static const bool trace = getenv("POOL_FUZZ_TRACE") != nullptr;  // one line per operation
  Config cfg;
  cfg.enabled = true;
  cfg.pool_size = kPoolSizes[in.ConsumeIntegralInRange<size_t>(0, sizeof kPoolSizes / sizeof kPoolSizes[0] - 1)];
  cfg.max_cached = in.ConsumeIntegralInRange<int>(0, 8);
  cfg.align8 = in.ConsumeBool();
  const size_t align = cfg.align8 ? 8 : 16;
  // One domain per configuration, kept across inputs: a PoolMap leaf is a 32 MiB reservation that is
  // never returned (as in the library), so a fresh domain per input would exhaust the address space.
  // Every input ends with no pool left (checked), so a reused domain starts clean; the backend's
  // counters are compared as differences from their values at the start.
  static auto* domains = new std::map<std::tuple<size_t, int, bool>, TestDomain*>;  // never destroyed
  TestDomain*& slot = (*domains)[std::make_tuple(cfg.pool_size, cfg.max_cached, cfg.align8)];
  if (slot == nullptr) slot = new TestDomain(cfg);
  TestDomain* t = slot;
  Domain& domain = t->domain;
  const long base_pools = t->backend.live_pools();
  const long base_meta = t->backend.meta_allocs - t->backend.meta_frees;
  if (base_pools != 0 || base_meta != 0) {
    fprintf(stderr, "pool_model_fuzzer: a reused domain starts with %ld pools, %ld headers\n", base_pools, base_meta);
    abort();
  }

  std::vector<std::unique_ptr<ThreadCache>> active;
  active.push_back(std::make_unique<ThreadCache>(&domain));
  active.push_back(std::make_unique<ThreadCache>(&domain));
  std::vector<std::unique_ptr<ThreadCache>> dead;

  std::map<char*, Block> live;      // start -> block
  std::vector<char*> freed;         // addresses freed (stale pointers), most recent last
  std::vector<char*> remote_freed;  // of those, freed by a non-owner while the pool was owned
  // POOL_FUZZ_SKIP_KNOWN=1: make no double free of a block whose first free was a remote free to a
  // pool still owned (the case of the corpus entry regress-double-free-after-remote-free), so that a
  // long run spends its time on other shapes.
  static const bool skip_known = getenv("POOL_FUZZ_SKIP_KNOWN") != nullptr;
  uint64_t carves = 0, frees = 0, bad_frees = 0;

  auto sum_stats = [&]() {
    PoolStats s = {};
    for (auto& c : active) poolscope::pool::AddStats(&s, c->stats());
    for (auto& c : dead) poolscope::pool::AddStats(&s, c->stats());
    return s;
  };
  auto overlaps_live = [&](char* p, size_t n) -> bool {
    auto it = live.upper_bound(p);
    if (it != live.end() && it->first < p + n) return true;
    if (it != live.begin()) {
      --it;
      if (it->first + it->second.n > p) return true;
    }
    return false;
  };
  auto inside_live = [&](char* p) -> bool { return overlaps_live(p, 1); };
  auto pick_live = [&](size_t k) {
    auto it = live.begin();
    std::advance(it, static_cast<long>(k % live.size()));
    return it;
  };
  auto check_all = [&]() {
    for (auto& [p, b] : live) {
      for (size_t i = 0; i < b.n; ++i) {
        CHECK(static_cast<uint8_t>(p[i]) == b.fill,
              "live block %p (n=%zu) byte %zu is 0x%02x, written 0x%02x: zeroed or re-carved while live",
              static_cast<void*>(p), b.n, i, static_cast<uint8_t>(p[i]), b.fill);
      }
    }
    PoolStats s = sum_stats();
    CHECK(s.hits == carves, "hits %llu, carves %llu", (unsigned long long)s.hits, (unsigned long long)carves);
    CHECK(s.pooled_frees == frees, "pooled_frees %llu, frees %llu", (unsigned long long)s.pooled_frees,
          (unsigned long long)frees);
    CHECK(s.hits - s.pooled_frees == live.size(), "hits - pooled_frees = %llu, live blocks %zu",
          (unsigned long long)(s.hits - s.pooled_frees), live.size());
    CHECK(s.double_frees + s.invalid_frees == bad_frees, "double %llu + invalid %llu, bad frees made %llu",
          (unsigned long long)s.double_frees, (unsigned long long)s.invalid_frees,
          (unsigned long long)bad_frees);
    long pools = static_cast<long>(s.pools_created) - static_cast<long>(s.pools_released);
    CHECK(t->backend.live_pools() == pools, "backend live pools %ld, pools_created - pools_released %ld",
          t->backend.live_pools(), pools);
  };
  auto do_free = [&](ThreadCache* tc, char* p) {
    PoolHeader* h = domain.Find(p);
    CHECK(h != nullptr, "Find(%p) of a live block is null", static_cast<void*>(p));
    bool remote = h->owner != nullptr && h->owner != tc;
    Domain::FreeResult r = tc->Free(h, p);
    if (remote) remote_freed.push_back(p);
    if (trace) fprintf(stderr, "  free(%p) by %s -> %s\n", static_cast<void*>(p), h->owner == tc ? "owner" : "other", ResultName(r));
    CHECK(r == Domain::FreeResult::kFreed, "free of live block %p answered %s", static_cast<void*>(p),
          ResultName(r));
    live.erase(p);
    freed.push_back(p);
    if (freed.size() > 64) freed.erase(freed.begin());
    ++frees;
  };
  auto bad_free = [&](ThreadCache* tc, char* p, const char* what) {
    PoolHeader* h = domain.Find(p);
    if (h == nullptr) return;  // not in any pool any more: the interposer passes it on; not ours
    Domain::FreeResult r = tc->Free(h, p);
    if (trace) fprintf(stderr, "  %s(%p) by %s -> %s\n", what, static_cast<void*>(p), h->owner == tc ? "owner" : "other", ResultName(r));
    CHECK(r != Domain::FreeResult::kFreed, "%s of %p answered kFreed", what, static_cast<void*>(p));
    ++bad_frees;
  };

  while (in.remaining_bytes() > 0) {
    ++step;
    int op = in.ConsumeIntegralInRange<int>(0, 15);
    size_t who = in.ConsumeIntegralInRange<size_t>(0, 1);
    ThreadCache* tc = active[who].get();
    if (trace) fprintf(stderr, "step %d: op %d on cache %zu (live %zu)\n", step, op, who, live.size());
    switch (op) {
      case 0: case 1: case 2: case 3: case 4: {  // carve
        if (live.size() >= kMaxLive) break;
        size_t n = in.ConsumeBool() ? in.ConsumeIntegralInRange<size_t>(1, cfg.pool_size < 32 ? cfg.pool_size : 32)
                                    : in.ConsumeIntegralInRange<size_t>(1, cfg.pool_size);
        char* p = static_cast<char*>(tc->Carve(n));
        // A request whose size rounded to the block granule (16, or 8 with malloc_align=8) exceeds
        // pool_size (a pool_size that is not a multiple of 16) never fits, even in a fresh pool:
        // Carve answers nullptr. The interposer never asks for one (such a request is `too_large`).
        const size_t step_mask = cfg.align8 ? 7 : 15;
        size_t rounded = (n + step_mask) & ~step_mask;
        if (rounded > cfg.pool_size) {
          CHECK(p == nullptr, "Carve(%zu) above the pool's room returned a block", n);
          break;
        }
        CHECK(p != nullptr, "Carve(%zu) failed with memory available", n);
        ++carves;
        PoolHeader* h = domain.Find(p);
        CHECK(h != nullptr && p >= domain.BaseOf(h) && p + n <= domain.BaseOf(h) + cfg.pool_size,
              "carved block %p (n=%zu) is not inside one pool", static_cast<void*>(p), n);
        size_t want = align;
        if (cfg.align8 && n < 16) want = 8;
        CHECK(reinterpret_cast<uintptr_t>(p) % want == 0, "block %p (n=%zu) not %zu-aligned",
              static_cast<void*>(p), n, want);
        CHECK(!overlaps_live(p, n), "carved block %p (n=%zu) overlaps a live block", static_cast<void*>(p), n);
        for (size_t i = 0; i < n; ++i) {
          CHECK(p[i] == 0, "carved block %p (n=%zu) byte %zu is 0x%02x, not zero", static_cast<void*>(p), n, i,
                static_cast<uint8_t>(p[i]));
        }
        size_t usable = domain.UsableSize(h, p);
        CHECK(usable >= n, "UsableSize %zu < %zu", usable, n);
        uint8_t fill = static_cast<uint8_t>(1 + (step % 255));
        memset(p, fill, n);
        live[p] = Block{n, fill};
        if (trace) fprintf(stderr, "  carve(%zu) -> %p\n", n, static_cast<void*>(p));
        break;
      }
      case 5: case 6: case 7: {  // free the k-th live block, through either cache
        if (live.empty()) break;
        auto it = pick_live(in.ConsumeIntegral<uint16_t>());
        do_free(tc, it->first);
        break;
      }
      case 8: {  // double free of a stale pointer (not the start of, nor inside, a live block)
        if (freed.empty()) break;
        char* p = freed[in.ConsumeIntegralInRange<size_t>(0, freed.size() - 1)];
        if (inside_live(p)) break;
        if (skip_known && std::find(remote_freed.begin(), remote_freed.end(), p) != remote_freed.end()) break;
        bad_free(tc, p, "double free");
        break;
      }
      case 9: {  // interior free of a live block
        if (live.empty()) break;
        auto it = pick_live(in.ConsumeIntegral<uint16_t>());
        if (it->second.n < 2) break;
        size_t off = in.ConsumeBool() ? ((in.ConsumeIntegralInRange<size_t>(1, it->second.n - 1) + 7) & ~size_t{7})
                                      : in.ConsumeIntegralInRange<size_t>(1, it->second.n - 1);
        if (off == 0 || off >= it->second.n) break;
        bad_free(tc, it->first + off, "interior free");
        break;
      }
      case 10: {  // a pointer into a pool past every block (never carved since the last reset)
        if (live.empty()) break;
        auto it = std::prev(live.end());
        char* p = it->first + it->second.n;
        PoolHeader* h = domain.Find(it->first);
        if (p >= domain.BaseOf(h) + cfg.pool_size || inside_live(p)) break;
        if (skip_known && std::find(remote_freed.begin(), remote_freed.end(), p) != remote_freed.end()) break;
        bad_free(tc, p, "free past the carved blocks");
        break;
      }
      case 11: {  // usable size of a live block
        if (live.empty()) break;
        auto it = pick_live(in.ConsumeIntegral<uint16_t>());
        PoolHeader* h = domain.Find(it->first);
        size_t usable = domain.UsableSize(h, it->first);
        CHECK(usable >= it->second.n, "UsableSize %zu < %zu", usable, it->second.n);
        break;
      }
      case 12: {  // drain (drain_at_exit)
        tc->Drain();
        break;
      }
      case 13: case 14: {  // the thread ends; a new one takes its slot
        tc->Shutdown();
        CHECK(tc->cached() == 0, "cached pools after Shutdown: %d", tc->cached());
        dead.push_back(std::move(active[who]));
        active[who] = std::make_unique<ThreadCache>(&domain);
        break;
      }
      case 15: {  // carve on the other cache right after a shutdown-sized gap: plain carve of 8
        if (live.size() >= kMaxLive || cfg.pool_size < (cfg.align8 ? 8u : 16u)) break;  // see case 0
        char* p = static_cast<char*>(active[1 - who]->Carve(8));
        CHECK(p != nullptr, "Carve(8) failed");
        ++carves;
        CHECK(!overlaps_live(p, 8), "carved block %p overlaps a live block", static_cast<void*>(p));
        for (size_t i = 0; i < 8; ++i) CHECK(p[i] == 0, "carved block byte %zu not zero", i);
        memset(p, 0x5a, 8);
        live[p] = Block{8, 0x5a};
        break;
      }
    }
    check_all();
  }
  // The end: every block freed, every thread gone: nothing left.
  ++step;
  while (!live.empty()) do_free(active[live.size() % 2].get(), live.begin()->first);
  check_all();
  for (auto& c : active) c->Shutdown();
  check_all();
  CHECK(t->backend.live_pools() == 0, "%ld pools left after every block was freed and every cache shut down",
        t->backend.live_pools());
  CHECK(t->backend.meta_allocs == t->backend.meta_frees, "pool headers left: meta allocs %ld, frees %ld",
        t->backend.meta_allocs.load(), t->backend.meta_frees.load());
  return 0;
}
