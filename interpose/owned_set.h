// File: interpose/owned_set.h
//
// The set of blocks poolscope handed out on its regular path since `poolscope attach` (attach.cc):
// a free or realloc of a block not in it (nor pooled) goes to the allocator that made it. Open
// addressing with linear probing, in shards with a lock each; 0 is an empty slot, 1 a removed one.
// Its memory is poolscope's own (InternalAlloc), so it never calls the allocator it sits in.
//
// Thread-safety: every member may be called from any thread; each shard's lock is held only inside
// one call.
#ifndef POOLSCOPE_INTERPOSE_OWNED_SET_H_
#define POOLSCOPE_INTERPOSE_OWNED_SET_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "interpose/internal.h"

namespace poolscope {

class OwnedSet {
 public:
  void Insert(uintptr_t p) {
    Shard& s = ShardOf(p);
    SpinLockHolder lock(&s.lock);
    if ((s.used + s.removed + 1) * 2 > s.cap && !Grow(s)) {
      lost_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    size_t mask = s.cap - 1;
    size_t at = Hash(p) & mask;
    size_t reuse = ~size_t{0};
    for (;; at = (at + 1) & mask) {
      uintptr_t v = s.slots[at];
      if (v == p) return;
      if (v == 1 && reuse == ~size_t{0}) reuse = at;
      if (v == 0) break;
    }
    if (reuse != ~size_t{0}) {
      at = reuse;
      --s.removed;
    }
    s.slots[at] = p;
    ++s.used;
  }

  bool Remove(uintptr_t p) {
    Shard& s = ShardOf(p);
    SpinLockHolder lock(&s.lock);
    size_t at = Find(s, p);
    if (at == ~size_t{0}) return false;
    s.slots[at] = 1;
    --s.used;
    ++s.removed;
    return true;
  }

  bool Contains(uintptr_t p) {
    Shard& s = ShardOf(p);
    SpinLockHolder lock(&s.lock);
    return Find(s, p) != ~size_t{0};
  }

  // Blocks the set could not hold (no memory): their frees are counted as foreign.
  uint64_t lost() const { return lost_.load(std::memory_order_relaxed); }

 private:
  static constexpr int kShardBits = 6;
  struct Shard {
    SpinLock lock;
    uintptr_t* slots = nullptr;
    size_t cap = 0;
    size_t used = 0;
    size_t removed = 0;
    char pad[24];
  };

  static uint64_t Hash(uintptr_t p) { return (static_cast<uint64_t>(p) >> 4) * 0x9E3779B97F4A7C15ull; }
  Shard& ShardOf(uintptr_t p) { return shards_[Hash(p) >> (64 - kShardBits)]; }

  static size_t Find(Shard& s, uintptr_t p) {
    if (s.cap == 0) return ~size_t{0};
    size_t mask = s.cap - 1;
    for (size_t at = Hash(p) & mask;; at = (at + 1) & mask) {
      uintptr_t v = s.slots[at];
      if (v == p) return at;
      if (v == 0) return ~size_t{0};
    }
  }

  static bool Grow(Shard& s) {
    size_t cap = s.cap == 0 ? 512 : (s.used * 4 > s.cap ? s.cap * 2 : s.cap);
    auto* slots = static_cast<uintptr_t*>(InternalAlloc(cap * sizeof(uintptr_t)));
    if (slots == nullptr) return false;
    size_t mask = cap - 1;
    for (size_t i = 0; i < s.cap; ++i) {
      uintptr_t v = s.slots[i];
      if (v <= 1) continue;
      size_t at = Hash(v) & mask;
      while (slots[at] != 0) at = (at + 1) & mask;
      slots[at] = v;
    }
    if (s.slots != nullptr) InternalFree(s.slots, s.cap * sizeof(uintptr_t));
    s.slots = slots;
    s.cap = cap;
    s.removed = 0;
    return true;
  }

  Shard shards_[1 << kShardBits];
  std::atomic<uint64_t> lost_{0};
};

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_OWNED_SET_H_
