// File: track/live_table.cc
//
// Entry layout (two 64-bit words; a zero first word marks an empty slot):
//   word 0: bit 63 set | size bits 24..42 at bits 44..62 | address / 8 at bits 0..43
//   word 1: ~(size bits 0..23 at bits 40..63 | flags at bits 32..39 | stack id at bits 0..31)
// Bit 63 makes word 0 non-canonical; the complement makes word 1 non-canonical for every size below
// 2^23. Neither reads as a pointer to a conservative scanner.
//
// Lock order: a stripe lock, then whatever DepotMemory takes inside Alloc/Free. Never two stripe
// locks, except ForkPrepare, which takes them all in index order.
#include "track/live_table.h"

#include <new>

#include "track/mix.h"

namespace poolscope {
namespace track {

namespace {

// A stripe's first array: 256 bytes (a process with few live blocks spreads them over all 256 stripes).
constexpr uint32_t kFirstCapacity = 16;
constexpr uint64_t kUnitBits = 44;
constexpr uint64_t kUnitMask = (uint64_t{1} << kUnitBits) - 1;
constexpr uint64_t kUsed = uint64_t{1} << 63;
constexpr uint64_t kSizeLoBits = 24;
constexpr uint64_t kSizeLoMask = (uint64_t{1} << kSizeLoBits) - 1;

// Where a key goes: bits 32..63 choose the stripe, bits 0..31 (masked) the home slot. Keys are placed
// by the 256-byte span of address space they fall in, not one by one: a span's 16 granules of 16
// bytes get 16 consecutive home slots (256 bytes of table, four lines) at a place hashed from the
// span's number, and the span's stripe is hashed from it too. Blocks next to each other in memory,
// which a program tends to allocate together and free together, thus share table lines and pages
// (BM_LiveShapes and BM_LiveInsertErase in track_benchmark.cc: 1.3x to 2.8x faster than placing every
// key at random). Spans are small enough that a full one (16 live blocks of 16 bytes) is a short run
// of linear probing, and hashed so that heaps at aligned distances (thread arenas 64 MiB apart) do
// not pile onto the same slots.
inline uint64_t HashUnit(uint64_t unit) {
  const uint64_t h = Mix(unit >> 5);                            // the 256-byte span
  const uint32_t granule = static_cast<uint32_t>(unit >> 1) & 15;  // its 16-byte granule
  return (h & 0xFFFFFFFF00000000ULL) | ((static_cast<uint32_t>(h) << 4) | granule);
}

}  // namespace

struct LiveTable::Slot {
  uint64_t unit_size;
  uint64_t packed;

  uint64_t unit() const { return unit_size & kUnitMask; }
  void Set(uint64_t unit, uint64_t size, uint32_t stack_id, uint8_t flags) {
    unit_size = kUsed | ((size >> kSizeLoBits) << kUnitBits) | unit;
    packed = ~(((size & kSizeLoMask) << 40) | (static_cast<uint64_t>(flags) << 32) | stack_id);
  }
  void Get(LiveEntry* out) const {
    const uint64_t p = ~packed;
    out->ptr = static_cast<uintptr_t>(unit() << 3);
    out->size = (((unit_size & ~kUsed) >> kUnitBits) << kSizeLoBits) | (p >> 40);
    out->stack_id = static_cast<uint32_t>(p);
    out->flags = static_cast<uint8_t>(p >> 32);
  }
};

size_t LiveTable::EntryBytes() { return sizeof(Slot); }

struct alignas(64) LiveTable::Stripe {
  SpinLock lock;
  std::atomic<uint32_t> count{0};  // live entries; written under `lock`, read by size() without it
  uint32_t mask = 0;               // capacity - 1, or 0 before the first insert (slots == nullptr)
  Slot* slots = nullptr;
};

LiveTable::LiveTable(DepotMemory* memory, uint32_t stripes) : memory_(memory) {
  uint32_t n = 1;
  while (n < stripes && n < 65536) n <<= 1;
  void* mem = AllocCounted(sizeof(Stripe) * n);
  if (mem == nullptr) return;
  stripes_ = static_cast<Stripe*>(mem);
  for (uint32_t i = 0; i < n; ++i) new (&stripes_[i]) Stripe();
  nstripes_ = n;
}

void* LiveTable::AllocCounted(size_t bytes) {
  void* p = memory_->Alloc(bytes);
  if (p != nullptr) memory_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return p;
}

void LiveTable::FreeCounted(void* p, size_t bytes) {
  memory_->Free(p, bytes);
  memory_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
}

inline LiveTable::Stripe* LiveTable::StripeOf(uint64_t hash) const {
  return &stripes_[(hash >> 32) & (nstripes_ - 1)];
}

inline LiveTable::Slot* LiveTable::Probe(const Stripe& s, uint64_t hash, uint64_t unit) {
  for (uint32_t i = static_cast<uint32_t>(hash) & s.mask;; i = (i + 1) & s.mask) {
    Slot* e = &s.slots[i];
    if (e->unit_size == 0 || e->unit() == unit) return e;
  }
}

bool LiveTable::Grow(Stripe* s) {
  const uint32_t capacity = s->slots == nullptr ? kFirstCapacity : (s->mask + 1) * 2;
  auto* fresh = static_cast<Slot*>(AllocCounted(sizeof(Slot) * capacity));
  if (fresh == nullptr) return false;
  Slot* old = s->slots;
  const uint32_t old_capacity = old == nullptr ? 0 : s->mask + 1;
  s->slots = fresh;
  s->mask = capacity - 1;
  for (uint32_t i = 0; i < old_capacity; ++i) {
    if (old[i].unit_size == 0) continue;
    *Probe(*s, HashUnit(old[i].unit()), old[i].unit()) = old[i];
  }
  if (old != nullptr) FreeCounted(old, sizeof(Slot) * old_capacity);
  return true;
}

// Reads the stripe's array pointer and mask without its lock: a stale pair only prefetches a line for
// nothing (a prefetch never faults), but TSan would call the read a race.
__attribute__((no_sanitize("thread"))) void LiveTable::Prefetch(uintptr_t ptr) const {
  if (stripes_ == nullptr || (ptr & 7) != 0 || (ptr >> 3) > kUnitMask || ptr == 0) return;
  const uint64_t hash = HashUnit(ptr >> 3);
  const Stripe* s = StripeOf(hash);
  __builtin_prefetch(s, 1);
  const Slot* slots = s->slots;
  if (slots != nullptr) __builtin_prefetch(&slots[static_cast<uint32_t>(hash) & s->mask], 1);
}

InsertResult LiveTable::Insert(uintptr_t ptr, uint64_t size, uint32_t stack_id, uint8_t flags) {
  if (stripes_ == nullptr || (ptr & 7) != 0 || (ptr >> 3) > kUnitMask || ptr == 0) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return InsertResult::kNoMemory;
  }
  if (size > kMaxSize) size = kMaxSize;
  const uint64_t unit = ptr >> 3;
  const uint64_t hash = HashUnit(unit);
  Stripe* s = StripeOf(hash);
  SpinLockHolder h(&s->lock);
  if (s->slots != nullptr) {
    Slot* e = Probe(*s, hash, unit);
    if (e->unit_size != 0) {
      e->Set(unit, size, stack_id, flags);
      return InsertResult::kReplaced;
    }
  }
  const uint32_t live = s->count.load(std::memory_order_relaxed);
  if ((s->slots == nullptr || (live + 1) * 4 > (s->mask + 1) * 3) && !Grow(s)) {
    refused_.fetch_add(1, std::memory_order_relaxed);
    return InsertResult::kNoMemory;
  }
  Probe(*s, hash, unit)->Set(unit, size, stack_id, flags);
  s->count.store(live + 1, std::memory_order_relaxed);
  return InsertResult::kInserted;
}

bool LiveTable::Erase(uintptr_t ptr, LiveEntry* out) {
  if (stripes_ == nullptr || (ptr & 7) != 0 || (ptr >> 3) > kUnitMask || ptr == 0) return false;
  const uint64_t unit = ptr >> 3;
  const uint64_t hash = HashUnit(unit);
  Stripe* s = StripeOf(hash);
  SpinLockHolder h(&s->lock);
  if (s->slots == nullptr) return false;
  Slot* e = Probe(*s, hash, unit);
  if (e->unit_size == 0) return false;
  if (out != nullptr) e->Get(out);
  // Backward-shift deletion: pull later entries of the probe run into the hole when their home slot
  // does not lie (cyclically) between the hole and where they are.
  uint32_t hole = static_cast<uint32_t>(e - s->slots);
  for (uint32_t j = (hole + 1) & s->mask; s->slots[j].unit_size != 0; j = (j + 1) & s->mask) {
    const uint32_t home = static_cast<uint32_t>(HashUnit(s->slots[j].unit())) & s->mask;
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    s->slots[hole] = s->slots[j];
    hole = j;
  }
  s->slots[hole].unit_size = 0;
  s->slots[hole].packed = 0;
  s->count.store(s->count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  return true;
}

bool LiveTable::Find(uintptr_t ptr, LiveEntry* out) const {
  if (stripes_ == nullptr || (ptr & 7) != 0 || (ptr >> 3) > kUnitMask || ptr == 0) return false;
  const uint64_t unit = ptr >> 3;
  const uint64_t hash = HashUnit(unit);
  Stripe* s = StripeOf(hash);
  SpinLockHolder h(&s->lock);
  if (s->slots == nullptr) return false;
  const Slot* e = Probe(*s, hash, unit);
  if (e->unit_size == 0) return false;
  if (out != nullptr) e->Get(out);
  return true;
}

void LiveTable::ForEach(void (*fn)(const LiveEntry& entry, void* arg), void* arg) const {
  for (uint32_t i = 0; i < nstripes_; ++i) {
    Stripe* s = &stripes_[i];
    SpinLockHolder h(&s->lock);
    if (s->slots == nullptr) continue;
    for (uint32_t j = 0; j <= s->mask; ++j) {
      if (s->slots[j].unit_size == 0) continue;
      LiveEntry entry;
      s->slots[j].Get(&entry);
      fn(entry, arg);
    }
  }
}

uint64_t LiveTable::size() const {
  uint64_t n = 0;
  for (uint32_t i = 0; i < nstripes_; ++i) n += stripes_[i].count.load(std::memory_order_relaxed);
  return n;
}

void LiveTable::ForkPrepare() {
  for (uint32_t i = 0; i < nstripes_; ++i) stripes_[i].lock.Lock();
}

void LiveTable::ForkParent() {
  for (uint32_t i = nstripes_; i-- > 0;) stripes_[i].lock.Unlock();
}

void LiveTable::ForkChild() { ForkParent(); }

}  // namespace track
}  // namespace poolscope
