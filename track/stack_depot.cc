// File: track/stack_depot.cc
//
// Publication order, which makes the lock-free lookup safe: a new stack's record is written, then
// stored in the directory (release), then its id is stored into the table slot (release); a doubled
// table is filled before it is published (release). A reader that loads a non-zero slot (acquire)
// therefore finds the directory entry and the record complete.
#include "track/stack_depot.h"

#include <cstring>

#include "track/mix.h"

namespace poolscope {
namespace track {

namespace {

// Three instructions a frame (rotate, xor, multiply) and one full mix at the end: inside malloc this
// runs for every tracked allocation, and a full mix per frame cost more than the table probe.
inline uint64_t Rotl(uint64_t v, int k) { return (v << k) | (v >> (64 - k)); }

// Four independent multiply chains over frames 0, 4, 8.. / 1, 5, 9.. / ..., combined at the end: a
// chain of one multiply per frame made the hash of a 16-frame stack 16 multiplies long, one after
// the other (a third of the depot's lookup of a known stack); this is four.
uint32_t HashStack(const uintptr_t* pcs, int depth) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ULL;
  uint64_t a = 0x243f6a8885a308d3ULL ^ static_cast<uint64_t>(depth);
  uint64_t b = 0x13198a2e03707344ULL, c = 0xa4093822299f31d0ULL, d = 0x082efa98ec4e6c89ULL;
  int i = 0;
  for (; i + 4 <= depth; i += 4) {
    a = Rotl((a ^ pcs[i]) * kMul, 29);
    b = Rotl((b ^ pcs[i + 1]) * kMul, 29);
    c = Rotl((c ^ pcs[i + 2]) * kMul, 29);
    d = Rotl((d ^ pcs[i + 3]) * kMul, 29);
  }
  if (i < depth) a = Rotl((a ^ pcs[i]) * kMul, 29);
  if (i + 1 < depth) b = Rotl((b ^ pcs[i + 1]) * kMul, 29);
  if (i + 2 < depth) c = Rotl((c ^ pcs[i + 2]) * kMul, 29);
  return static_cast<uint32_t>(Mix(a ^ Rotl(b, 16) ^ Rotl(c, 32) ^ Rotl(d, 48)));
}

}  // namespace

StackDepot::StackDepot(DepotMemory* memory, uint32_t capacity) : memory_(memory) {
  if (capacity < 16) capacity = 16;
  if (capacity > (1u << 28)) capacity = 1u << 28;
  capacity_ = capacity;
  // Ids run from kFirstStackId to capacity + 1.
  const uint32_t leaves = (capacity_ + kFirstStackId + kLeafSize - 1) / kLeafSize;
  Table* t = NewTable(kFirstTableSlots);
  directory_ = static_cast<std::atomic<Leaf*>*>(AllocCounted(sizeof(std::atomic<Leaf*>) * leaves));
  if (t == nullptr || directory_ == nullptr) {
    capacity_ = 0;  // every Insert overflows
    return;
  }
  table_.store(t, std::memory_order_release);
}

StackDepot::Table* StackDepot::NewTable(uint32_t slots) {
  auto* t = static_cast<Table*>(AllocCounted(sizeof(Table) + sizeof(std::atomic<uint32_t>) * (slots - 1)));
  if (t == nullptr) return nullptr;
  // Written before it is read: a page first read maps the zero page, and its first write then faults
  // again.
  memset(static_cast<void*>(t->slots), 0, sizeof(std::atomic<uint32_t>) * slots);
  t->mask = slots - 1;
  return t;
}

void* StackDepot::AllocCounted(size_t bytes) {
  void* p = memory_->Alloc(bytes);
  if (p != nullptr) memory_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return p;
}

uint32_t StackDepot::size() const {
  uint32_t next = next_id_.load(std::memory_order_relaxed);
  uint32_t last = capacity_ + kFirstStackId;
  return (next < last ? next : last) - kFirstStackId;
}

const StackDepot::Leaf* StackDepot::LeafOf(uint32_t id) const {
  if (id < kFirstStackId || id >= capacity_ + kFirstStackId) return nullptr;
  return directory_[id >> kLeafBits].load(std::memory_order_acquire);
}

const StackDepot::Record* StackDepot::RecordOf(uint32_t id) const {
  const Leaf* leaf = LeafOf(id);
  if (leaf == nullptr) return nullptr;
  return leaf->records[id & (kLeafSize - 1)].load(std::memory_order_acquire);
}

inline uint32_t StackDepot::HashOf(uint32_t id) const {
  return directory_[id >> kLeafBits].load(std::memory_order_acquire)->hashes[id & (kLeafSize - 1)];
}

StackDepot::Record* StackDepot::NewRecord(uint32_t id, int depth, bool wide) {
  const size_t bytes = wide ? sizeof(uintptr_t) * (depth + 1) : sizeof(uint32_t) * (depth + 1);
  std::atomic<Leaf*>* slot = &directory_[id >> kLeafBits];
  if (slot->load(std::memory_order_relaxed) == nullptr) {
    auto* leaf = static_cast<Leaf*>(AllocCounted(sizeof(Leaf)));
    if (leaf == nullptr) return nullptr;
    slot->store(leaf, std::memory_order_release);
  }
  // (A wide record's frames 8-byte aligned: the chunk's next 4 bytes skipped when they are not.)
  const size_t skip = wide ? reinterpret_cast<uintptr_t>(chunk_) & 4 : 0;
  if (chunk_left_ < skip + bytes) {
    char* c = static_cast<char*>(AllocCounted(kChunkBytes));
    if (c == nullptr) return nullptr;
    chunk_ = c;
    chunk_left_ = kChunkBytes;
  } else {
    chunk_ += skip;
    chunk_left_ -= skip;
  }
  Record* r = reinterpret_cast<Record*>(chunk_);
  chunk_ += bytes;
  chunk_left_ -= bytes;
  return r;
}

bool StackDepot::Encode(const uintptr_t* pcs, int depth, uint32_t* codes) {
  for (int i = 0; i < depth; ++i) {
    const uintptr_t base = pcs[i] >> kRegionBits;
    uint32_t k = 0;
    while (k < nregions_ && regions_[k] != base) ++k;
    if (k == nregions_) {
      if (nregions_ == kRegions) return false;
      regions_[nregions_++] = base;
    }
    codes[i] = (k << kRegionBits) | static_cast<uint32_t>(pcs[i] & kOffsetMask);
  }
  return true;
}

uint32_t StackDepot::Hash(const uintptr_t* pcs, int depth) {
  return HashStack(pcs, depth > kMaxStackDepth ? kMaxStackDepth : depth);
}

uint32_t StackDepot::Find(const Table* t, const uintptr_t* pcs, int depth, uint32_t hash, uint32_t* empty) const {
  for (uint32_t i = hash & t->mask;; i = (i + 1) & t->mask) {
    const uint32_t id = t->slots[i].load(std::memory_order_acquire);
    if (id == 0) {
      *empty = i;
      return 0;
    }
    if (HashOf(id) != hash) continue;
    if (Holds(RecordOf(id), pcs, depth)) return id;
  }
}

uint32_t StackDepot::Insert(const uintptr_t* pcs, int depth, uint32_t hash) {
  if (depth <= 0) return kNoStackId;
  if (depth > kMaxStackDepth) depth = kMaxStackDepth;
  const Table* t = table_.load(std::memory_order_acquire);
  uint32_t empty;
  if (t != nullptr) {
    if (const uint32_t id = Find(t, pcs, depth, hash, &empty)) return id;
  }
  if (capacity_ == 0) {
    noverflows_.fetch_add(1, std::memory_order_relaxed);
    return kOverflowStackId;
  }
  SpinLockHolder h(&lock_);
  return AddLocked(pcs, depth, hash);
}

uint32_t StackDepot::AddLocked(const uintptr_t* pcs, int depth, uint32_t hash) {
  Table* t = table_.load(std::memory_order_relaxed);
  uint32_t empty;
  // Added meanwhile by another thread, or in a table that replaced the one the lookup read.
  if (const uint32_t id = Find(t, pcs, depth, hash, &empty)) return id;
  const uint32_t id = next_id_.load(std::memory_order_relaxed);
  if (id >= capacity_ + kFirstStackId) {
    noverflows_.fetch_add(1, std::memory_order_relaxed);
    return kOverflowStackId;
  }
  uint32_t codes[kMaxStackDepth];
  const bool wide = !Encode(pcs, depth, codes);
  Record* r = NewRecord(id, depth, wide);
  if (r == nullptr) {
    noverflows_.fetch_add(1, std::memory_order_relaxed);
    return kOverflowStackId;
  }
  r->depth = static_cast<uint32_t>(depth) | (wide ? kWide : 0);
  if (wide) {
    memcpy(r->pcs(), pcs, sizeof(uintptr_t) * depth);
  } else {
    memcpy(r->codes, codes, sizeof(uint32_t) * depth);
  }
  Leaf* leaf = directory_[id >> kLeafBits].load(std::memory_order_relaxed);
  leaf->hashes[id & (kLeafSize - 1)] = hash;
  leaf->records[id & (kLeafSize - 1)].store(r, std::memory_order_release);
  if (uint64_t{table_ids_ + 1} * 3 > uint64_t{t->mask + 1} * 2) {
    // Two-thirds full: a table of twice the slots, every id placed again by its record's hash, then
    // published. A failed allocation keeps the full table (probes get longer; the capacity bounds them).
    if (Table* bigger = NewTable((t->mask + 1) * 2)) {
      for (uint32_t i = 0; i <= t->mask; ++i) {
        const uint32_t other = t->slots[i].load(std::memory_order_relaxed);
        if (other == 0) continue;
        uint32_t j = HashOf(other) & bigger->mask;
        while (bigger->slots[j].load(std::memory_order_relaxed) != 0) j = (j + 1) & bigger->mask;
        bigger->slots[j].store(other, std::memory_order_relaxed);
      }
      table_.store(bigger, std::memory_order_release);
      t = bigger;
      Find(t, pcs, depth, hash, &empty);
    }
  }
  next_id_.store(id + 1, std::memory_order_relaxed);
  t->slots[empty].store(id, std::memory_order_release);
  ++table_ids_;
  return id;
}

int StackDepot::Get(uint32_t id, uintptr_t* pcs) const {
  const Record* r = capacity_ == 0 ? nullptr : RecordOf(id);
  if (r == nullptr) return 0;
  const int depth = static_cast<int>(r->depth & ~kWide);
  if ((r->depth & kWide) != 0) {
    memcpy(pcs, r->pcs(), sizeof(uintptr_t) * depth);
  } else {
    for (int i = 0; i < depth; ++i) pcs[i] = Decode(r->codes[i]);
  }
  return depth;
}

}  // namespace track
}  // namespace poolscope
