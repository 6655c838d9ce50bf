// File: track/recent_blocks.h
//
// Each thread's most recent live blocks, kept in a small table of the thread's own in front of the
// shared LiveTable: most blocks are freed soon after they were allocated, by the thread that allocated
// them, and such a block then never reaches the shared table (no stripe lock, and no cache miss on a
// table of a million entries). A block whose slot is wanted by a newer allocation moves to the shared
// table; so do all of a thread's blocks when it ends.
//
// A thread's table (a Node) is an array of kSlots slots picked by a hash of the address. A slot's
// address word is the only word another thread ever writes, and only with a compare-and-swap to 0
// (a free of the block from another thread). States of that word (H = bit 63, set so that the word
// is never a valid pointer: a conservative leak checker below us must not find the program's blocks
// referenced from here):
//   0          empty
//   p | H      block p lives here (p is a multiple of 8)
//   p | H | 1  the owner is moving p to the shared table; a thread that frees p waits for the move
//              (a few instructions: the table's Insert) and then erases it there.
// The owner writes a slot's size and stack words before publishing its address (release).
//
// Invariant: a live block is in exactly one place, a slot or the shared table, and blocks only ever
// move from a slot to the table. So a free that misses its own slot and the table and every other
// thread's slot looks in the table once more (the block may have moved while it looked) and then
// knows the block was never recorded.
//
// Nodes are never unmapped: a thread that ends moves its blocks to the table and leaves its node on a
// free list for the next thread, so another thread may always read any node.
//
// Cost: Insert into an empty slot is a hash and three stores; Erase of the caller's own block is a hash,
// a load and a store (another thread changes a slot only with a compare-and-swap, and only to erase
// or, the owner, to move its block). A free of a block that is neither in the caller's slot nor in the
// table visits one slot of every node (threads that ever ran at once).
//
// Limits: a signal handler that interrupts its own thread's Insert or Erase must not use the node
// (pass self_usable = false): it then cannot find a block that sits in its own thread's slot, which
// stays live in the report. Memory: kSlots * 24 bytes per node (3 KiB).
//
// Thread-safety: Insert and Erase with a node only from the node's thread; Erase (with any node, or
// none), ForEach and Acquire from any thread. ForEach may run while others insert and erase: it sees
// each block at most once (a block being moved is left to the table's ForEach).
#ifndef POOLSCOPE_TRACK_RECENT_BLOCKS_H_
#define POOLSCOPE_TRACK_RECENT_BLOCKS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "track/depot_memory.h"
#include "track/live_table.h"
#include "track/spin_lock.h"

namespace poolscope {
namespace track {

class RecentBlocks {
 public:
  static constexpr int kSlotBits = 7;
  static constexpr int kSlots = 1 << kSlotBits;

  struct Slot {
    std::atomic<uintptr_t> addr;
    std::atomic<uint64_t> size;
    std::atomic<uint64_t> meta;  // stack id | flags << 32
  };
  struct Node {
    Slot slots[kSlots];
    Node* next_all;   // every node ever made (never unlinked)
    Node* next_free;  // under free_lock_
    std::atomic<bool> in_use;
  };

  RecentBlocks(DepotMemory* memory, LiveTable* table) : memory_(memory), table_(table) {}
  RecentBlocks(const RecentBlocks&) = delete;
  RecentBlocks& operator=(const RecentBlocks&) = delete;

  // A node for the calling thread; nullptr when no memory is left (the thread then uses the table).
  Node* Acquire();
  // The node's thread has ended: its blocks move to the table, the node to the free list.
  void Release(Node* node);

  // Records a new live block in the thread's node (moving the slot's previous block to the table).
  // Inline when the slot is empty (the block there was freed): three stores.
  void Insert(Node* self, uintptr_t ptr, uint64_t size, uint32_t stack_id, uint8_t flags) {
    Slot& s = self->slots[SlotOf(ptr)];
    if (__builtin_expect(IsAddress(ptr) && s.addr.load(std::memory_order_relaxed) == 0, 1)) {
      Fill(s, ptr, size, stack_id, flags);
      return;
    }
    InsertSlow(self, ptr, size, stack_id, flags);
  }
  // A hint before Insert(self, ptr, ...): prefetches the table lines for the block that Insert will
  // move out of ptr's slot, if any (LiveTable::Prefetch).
  void PrefetchInsert(const Node* self, uintptr_t ptr) const;
  // Whether `ptr` is in one of `self`'s slots (a hint from the node's thread: Erase decides).
  bool Holds(const Node* self, uintptr_t ptr) const {
    return self->slots[SlotOf(ptr)].addr.load(std::memory_order_relaxed) == Hide(ptr);
  }
  // Forgets a freed block wherever it is; false when it is nowhere. `self` is the calling thread's
  // node or nullptr; with self_usable false its slots are neither used nor waited on. Inline for a
  // block in the caller's own slot: only this thread moves its blocks, and another thread changes
  // the slot only to erase this very block, which would be the program freeing it twice at once; so
  // it is erased with a store, not a compare-and-swap (a locked instruction on every free).
  // `size`, when not null, receives the block's size when it is found.
  bool Erase(Node* self, bool self_usable, uintptr_t ptr, uint64_t* size = nullptr) {
    if (self != nullptr && self_usable && IsAddress(ptr)) {
      Slot& s = self->slots[SlotOf(ptr)];
      if (s.addr.load(std::memory_order_relaxed) == Hide(ptr)) {
        if (size != nullptr) *size = s.size.load(std::memory_order_relaxed);
        s.addr.store(0, std::memory_order_release);
        return true;
      }
    }
    return EraseElsewhere(self, ptr, size);
  }

  // Calls fn(entry, arg) for every block in a slot (the table's own blocks are not visited).
  void ForEach(void (*fn)(const LiveEntry& entry, void* arg), void* arg) const;
  template <typename F>
  void ForEach(F&& f) const {
    using Fn = std::remove_reference_t<F>;
    ForEach([](const LiveEntry& e, void* a) { (*static_cast<Fn*>(a))(e); }, &f);
  }

  // In a fork() child: every node but `keep` belonged to a thread that does not exist there; their
  // blocks move to the table (also one caught halfway) and the nodes go to the free list.
  void ForkChild(Node* keep);
  void ForkPrepare() { free_lock_.Lock(); }
  void ForkParent() { free_lock_.Unlock(); }

  static size_t SlotOf(uintptr_t ptr) {
    return static_cast<size_t>(((ptr >> 3) * 0x9E3779B97F4A7C15ull) >> (64 - kSlotBits));
  }

  // Slot words: 0 (empty), Hide(block address), or that | kMoving while the owner moves the block to
  // the table. Addresses are kept with the top bit set: never a valid pointer, so that a conservative
  // leak checker below us (memcheck) does not take a leaked block for one still referenced from here.
  static constexpr uintptr_t kMoving = 1;
  static constexpr uintptr_t kHidden = uintptr_t{1} << 63;
  static uintptr_t Hide(uintptr_t p) { return p | kHidden; }
  static uintptr_t Unhide(uintptr_t v) { return v & ~(kHidden | kMoving); }
  // What slots can hold; anything else goes to the table.
  static bool IsAddress(uintptr_t ptr) { return ptr != 0 && (ptr & 7) == 0 && (ptr & kHidden) == 0; }

 private:
  static void Fill(Slot& s, uintptr_t ptr, uint64_t size, uint32_t stack_id, uint8_t flags) {
    s.size.store(size, std::memory_order_relaxed);
    s.meta.store(static_cast<uint64_t>(stack_id) | (static_cast<uint64_t>(flags) << 32),
                 std::memory_order_relaxed);
    s.addr.store(Hide(ptr), std::memory_order_release);
  }
  // Insert when ptr is not an address or its slot holds a block.
  void InsertSlow(Node* self, uintptr_t ptr, uint64_t size, uint32_t stack_id, uint8_t flags);
  // Erase when the block is not in the caller's own slot (or that cannot be used).
  bool EraseElsewhere(Node* self, uintptr_t ptr, uint64_t* size);
  // Moves slot s's block (seen as `v`, not 0, not moving) to the table; false when another thread
  // freed it first. Leaves the slot moving (v | 1): the caller stores its next value.
  bool MoveToTable(Slot& s, uintptr_t v);
  // Inserts slot s's block (its address word read as v) into the table.
  void InsertIntoTable(const Slot& s, uintptr_t v);
  // Puts a node no thread uses on the free list (free_lock_ held, or in a fork() child).
  void PushFree(Node* node);
  void Flush(Node* node, bool caught_halfway);

  DepotMemory* const memory_;
  LiveTable* const table_;
  std::atomic<Node*> all_{nullptr};
  SpinLock free_lock_;
  Node* free_ = nullptr;
};

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_RECENT_BLOCKS_H_
