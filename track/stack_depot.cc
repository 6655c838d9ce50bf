// File: track/stack_depot.cc
//
// Publication order, which makes the lock-free lookup safe: a new stack's record is written, then
// stored in the directory (release), then its id is CASed into the table slot (release). A reader that
// loads a non-zero slot (acquire) therefore finds the directory entry and the record complete.
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

uint32_t RoundUpPow2(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return static_cast<uint32_t>(p);
}

}  // namespace

StackDepot::StackDepot(DepotMemory* memory, uint32_t capacity) : memory_(memory) {
  if (capacity < 16) capacity = 16;
  if (capacity > (1u << 28)) capacity = 1u << 28;
  capacity_ = capacity;
  // Ids run from kFirstStackId to capacity + 1; the table keeps the load at or below 2/3.
  const uint32_t table_size = RoundUpPow2(uint64_t{capacity_} + capacity_ / 2 + kFirstStackId);
  const uint32_t leaves = (capacity_ + kFirstStackId + kLeafSize - 1) / kLeafSize;
  table_ = static_cast<std::atomic<uint32_t>*>(AllocCounted(sizeof(std::atomic<uint32_t>) * table_size));
  directory_ = static_cast<std::atomic<std::atomic<Record*>*>*>(
      AllocCounted(sizeof(std::atomic<std::atomic<Record*>*>) * leaves));
  if (table_ == nullptr || directory_ == nullptr) {
    table_ = nullptr;
    capacity_ = 0;  // every Insert overflows
    return;
  }
  mask_ = table_size - 1;
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

const StackDepot::Record* StackDepot::RecordOf(uint32_t id) const {
  if (id < kFirstStackId || id >= capacity_ + kFirstStackId) return nullptr;
  std::atomic<Record*>* leaf = directory_[id >> kLeafBits].load(std::memory_order_acquire);
  if (leaf == nullptr) return nullptr;
  return leaf[id & (kLeafSize - 1)].load(std::memory_order_acquire);
}

StackDepot::Record* StackDepot::NewRecord(uint32_t id, int depth) {
  const size_t bytes = (sizeof(Record) + sizeof(uintptr_t) * depth + 15) & ~size_t{15};
  SpinLockHolder h(&lock_);
  std::atomic<std::atomic<Record*>*>* slot = &directory_[id >> kLeafBits];
  if (slot->load(std::memory_order_relaxed) == nullptr) {
    auto* leaf = static_cast<std::atomic<Record*>*>(AllocCounted(sizeof(std::atomic<Record*>) * kLeafSize));
    if (leaf == nullptr) return nullptr;
    slot->store(leaf, std::memory_order_release);
  }
  if (chunk_left_ < bytes) {
    char* c = static_cast<char*>(AllocCounted(kChunkBytes));
    if (c == nullptr) return nullptr;
    chunk_ = c;
    chunk_left_ = kChunkBytes;
  }
  Record* r = reinterpret_cast<Record*>(chunk_);
  chunk_ += bytes;
  chunk_left_ -= bytes;
  return r;
}

uint32_t StackDepot::Hash(const uintptr_t* pcs, int depth) {
  return HashStack(pcs, depth > kMaxStackDepth ? kMaxStackDepth : depth);
}

uint32_t StackDepot::Insert(const uintptr_t* pcs, int depth, uint32_t hash) {
  if (depth <= 0) return kNoStackId;
  if (depth > kMaxStackDepth) depth = kMaxStackDepth;
  if (table_ == nullptr) {
    noverflows_.fetch_add(1, std::memory_order_relaxed);
    return kOverflowStackId;
  }
  const size_t pcs_bytes = sizeof(uintptr_t) * depth;
  Record* mine = nullptr;  // our record, once made
  uint32_t mine_id = 0;
  for (uint32_t i = hash & mask_;; i = (i + 1) & mask_) {
    uint32_t id = table_[i].load(std::memory_order_acquire);
    while (id == 0) {
      // Not in the table: make our record (once) and try to claim this empty slot.
      if (mine == nullptr) {
        mine_id = next_id_.fetch_add(1, std::memory_order_relaxed);
        if (mine_id >= capacity_ + kFirstStackId) {
          next_id_.store(capacity_ + kFirstStackId, std::memory_order_relaxed);  // no wrap-around
          noverflows_.fetch_add(1, std::memory_order_relaxed);
          return kOverflowStackId;
        }
        mine = NewRecord(mine_id, depth);
        if (mine == nullptr) {
          noverflows_.fetch_add(1, std::memory_order_relaxed);
          return kOverflowStackId;
        }
        mine->hash = hash;
        mine->depth = static_cast<uint32_t>(depth);
        memcpy(mine->pcs, pcs, pcs_bytes);
        std::atomic<Record*>* leaf = directory_[mine_id >> kLeafBits].load(std::memory_order_relaxed);
        leaf[mine_id & (kLeafSize - 1)].store(mine, std::memory_order_release);
      }
      if (table_[i].compare_exchange_strong(id, mine_id, std::memory_order_release,
                                            std::memory_order_acquire)) {
        return mine_id;
      }
      // Lost the slot: `id` is the winner's; compare below, then go on probing with our record.
    }
    const Record* r = RecordOf(id);
    if (r->hash == hash && r->depth == static_cast<uint32_t>(depth) && memcmp(r->pcs, pcs, pcs_bytes) == 0) {
      return id;
    }
  }
}

int StackDepot::Get(uint32_t id, const uintptr_t** pcs) const {
  const Record* r = table_ == nullptr ? nullptr : RecordOf(id);
  if (r == nullptr) {
    *pcs = nullptr;
    return 0;
  }
  *pcs = r->pcs;
  return static_cast<int>(r->depth);
}

}  // namespace track
}  // namespace poolscope
