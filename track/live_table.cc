// File: track/live_table.cc
//
// Entry indices within a stripe are 0-based; chains and the free list store index + 1 so that zero
// (what fresh memory holds) means "none". Entry i lives in segment k = floor(log2(i + 64)) - 6, at
// offset i + 64 - (64 << k): segment k holds 64 << k entries.
//
// Lock order: a stripe lock, then whatever DepotMemory takes inside Alloc. Never two stripe locks,
// except ForkPrepare, which takes them all in index order.
#include "track/live_table.h"

#include <new>

namespace poolscope {
namespace track {

namespace {

constexpr uint32_t kFirstSegmentLog = 6;  // 64 entries
constexpr uint32_t kFirstBuckets = 64;
constexpr int kFlagsShift = 56;

inline uint64_t HashPtr(uintptr_t p) {
  uint64_t h = p;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

}  // namespace

struct LiveTable::Slot {
  uintptr_t ptr;
  uint64_t size_flags;  // size in the low 56 bits, flags in the high 8
  uint32_t stack_id;
  uint32_t next;  // index + 1 of the next entry in the chain (or the free list), 0 at the end
};

size_t LiveTable::EntryBytes() { return sizeof(Slot); }


struct alignas(64) LiveTable::Stripe {
  SpinLock lock;
  std::atomic<uint32_t> count{0};  // live entries; written under `lock`, read by size() without it
  uint32_t bucket_mask = 0;        // buckets - 1, or 0 before the first insert (buckets == nullptr)
  uint32_t* buckets = nullptr;     // chain heads: index + 1, or 0
  uint32_t free_head = 0;          // erased entries: index + 1, or 0
  uint32_t used = 0;               // entries ever handed out (the free list aside)
  uint32_t reserved = 0;           // entries in the segments allocated so far
  int nsegments = 0;
  Slot* segments[kMaxSegments] = {};
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

inline LiveTable::Stripe* LiveTable::StripeOf(uint64_t hash) const {
  return &stripes_[(hash >> 32) & (nstripes_ - 1)];
}

inline LiveTable::Slot* LiveTable::SlotAt(const Stripe& s, uint32_t index) const {
  const uint32_t j = index + (1u << kFirstSegmentLog);
  const int k = (31 - __builtin_clz(j)) - static_cast<int>(kFirstSegmentLog);
  return &s.segments[k][j - ((1u << kFirstSegmentLog) << k)];
}

bool LiveTable::Grow(Stripe* s) {
  const uint32_t nbuckets = s->buckets == nullptr ? kFirstBuckets : (s->bucket_mask + 1) * 2;
  auto* fresh = static_cast<uint32_t*>(AllocCounted(sizeof(uint32_t) * nbuckets));
  if (fresh == nullptr) return false;
  if (s->buckets != nullptr) {
    // Relink every chain into the new array. The old array stays with DepotMemory.
    for (uint32_t b = 0; b <= s->bucket_mask; ++b) {
      uint32_t link = s->buckets[b];
      while (link != 0) {
        Slot* e = SlotAt(*s, link - 1);
        const uint32_t next = e->next;
        uint32_t& head = fresh[static_cast<uint32_t>(HashPtr(e->ptr)) & (nbuckets - 1)];
        e->next = head;
        head = link;
        link = next;
      }
    }
  }
  s->buckets = fresh;
  s->bucket_mask = nbuckets - 1;
  return true;
}

bool LiveTable::Reserve(Stripe* s) {
  const uint32_t live = s->count.load(std::memory_order_relaxed);
  if (s->buckets == nullptr || live >= s->bucket_mask + 1) {
    if (!Grow(s)) return false;
  }
  if (s->free_head == 0 && s->used == s->reserved) {
    if (s->nsegments == kMaxSegments) return false;
    const uint32_t entries = (1u << kFirstSegmentLog) << s->nsegments;
    void* seg = AllocCounted(sizeof(Slot) * entries);
    if (seg == nullptr) return false;
    s->segments[s->nsegments++] = static_cast<Slot*>(seg);
    s->reserved += entries;
  }
  return true;
}

InsertResult LiveTable::Insert(uintptr_t ptr, uint64_t size, uint32_t stack_id, uint8_t flags) {
  if (stripes_ == nullptr) return InsertResult::kNoMemory;
  if (size > kMaxSize) size = kMaxSize;
  const uint64_t size_flags = size | (static_cast<uint64_t>(flags) << kFlagsShift);
  const uint64_t hash = HashPtr(ptr);
  Stripe* s = StripeOf(hash);
  SpinLockHolder h(&s->lock);
  if (s->buckets != nullptr) {
    for (uint32_t link = s->buckets[static_cast<uint32_t>(hash) & s->bucket_mask]; link != 0;) {
      Slot* e = SlotAt(*s, link - 1);
      if (e->ptr == ptr) {
        e->size_flags = size_flags;
        e->stack_id = stack_id;
        return InsertResult::kReplaced;
      }
      link = e->next;
    }
  }
  if (!Reserve(s)) return InsertResult::kNoMemory;
  uint32_t link;
  if (s->free_head != 0) {
    link = s->free_head;
    s->free_head = SlotAt(*s, link - 1)->next;
  } else {
    link = ++s->used;
  }
  Slot* e = SlotAt(*s, link - 1);
  uint32_t& head = s->buckets[static_cast<uint32_t>(hash) & s->bucket_mask];
  e->ptr = ptr;
  e->size_flags = size_flags;
  e->stack_id = stack_id;
  e->next = head;
  head = link;
  s->count.store(s->count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return InsertResult::kInserted;
}

namespace {
inline void Unpack(uintptr_t ptr, uint64_t size_flags, uint32_t stack_id, LiveEntry* out) {
  out->ptr = ptr;
  out->size = size_flags & LiveTable::kMaxSize;
  out->stack_id = stack_id;
  out->flags = static_cast<uint8_t>(size_flags >> kFlagsShift);
}
}  // namespace

bool LiveTable::Erase(uintptr_t ptr, LiveEntry* out) {
  if (stripes_ == nullptr) return false;
  const uint64_t hash = HashPtr(ptr);
  Stripe* s = StripeOf(hash);
  SpinLockHolder h(&s->lock);
  if (s->buckets == nullptr) return false;
  uint32_t* prev = &s->buckets[static_cast<uint32_t>(hash) & s->bucket_mask];
  for (uint32_t link = *prev; link != 0;) {
    Slot* e = SlotAt(*s, link - 1);
    if (e->ptr == ptr) {
      if (out != nullptr) Unpack(e->ptr, e->size_flags, e->stack_id, out);
      *prev = e->next;
      e->ptr = 0;
      e->next = s->free_head;
      s->free_head = link;
      s->count.store(s->count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
      return true;
    }
    prev = &e->next;
    link = e->next;
  }
  return false;
}

bool LiveTable::Find(uintptr_t ptr, LiveEntry* out) const {
  if (stripes_ == nullptr) return false;
  const uint64_t hash = HashPtr(ptr);
  Stripe* s = StripeOf(hash);
  SpinLockHolder h(&s->lock);
  if (s->buckets == nullptr) return false;
  for (uint32_t link = s->buckets[static_cast<uint32_t>(hash) & s->bucket_mask]; link != 0;) {
    const Slot* e = SlotAt(*s, link - 1);
    if (e->ptr == ptr) {
      if (out != nullptr) Unpack(e->ptr, e->size_flags, e->stack_id, out);
      return true;
    }
    link = e->next;
  }
  return false;
}

void LiveTable::ForEach(void (*fn)(const LiveEntry& entry, void* arg), void* arg) const {
  for (uint32_t i = 0; i < nstripes_; ++i) {
    Stripe* s = &stripes_[i];
    SpinLockHolder h(&s->lock);
    if (s->buckets == nullptr) continue;
    for (uint32_t b = 0; b <= s->bucket_mask; ++b) {
      for (uint32_t link = s->buckets[b]; link != 0;) {
        const Slot* e = SlotAt(*s, link - 1);
        LiveEntry entry;
        Unpack(e->ptr, e->size_flags, e->stack_id, &entry);
        fn(entry, arg);
        link = e->next;
      }
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
