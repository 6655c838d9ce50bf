// File: track/recent_blocks.cc
//
// See recent_blocks.h for the slot states and the one invariant (a live block is in one place, and
// blocks only move from a slot to the table).
#include "track/recent_blocks.h"

#include <sched.h>

#include <new>

namespace poolscope {
namespace track {

namespace {
// The block slot s holds, seen there as address word v.
LiveEntry EntryOf(const RecentBlocks::Slot& s, uintptr_t v) {
  LiveEntry e;
  e.ptr = RecentBlocks::Unhide(v);
  e.size = s.size.load(std::memory_order_relaxed);
  const uint64_t meta = s.meta.load(std::memory_order_relaxed);
  e.stack_id = static_cast<uint32_t>(meta);
  e.flags = static_cast<uint8_t>(meta >> 32);
  return e;
}
}  // namespace

void RecentBlocks::InsertIntoTable(const Slot& s, uintptr_t v) {
  const LiveEntry e = EntryOf(s, v);
  table_->Insert(e.ptr, e.size, e.stack_id, e.flags);
}

void RecentBlocks::PushFree(Node* node) {
  node->in_use.store(false, std::memory_order_relaxed);
  node->next_free = free_;
  free_ = node;
}

RecentBlocks::Node* RecentBlocks::Acquire() {
  {
    SpinLockHolder h(&free_lock_);
    if (Node* n = free_) {
      free_ = n->next_free;
      n->in_use.store(true, std::memory_order_relaxed);
      return n;
    }
  }
  void* mem = memory_->Alloc(sizeof(Node));
  if (mem == nullptr) return nullptr;
  Node* n = new (mem) Node();
  for (Slot& s : n->slots) {
    s.addr.store(0, std::memory_order_relaxed);
    s.size.store(0, std::memory_order_relaxed);
    s.meta.store(0, std::memory_order_relaxed);
  }
  n->next_free = nullptr;
  n->in_use.store(true, std::memory_order_relaxed);
  Node* head = all_.load(std::memory_order_relaxed);
  do {
    n->next_all = head;
  } while (!all_.compare_exchange_weak(head, n, std::memory_order_release, std::memory_order_relaxed));
  return n;
}

bool RecentBlocks::MoveToTable(Slot& s, uintptr_t v) {
  if (!s.addr.compare_exchange_strong(v, v | kMoving, std::memory_order_acq_rel)) return false;
  InsertIntoTable(s, v);
  return true;
}

void RecentBlocks::InsertSlow(Node* self, uintptr_t ptr, uint64_t size, uint32_t stack_id, uint8_t flags) {
  if (!IsAddress(ptr)) {  // the table decides
    table_->Insert(ptr, size, stack_id, flags);
    return;
  }
  Slot& s = self->slots[SlotOf(ptr)];
  const uintptr_t v = s.addr.load(std::memory_order_relaxed);
  if (v != 0) MoveToTable(s, v);  // the slot's block has lived long enough: to the table
  Fill(s, ptr, size, stack_id, flags);
}

void RecentBlocks::PrefetchInsert(const Node* self, uintptr_t ptr) const {
  const uintptr_t v = self->slots[SlotOf(ptr)].addr.load(std::memory_order_relaxed);
  if (v != 0) table_->Prefetch(Unhide(v));
}

bool RecentBlocks::EraseElsewhere(Node* self, uintptr_t ptr, uint64_t* size) {
  LiveEntry e;
  auto from_table = [&]() {
    if (!table_->Erase(ptr, &e)) return false;
    if (size != nullptr) *size = e.size;
    return true;
  };
  if (!IsAddress(ptr)) return from_table();
  const size_t i = SlotOf(ptr);
  const uintptr_t hidden = Hide(ptr);
  if (from_table()) return true;
  for (Node* n = all_.load(std::memory_order_acquire); n != nullptr; n = n->next_all) {
    if (n == self) continue;  // its slot was looked at above (or must not be)
    Slot& s = n->slots[i];
    uintptr_t v = s.addr.load(std::memory_order_acquire);
    for (;;) {
      if (v == hidden) {
        // The slot's size is this block's while its address word names it (the owner refills a
        // slot only once it is empty).
        const uint64_t n_bytes = s.size.load(std::memory_order_relaxed);
        if (s.addr.compare_exchange_weak(v, 0, std::memory_order_acq_rel)) {
          if (size != nullptr) *size = n_bytes;
          return true;
        }
        continue;  // v reloaded
      }
      if (v != (hidden | kMoving)) break;
      sched_yield();  // its owner is inserting it into the table: a few instructions away
      v = s.addr.load(std::memory_order_acquire);
    }
  }
  // It may have moved to the table while the slots were looked at.
  return from_table();
}

void RecentBlocks::ForEach(void (*fn)(const LiveEntry& entry, void* arg), void* arg) const {
  for (Node* n = all_.load(std::memory_order_acquire); n != nullptr; n = n->next_all) {
    for (const Slot& s : n->slots) {
      const uintptr_t v = s.addr.load(std::memory_order_acquire);
      if (v == 0 || (v & kMoving) != 0) continue;
      const LiveEntry e = EntryOf(s, v);
      // Another block took the slot while we read it: that one is seen in its place or the table.
      if (s.addr.load(std::memory_order_acquire) != v) continue;
      fn(e, arg);
    }
  }
}

void RecentBlocks::Flush(Node* node, bool caught_halfway) {
  for (Slot& s : node->slots) {
    uintptr_t v = s.addr.load(std::memory_order_acquire);
    if (v == 0) continue;
    if ((v & kMoving) != 0) {
      // Only in a fork() child: the owner stopped between marking and publishing. The block is in the
      // table or not yet.
      if (caught_halfway && !table_->Find(Unhide(v), nullptr)) InsertIntoTable(s, v);
      s.addr.store(0, std::memory_order_release);
      continue;
    }
    if (MoveToTable(s, v)) s.addr.store(0, std::memory_order_release);
  }
}

void RecentBlocks::Release(Node* node) {
  Flush(node, false);
  SpinLockHolder h(&free_lock_);
  PushFree(node);
}

void RecentBlocks::ForkChild(Node* keep) {
  free_lock_.Reset();
  for (Node* n = all_.load(std::memory_order_acquire); n != nullptr; n = n->next_all) {
    if (n == keep || !n->in_use.load(std::memory_order_relaxed)) continue;
    Flush(n, true);
    PushFree(n);
  }
}

}  // namespace track
}  // namespace poolscope
