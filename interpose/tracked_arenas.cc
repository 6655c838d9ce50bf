// File: interpose/tracked_arenas.cc
//
// Tracked explicit arenas (see tracking.h, "Explicit arenas"): a record per open arena that counts its
// blocks by allocating call, the stacks of those blocks, the records' charges to the per-site counters,
// and the counts leak_exitcode reads. The records' protocol is stated above ArenaTrack in
// tracking_internal.h.
#include <atomic>
#include <new>

#include "interpose/internal.h"
#include "interpose/tracking.h"
#include "interpose/tracking_internal.h"
#include "track/frame_rules.h"
#include "track/stack_capture.h"
#include "track/stack_depot.h"

namespace poolscope {

using tracking_internal::AddToSite;
using tracking_internal::AllocStackId;
using tracking_internal::ArenaBlockStack;
using tracking_internal::ArenaCopy;
using tracking_internal::ArenaGroup;
using tracking_internal::g_arena_records;
using tracking_internal::g_arenas_lock;
using tracking_internal::g_depot;
using tracking_internal::g_depth;
using tracking_internal::g_on;
using tracking_internal::kArenaGroups;
using tracking_internal::kArenaStackCacheBits;
using tracking_internal::ReadArena;
using tracking_internal::t_track;
using tracking_internal::TrackBlock;
using tracking_internal::TrackThread;

namespace tracking_internal {
SpinLock g_arenas_lock;
ArenaTrack* g_arena_records = nullptr;
}  // namespace tracking_internal

namespace {
ArenaTrack* g_free_records = nullptr;

inline void BeginWrite(ArenaTrack* t) {
  t->seq.store(t->seq.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
}
inline void EndWrite(ArenaTrack* t) {
  t->seq.store(t->seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

inline bool GroupInUse(const ArenaTrack& t, uint32_t i) { return i < t.ngroups || i >= kArenaGroups; }
}  // namespace

namespace tracking_internal {
// A consistent copy of `t`; false when none could be had (its thread stays inside a write: a signal
// handler that interrupted it is the reader).
bool ReadArena(const ArenaTrack& t, ArenaCopy* c) {
  for (int tries = 0; tries < (1 << 16); ++tries) {
    const uint32_t s1 = t.seq.load(std::memory_order_acquire);
    if (s1 & 1) {
      __builtin_ia32_pause();
      continue;
    }
    c->open = t.open;
    c->open_stack = t.open_stack;
    const uint32_t n = t.ngroups < kArenaGroups ? t.ngroups : kArenaGroups;
    for (uint32_t i = 0; i < kArenaGroups + 2; ++i) {
      c->groups[i] = i < n || i >= kArenaGroups ? t.groups[i] : ArenaGroup{};
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (t.seq.load(std::memory_order_relaxed) != s1) continue;
    c->blocks = 0;
    if (c->open) {
      for (const ArenaGroup& g : c->groups) c->blocks += g.blocks;
    }
    return true;
  }
  return false;
}

// The stack of a block allocated by the call returning to `ra` in an arena opened with `open_stack`.
uint32_t ArenaBlockStack(uint32_t open_stack, uintptr_t ra) {
  if (ra == 0 || g_depth <= 0) return open_stack;
  uintptr_t opcs[track::kMaxStackDepth];
  const int n = g_depot->Get(open_stack, opcs);
  uintptr_t pcs[track::kMaxStackDepth];
  int depth = 0;
  pcs[depth++] = ra;
  int from = 0;
  if (n > 0) {
    const void* f = track::FunctionOf(ra - 1);
    if (f != nullptr && f == track::FunctionOf(opcs[0] - 1)) from = 1;  // the open's frame is this one
  }
  for (int i = from; i < n && depth < g_depth; ++i) pcs[depth++] = opcs[i];
  return g_depot->Insert(pcs, depth);
}
}  // namespace tracking_internal

namespace {
// ArenaBlockStack through the thread's cache of the answers (TrackBlock), when it has one.
uint32_t CachedArenaStack(TrackThread& tt, uint32_t open_stack, uintptr_t ra) {
  if (ra == 0 || tt.block == nullptr) return ArenaBlockStack(open_stack, ra);
  const size_t i = ((ra ^ (uintptr_t{open_stack} * 0x9E3779B97F4A7C15ull)) * 0x9E3779B97F4A7C15ull) >>
                   (64 - kArenaStackCacheBits);
  TrackBlock::ArenaStack& e = tt.block->arena_stacks[i];
  if (e.ra != ra || e.open_stack != open_stack) {
    e.id = ArenaBlockStack(open_stack, ra);
    e.ra = ra;
    e.open_stack = open_stack;
  }
  return e.id;
}

// Adds the record's site_* counts to the shared site counters. Its thread, inside a write.
void ChargeArenaSites(TrackThread& tt, ArenaTrack* t) {
  for (uint32_t i = 0; i < kArenaGroups + 2; ++i) {
    ArenaGroup& g = t->groups[i];
    if (!GroupInUse(*t, i) || g.site_blocks == 0) continue;
    const uint64_t hits = (g.flags & kBlockPooled) ? g.site_blocks : 0;
    AddToSite(CachedArenaStack(tt, t->open_stack, g.ra), g.site_blocks, hits, g.site_blocks - hits, g.site_bytes);
    g.site_blocks = g.site_bytes = 0;
  }
}
}  // namespace

namespace tracking_internal {
// A thread that ends charges its kept records' sites and gives the records to the others.
void ReleaseKeptArenas(TrackThread& tt) {
  for (ArenaTrack* t = tt.kept_arenas; t != nullptr; t = t->next_free) {
    BeginWrite(t);
    ChargeArenaSites(tt, t);
    EndWrite(t);
  }
  SpinLockHolder h(&g_arenas_lock);
  while (ArenaTrack* t = tt.kept_arenas) {
    tt.kept_arenas = t->next_free;
    t->next_free = g_free_records;
    g_free_records = t;
  }
}
}  // namespace tracking_internal

namespace {
ArenaTrack* TakeArenaRecord(TrackThread& tt) {
  if (ArenaTrack* t = tt.kept_arenas) {
    tt.kept_arenas = t->next_free;
    return t;
  }
  {
    SpinLockHolder h(&g_arenas_lock);
    if (ArenaTrack* t = g_free_records) {
      g_free_records = t->next_free;
      return t;
    }
  }
  auto* t = static_cast<ArenaTrack*>(InternalAlloc(sizeof(ArenaTrack)));
  if (t == nullptr) return nullptr;
  new (t) ArenaTrack{};
  t->groups[kArenaGroups].flags = kBlockPooled;
  t->groups[kArenaGroups + 1].flags = kBlockReal;
  SpinLockHolder h(&g_arenas_lock);
  t->next_all = g_arena_records;
  g_arena_records = t;
  return t;
}
}  // namespace

namespace {
// The stack `id` from the frame that returns to `ra` when that is one of its first few (the client
// library's frames above it are left out), else `id`. The last answer is kept per thread.
uint32_t StackFromReturnAddress(TrackThread& tt, uint32_t id, uintptr_t ra) {
  if (ra == 0 || g_depth <= 0) return id;
  if (id == tt.last_open_raw && ra == tt.last_open_ra) return tt.last_open_id;
  uintptr_t pcs[track::kMaxStackDepth];
  const int n = g_depot->Get(id, pcs);
  uint32_t trimmed = id;
  for (int k = 1; k < n && k < 4; ++k) {
    if (pcs[0] == ra) break;
    if (pcs[k] == ra) {
      trimmed = g_depot->Insert(pcs + k, n - k);
      break;
    }
  }
  tt.last_open_raw = id;
  tt.last_open_ra = ra;
  tt.last_open_id = trimmed;
  return trimmed;
}
}  // namespace

ArenaTrack* OnArenaOpen(int skip, const track::StartFrame* from, uintptr_t ra) {
  TrackThread& tt = t_track;
  ArenaTrack* t = TakeArenaRecord(tt);
  if (t == nullptr) return nullptr;
  const uint32_t id = StackFromReturnAddress(tt, AllocStackId(tt, skip, from), ra);
  BeginWrite(t);
  if (id != t->open_stack) {
    ChargeArenaSites(tt, t);
    t->open_stack = id;
    t->ngroups = 0;
  }
  t->open = true;
  t->baseline_blocks.store(0, std::memory_order_relaxed);
  EndWrite(t);
  return t;
}

void OnArenaAlloc(ArenaTrack* t, size_t size, uint8_t flags, uintptr_t ra) {
  BeginWrite(t);
  ArenaGroup* g = nullptr;
  for (uint32_t i = 0; i < t->ngroups; ++i) {
    if (t->groups[i].ra == ra && t->groups[i].flags == flags) {
      g = &t->groups[i];
      break;
    }
  }
  if (g == nullptr) {
    // A group free, or one of the record's that holds only site counts of earlier arenas (charged
    // now), else the open's stack.
    uint32_t i = t->ngroups;
    if (i == kArenaGroups) {
      for (i = 0; i < kArenaGroups && t->groups[i].blocks != 0; ++i) {
      }
    }
    if (i < kArenaGroups && ra != 0) {
      g = &t->groups[i];
      if (i == t->ngroups) {
        ++t->ngroups;
      } else if (g->site_blocks != 0) {
        const uint64_t hits = (g->flags & kBlockPooled) ? g->site_blocks : 0;
        AddToSite(CachedArenaStack(t_track, t->open_stack, g->ra), g->site_blocks, hits, g->site_blocks - hits,
                  g->site_bytes);
      }
      *g = ArenaGroup{ra, flags, 0, 0, 0, 0};
    } else {
      g = &t->groups[kArenaGroups + ((flags & kBlockPooled) ? 0 : 1)];
    }
  }
  ++g->blocks;
  g->bytes += size;
  EndWrite(t);
}

void OnArenaClose(ArenaTrack* t, uint64_t* pooled_bytes, uint64_t* real_bytes) {
  TrackThread& tt = t_track;
  BeginWrite(t);
  const auto close_group = [pooled_bytes, real_bytes](ArenaGroup& g) {
    uint64_t* bytes = (g.flags & kBlockPooled) ? pooled_bytes : real_bytes;
    if (bytes != nullptr) *bytes += g.bytes;
    g.site_blocks += g.blocks;
    g.site_bytes += g.bytes;
    g.blocks = g.bytes = 0;
  };
  // The groups in use (GroupInUse); the others hold no block.
  const uint32_t n = t->ngroups < kArenaGroups ? t->ngroups : kArenaGroups;
  for (uint32_t i = 0; i < n; ++i) close_group(t->groups[i]);
  close_group(t->groups[kArenaGroups]);
  close_group(t->groups[kArenaGroups + 1]);
  t->open = false;
  EndWrite(t);
  if (!tt.ended) {
    t->next_free = tt.kept_arenas;
    tt.kept_arenas = t;
  } else {
    BeginWrite(t);
    ChargeArenaSites(tt, t);
    EndWrite(t);
    SpinLockHolder h(&g_arenas_lock);
    t->next_free = g_free_records;
    g_free_records = t;
  }
}

void MarkArenaBaseline() {
  if (!g_on) return;
  ArenaTrack* first;
  {
    SpinLockHolder h(&g_arenas_lock);
    first = g_arena_records;
  }
  ArenaCopy c;
  for (ArenaTrack* t = first; t != nullptr; t = t->next_all) {
    if (ReadArena(*t, &c) && c.open) t->baseline_blocks.store(c.blocks, std::memory_order_relaxed);
  }
}

void CountArenaBlocks(uint64_t* blocks, uint64_t* since_baseline) {
  *blocks = *since_baseline = 0;
  if (!g_on) return;
  ArenaTrack* first;
  {
    SpinLockHolder h(&g_arenas_lock);
    first = g_arena_records;
  }
  ArenaCopy c;
  for (ArenaTrack* t = first; t != nullptr; t = t->next_all) {
    if (!ReadArena(*t, &c) || !c.open) continue;
    const uint64_t base = t->baseline_blocks.load(std::memory_order_relaxed);
    *blocks += c.blocks;
    *since_baseline += c.blocks > base ? c.blocks - base : 0;
  }
}

}  // namespace poolscope
