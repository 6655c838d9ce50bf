// File: interpose/tracking_report.cc
//
// What a report reads of tracking (see tracking.h, "Report time"): the live blocks grouped by stack and
// kind, the sites that allocate most, a stack's frames, and the walks over the live blocks that
// leak_exitcode and the reachability scan make.
#include <algorithm>
#include <atomic>
#include <unordered_map>
#include <vector>

#include "interpose/tracking.h"
#include "interpose/tracking_internal.h"
#include "track/key_index.h"
#include "track/live_table.h"
#include "track/radix_sort.h"
#include "track/recent_blocks.h"
#include "track/stack_depot.h"

namespace poolscope {

using tracking_internal::ArenaBlockStack;
using tracking_internal::ArenaCopy;
using tracking_internal::ArenaGroup;
using tracking_internal::FlushSite;
using tracking_internal::ForEachArenaRecord;
using tracking_internal::g_depot;
using tracking_internal::g_on;
using tracking_internal::g_pooled_blocks;
using tracking_internal::g_recent;
using tracking_internal::g_sites;
using tracking_internal::g_table;
using tracking_internal::kCapacity;
using tracking_internal::Site;
using tracking_internal::t_track;

static_assert(kCapacity == kMaxStackIds, "tracking.h names the depot's capacity");

namespace tracking_internal {
PooledBlockWalk g_pooled_blocks = nullptr;
}  // namespace tracking_internal

namespace {
void ForEachPooledBlock(void (*fn)(uintptr_t ptr, uint32_t size, uint32_t stack_id, void* arg), void* arg,
                        void (*on_pool)(void* arg) = nullptr) {
  if (g_pooled_blocks != nullptr) g_pooled_blocks(fn, arg, on_pool);
}
}  // namespace

size_t AggregateLeaks(std::vector<LeakGroup>* groups, size_t max, LiveTotals* totals, uint8_t (*kind_of)(uintptr_t ptr),
                      std::vector<uint64_t>* pools_pinned) {
  *totals = LiveTotals{};
  groups->clear();
  if (!g_on) return 0;
  // A group per (kind, stack id), in the order they are met; found through `group_of`.
  std::vector<LeakGroup> all;
  track::KeyIndex group_of;
  auto add = [&](uint32_t stack_id, uint8_t flags, uint64_t blocks, uint64_t bytes, uintptr_t ptr) {
    const uint8_t kind = kind_of != nullptr && ptr != 0 ? kind_of(ptr) : 0;
    const uint64_t key = uint64_t{kind} << 32 | stack_id;
    uint32_t at = group_of.Get(key);
    if (at == track::KeyIndex::kNone) {
      at = static_cast<uint32_t>(all.size());
      group_of.Put(key, at);
      all.push_back(LeakGroup{});
      all.back().stack_id = stack_id;
      all.back().kind = kind;
    }
    LeakGroup& g = all[at];
    g.blocks += blocks;
    g.bytes += bytes;
    totals->blocks += blocks;
    totals->bytes += bytes;
    if (flags & kBlockPooled) {
      g.pooled_blocks += blocks;
      totals->pooled_blocks += blocks;
      totals->pooled_bytes += bytes;
    } else {
      totals->real_blocks += blocks;
      totals->real_bytes += bytes;
    }
  };
  if (kind_of == nullptr) {
    g_table->ForEach([&](const track::LiveEntry& e) { add(e.stack_id, e.flags, 1, e.size, e.ptr); });
    g_recent->ForEach([&](const track::LiveEntry& e) { add(e.stack_id, e.flags, 1, e.size, e.ptr); });
  } else {
    // In address order: kind_of answers near its last answer then, where the table's own order (its
    // hash's) made each answer a search over all the scan's blocks (2.5M of them: 40% of a run).
    std::vector<track::LiveEntry> live;
    live.reserve(static_cast<size_t>(g_table->size()) + 64);
    g_table->ForEach([&](const track::LiveEntry& e) { live.push_back(e); });
    g_recent->ForEach([&](const track::LiveEntry& e) { live.push_back(e); });
    {
      std::vector<track::LiveEntry> scratch(live.size());
      track::RadixSortBy(live.data(), scratch.data(), live.size(),
                         [](const track::LiveEntry& e) { return uint64_t{e.ptr}; });
    }
    for (const track::LiveEntry& e : live) add(e.stack_id, e.flags, 1, e.size, e.ptr);
  }
  // The pooled blocks, pool by pool: a stack's pools pinned count once per pool, its first block there
  // (the pool it was last counted for is remembered: no set per pool).
  using Add = decltype(add);
  struct PooledWalk {
    Add* add_block;
    std::vector<uint64_t>* pins;
    std::vector<uint64_t> last_pool;  // per stack id: 1 + the index of the last pool counted for it
    uint64_t pool = 0;
  } walk{&add, pools_pinned, {}, 0};
  if (pools_pinned != nullptr) {
    // Sized once for every stack recorded so far (a stack recorded meanwhile, by another thread,
    // grows them).
    const size_t stacks = std::min<size_t>(g_depot->size() + track::kFirstStackId, kCapacity);
    pools_pinned->assign(stacks, 0);
    walk.last_pool.assign(stacks, 0);
  }
  ForEachPooledBlock(
      [](uintptr_t ptr, uint32_t size, uint32_t stack_id, void* arg) {
        PooledWalk& w = *static_cast<PooledWalk*>(arg);
        (*w.add_block)(stack_id, kBlockPooled, 1, size, ptr);
        if (w.pins == nullptr) return;
        if (stack_id >= w.pins->size()) {
          w.pins->resize(stack_id + 1 + stack_id / 2, 0);
          w.last_pool.resize(w.pins->size(), 0);
        }
        if (w.last_pool[stack_id] == w.pool) return;
        w.last_pool[stack_id] = w.pool;
        ++(*w.pins)[stack_id];
      },
      &walk, pools_pinned != nullptr ? +[](void* arg) { ++static_cast<PooledWalk*>(arg)->pool; } : nullptr);
  totals->pools = walk.pool;
  ForEachArenaRecord([&](const ArenaCopy& c) {
    for (const ArenaGroup& g : c.groups) {
      if (c.open && g.blocks != 0) add(ArenaBlockStack(c.open_stack, g.ra), g.flags, g.blocks, g.bytes, 0);
      if (c.open && (g.flags & kBlockPooled)) totals->arena_pooled_bytes += g.bytes;
    }
  });
  // Largest first; equals by stack id (the stack recorded first), then kind: the same order whatever
  // order the blocks were met in.
  std::sort(all.begin(), all.end(), [](const LeakGroup& a, const LeakGroup& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.blocks != b.blocks) return a.blocks > b.blocks;
    return a.stack_id != b.stack_id ? a.stack_id < b.stack_id : a.kind < b.kind;
  });
  const size_t n = all.size();
  if (n > max) all.resize(max);
  groups->swap(all);
  return n;
}

SiteCounters SiteOf(uint32_t stack_id) {
  if (!g_on || stack_id >= std::min<uint32_t>(g_depot->size() + track::kFirstStackId, kCapacity)) {
    return SiteCounters{stack_id, 0, 0, 0, 0};
  }
  const Site& s = g_sites[stack_id];
  return SiteCounters{stack_id, s.allocs.load(std::memory_order_relaxed), s.hits.load(std::memory_order_relaxed),
                      s.real_allocs.load(std::memory_order_relaxed), s.bytes.load(std::memory_order_relaxed)};
}

size_t TopSites(SiteCounters* sites, size_t max) {
  // This thread's batch; other threads' batches (at most kSiteBatch - 1 allocations each) show in the
  // next report.
  if (!g_on) return 0;
  if (t_track.busy == 0) FlushSite(t_track);
  // The arenas' blocks not yet charged to their sites (the open arenas', and those their records hold
  // back), first: interning their stacks may grow the depot.
  std::unordered_map<uint32_t, SiteCounters> open;
  ForEachArenaRecord([&](const ArenaCopy& c) {
    for (const ArenaGroup& g : c.groups) {
      const uint64_t blocks = (c.open ? g.blocks : 0) + g.site_blocks;
      if (blocks == 0) continue;
      const uint32_t id = ArenaBlockStack(c.open_stack, g.ra);
      SiteCounters& s = open[id];
      s.stack_id = id;
      s.allocs += blocks;
      s.bytes += (c.open ? g.bytes : 0) + g.site_bytes;
      ((g.flags & kBlockPooled) ? s.hits : s.real_allocs) += blocks;
    }
  });
  // The `max` sites with most allocations, kept as a heap whose root is the least of them: no copy of
  // every site (a compiler has thousands: a vector of them all faulted in 60 pages at exit).
  // Ties: the lower stack id first.
  const auto before = [](const SiteCounters& a, const SiteCounters& b) {
    return a.allocs != b.allocs ? a.allocs > b.allocs : a.stack_id < b.stack_id;
  };
  size_t k = 0;
  uint32_t n = std::min<uint32_t>(g_depot->size() + track::kFirstStackId, kCapacity);
  for (uint32_t id = 0; id < n && max > 0; ++id) {
    SiteCounters c = SiteOf(id);
    auto it = open.find(id);
    if (it != open.end()) {
      c.allocs += it->second.allocs;
      c.hits += it->second.hits;
      c.real_allocs += it->second.real_allocs;
      c.bytes += it->second.bytes;
    }
    if (c.allocs == 0) continue;
    if (k < max) {
      sites[k++] = c;
      std::push_heap(sites, sites + k, before);
    } else if (before(c, sites[0])) {
      std::pop_heap(sites, sites + k, before);
      sites[k - 1] = c;
      std::push_heap(sites, sites + k, before);
    }
  }
  std::sort_heap(sites, sites + k, before);
  return k;
}

int StackFrames(uint32_t stack_id, uintptr_t* pcs) {
  if (!g_on) return 0;
  return g_depot->Get(stack_id, pcs);
}

void ForEachLiveBlock(void (*fn)(uintptr_t ptr, void* arg), void* arg) {
  if (!g_on) return;
  g_table->ForEach([&](const track::LiveEntry& e) { fn(e.ptr, arg); });
  g_recent->ForEach([&](const track::LiveEntry& e) { fn(e.ptr, arg); });
  struct Call {
    void (*fn)(uintptr_t, void*);
    void* arg;
  } call{fn, arg};
  ForEachPooledBlock(
      [](uintptr_t ptr, uint32_t, uint32_t, void* c) { static_cast<Call*>(c)->fn(ptr, static_cast<Call*>(c)->arg); },
      &call);
}

void ForEachTrackedBlockInfo(void (*fn)(uintptr_t ptr, uint64_t size, bool pooled, void* arg), void* arg) {
  if (!g_on) return;
  g_table->ForEach([&](const track::LiveEntry& e) { fn(e.ptr, e.size, (e.flags & kBlockPooled) != 0, arg); });
  g_recent->ForEach([&](const track::LiveEntry& e) { fn(e.ptr, e.size, (e.flags & kBlockPooled) != 0, arg); });
}

}  // namespace poolscope
