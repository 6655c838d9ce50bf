// File: interpose/c_api.cc
//
// The slow paths of the poolscope.h C API: explicit arenas (their inline paths are in shim.h), tags,
// and poolscope_active.
#include "interpose/shim.h"

#include <cerrno>
#include <cstring>

#include "interpose/internal.h"
#include "interpose/real.h"
#include "interpose/shim_internal.h"
#include "interpose/tracking.h"

namespace poolscope {

__attribute__((noinline)) void* ArenaOpenSlow(void* ra) {
  ThreadState& ts = t_state;
  if (Enter(ts) != Mode::kCounted) return nullptr;
  pool::Arena* a = ts.tc.NewArena();
  if (a == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  // The program's inline carve (poolscope.h) counts where ArenaAlloc does, and only when it may.
  a->counts = ts.carves != nullptr ? ts.carves->n[kFastArenaAlloc] : nullptr;
  a->limit = a->counts != nullptr ? ts.arena_limit : 0;
  if (POOLSCOPE_UNLIKELY(g_tracking)) {
    // The open's stack, from the program's frame when the exported function jumped here.
    track::StartFrame frame;
    const track::StartFrame* from = POOLSCOPE_PROGRAM_FRAME(frame, ra);
    a->track = OnArenaOpen(0, from, reinterpret_cast<uintptr_t>(ra));
  }
  return a;
}

__attribute__((noinline)) void* ArenaAllocSlow(void* arena, size_t size, size_t align, void* ra) {
  ThreadState& ts = t_state;
  auto* a = static_cast<pool::Arena*>(arena);
  // A tracked arena's block that fits its pool: the carve and the count of ArenaAlloc's inline path
  // (arena_limit is 0 while tracking), and the block's return address to the arena's record.
  if (a != nullptr && a->track != nullptr && size - 1 < kFastSizes && ts.phase == kActive && ts.guard == 0 &&
      ts.carves != nullptr) {
    if (void* p = ts.tc.ArenaTryCarveUncounted(a, size, align)) {
      ++ts.carves->n[kFastArenaAlloc][size];
      OnArenaAlloc(static_cast<ArenaTrack*>(a->track), size, kBlockPooled, reinterpret_cast<uintptr_t>(ra));
      TrackedBytesOf(ts)->arena_pooled_bytes += size;
      return p;
    }
  }
  if (a == nullptr || Enter(ts) != Mode::kCounted) {
    errno = EINVAL;
    return nullptr;
  }
  if (align == 0) align = 16;
  if ((align & (align - 1)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  Scope scope(ts);
  ++ts.c.logical.ncalls[kArenaAlloc];
  ++ts.c.sizes[SizeBucket(size)];
  int reason = pool::kMissDisabled;
  void* p = g_pooling ? ts.tc.ArenaCarve(a, size, align, &reason) : nullptr;
  if (p != nullptr) {
    ++ts.c.logical.nallocs;
    ts.c.logical.nbytes += size;
    if (a->track != nullptr) {
      OnArenaAlloc(static_cast<ArenaTrack*>(a->track), size, kBlockPooled, reinterpret_cast<uintptr_t>(ra));
      TrackedBytesOf(ts)->arena_pooled_bytes += size;
    }
    return p;
  }
  ++ts.tc.stats().misses[reason];
  // The regular path: a real, zeroed block, freed when the arena closes.
  auto* node = static_cast<pool::RegularBlock*>(InternalAlloc(sizeof(pool::RegularBlock)));
  if (node == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  if (align <= 16) {
    p = g_real.calloc(1, size == 0 ? 1 : size);
    CountAlloc(ts.c.real, kCalloc, size, p != nullptr);
  } else {
    int rc = g_real.posix_memalign(&p, align, size == 0 ? 1 : size);
    if (rc != 0) p = nullptr;
    if (p != nullptr) memset(p, 0, size);
    CountAlloc(ts.c.real, kPosixMemalign, size, p != nullptr);
  }
  if (p == nullptr) {
    InternalFree(node, sizeof *node);
    errno = ENOMEM;
    return nullptr;
  }
  node->p = p;
  node->next = a->regular;
  a->regular = node;
  ++a->regular_blocks;
  ++ts.c.logical.nallocs;
  ts.c.logical.nbytes += size;
  if (a->track != nullptr) {
    OnArenaAlloc(static_cast<ArenaTrack*>(a->track), size, kBlockReal, reinterpret_cast<uintptr_t>(ra));
    TrackedBytesOf(ts)->unpooled_bytes += size;
  }
  return p;
}

__attribute__((noinline)) void ArenaCloseSlow(void* arena) {
  ThreadState& ts = t_state;
  auto* a = static_cast<pool::Arena*>(arena);
  if (Enter(ts) != Mode::kCounted) return;
  Scope scope(ts);
  ++ts.c.logical.ncalls[kArenaClose];
  if (a == nullptr) return;
  if (a->track != nullptr) {
    uint64_t pooled = 0, unpooled = 0;
    OnArenaClose(static_cast<ArenaTrack*>(a->track), &pooled, &unpooled);
    TrackedBytesOf bytes(ts);
    bytes->arena_pooled_freed_bytes += pooled;
    bytes->unpooled_freed_bytes += unpooled;
  }
  a->track = nullptr;
  if (a->regular == nullptr && ts.phase == kActive) {  // ArenaClose's inline path, for a tracked arena
    const uint64_t blocks = a->pooled_blocks;
    if (ts.tc.TryCloseArena(a)) {
      ts.c.logical.nfrees += blocks;
      return;
    }
  }
  ts.c.logical.nfrees += a->pooled_blocks + a->regular_blocks;
  for (pool::RegularBlock* b = a->regular; b != nullptr;) {
    pool::RegularBlock* next = b->next;
    CountFree(ts.c.real, kFree, true);
    g_real.free(b->p);
    InternalFree(b, sizeof *b);
    b = next;
  }
  ts.tc.ArenaClosePool(a);
  ts.tc.DeleteArena(a);
}

void TagPush() {
  ThreadState& ts = t_state;
  if (Enter(ts) != Mode::kCounted) return;
  ++ts.tag_depth;
  SetLimits(ts);
}

void TagPop() {
  ThreadState& ts = t_state;
  if (Enter(ts) != Mode::kCounted) return;
  if (ts.tag_depth > 0) --ts.tag_depth;
  SetLimits(ts);
}

int Active() {
  ThreadState& ts = t_state;
  Enter(ts);
  return g_pooling ? 1 : 0;
}


}  // namespace poolscope
