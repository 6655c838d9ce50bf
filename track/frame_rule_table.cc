// File: track/frame_rule_table.cc
//
// The rules' cache: the process-wide table LookupFrameRule probes (frame_rules.h), its doublings, the
// lookups that miss it, and its walk for the store (frame_rule_store.h).
#include <atomic>
#include <cstring>

#include "track/frame_rule_store.h"
#include "track/frame_rules.h"
#include "track/populate.h"

namespace poolscope {
namespace track {

namespace {
using frame_rules_internal::g_table;
using frame_rules_internal::Hash;
using frame_rules_internal::kTableSize;
using frame_rules_internal::Slot;

constexpr int kMaxProbe = 16;
constexpr uintptr_t kClaiming = 1;  // a slot being claimed: its pc is not written yet
}  // namespace

namespace frame_rules_internal {
POOLSCOPE_LARGE_BSS Slot g_table[kTableSize];
std::atomic<int> g_bits{kFirstTableBits};
std::atomic<uint32_t> g_generation{0};
}  // namespace frame_rules_internal

namespace {
using frame_rules_internal::g_bits;
using frame_rules_internal::kFirstTableBits;
using frame_rules_internal::kTableBits;

// Whether a rule may have been cached since the last InvalidateFrameRules: when not, that call need not
// read the table, which a process may never have touched (reading each page would map it).
std::atomic<bool> g_cached{false};
using frame_rules_internal::TableBase;

// The slots of the tables up to 2^bits slots: [0, TablesEnd(bits)).
inline size_t TablesEnd(int bits) { return TableBase(bits) + (size_t{1} << bits); }

// Slots claimed since the table last doubled.
std::atomic<size_t> g_filled{0};
// The tables up to 2^g_populated_bits slots are faulted in: a probe reads a slot before it claims it,
// and a page of .bss first read maps the zero page, whose first write then faults again. A table's
// slots are faulted in together, in one call, before the first is claimed (the first table, when the
// first rule is cached; the next one, before a doubling is published).
std::atomic<int> g_populated_bits{0};

// The rule at pc from the store, else computed (and counted for the store's next save).
FrameRule StoredOrComputed(uintptr_t pc) {
  FrameRule r = StoredFrameRule(pc);
  if (r == 0) {
    r = ComputeFrameRule(pc);
    NoteComputedFrameRule(pc);
  }
  return r;
}

void PopulateSlots(int bits) {
  int done = g_populated_bits.load(std::memory_order_relaxed);
  if (done >= bits) return;
  const uintptr_t table = reinterpret_cast<uintptr_t>(g_table);
  const uintptr_t from = done == 0 ? table : table + sizeof(Slot) * TablesEnd(done);
  PopulateRange(from, table + sizeof(Slot) * TablesEnd(bits), table + sizeof(g_table));
  while (done < bits && !g_populated_bits.compare_exchange_weak(done, bits, std::memory_order_relaxed)) {
  }
}

// The next table, twice as large, from now on (unless another thread moved on from `bits` first). The
// rules cached so far stay in the smaller tables, where a miss looks for them (InSmallerTables) before
// it computes the rule again. (A claimed slot never changes its pc, so no reader can see a slot
// emptied under it.)
void Double(int bits) {
  PopulateSlots(bits + 1);
  if (!g_bits.compare_exchange_strong(bits, bits + 1, std::memory_order_acq_rel)) return;
  g_filled.store(0, std::memory_order_relaxed);
}

// A slot was claimed: the table doubles when half its slots are filled.
void MaybeDouble(int bits) {
  if (bits >= kTableBits) return;
  if (g_filled.fetch_add(1, std::memory_order_relaxed) + 1 < (size_t{1} << bits) / 2) return;
  Double(bits);
}

// The rule cached for `pc` by a table smaller than 2^bits slots (before a doubling), or 0.
FrameRule InSmallerTables(uintptr_t pc, int bits) {
  for (int b = bits - 1; b >= kFirstTableBits; --b) {
    const size_t mask = (size_t{1} << b) - 1;
    Slot* const table = g_table + TableBase(b);
    size_t i = frame_rules_internal::Hash(pc, b);
    for (int probe = 0; probe < kMaxProbe; ++probe, i = (i + 1) & mask) {
      const uintptr_t key = table[i].pc.load(std::memory_order_acquire);
      if (key == 0) break;
      if (key == pc) {
        const FrameRule r = table[i].rule.load(std::memory_order_relaxed);
        if (r != 0) return r;
        break;
      }
    }
  }
  return 0;
}
}  // namespace

FrameRule LookupFrameRuleSlow(uintptr_t pc) {
  const int bits = g_bits.load(std::memory_order_relaxed);
  const size_t mask = (size_t{1} << bits) - 1;
  Slot* const table = g_table + TableBase(bits);
  size_t i = Hash(pc, bits);
  for (int probe = 0; probe < kMaxProbe; ++probe, i = (i + 1) & mask) {
    Slot& s = table[i];
    uintptr_t key = s.pc.load(std::memory_order_acquire);
    if (key == pc) {
      FrameRule r = s.rule.load(std::memory_order_relaxed);
      if (r != 0) return r;
      r = StoredOrComputed(pc);
      if (!g_cached.load(std::memory_order_relaxed)) g_cached.store(true, std::memory_order_relaxed);
      s.rule.store(r, std::memory_order_relaxed);
      return r;
    }
    if (key == 0) {
      FrameRule r = InSmallerTables(pc, bits);
      if (r == 0) r = StoredOrComputed(pc);
      PopulateSlots(bits);
      uintptr_t expected = 0;
      if (s.pc.compare_exchange_strong(expected, kClaiming, std::memory_order_relaxed)) {
        if (!g_cached.load(std::memory_order_relaxed)) g_cached.store(true, std::memory_order_relaxed);
        s.rule.store(r, std::memory_order_relaxed);
        s.pc.store(pc, std::memory_order_release);
        MaybeDouble(bits);
      }
      return r;
    }
  }
  // The neighbourhood is full (a run of kMaxProbe claimed slots, rare in a table at most half full):
  // the table doubles now, and the pc's neighbourhood in the next is another. Answered without caching,
  // a pc there was computed again at each lookup while the table stayed current (python3: a hot pc
  // computed some 3,000 times). At the largest table, the rule is answered without caching.
  if (bits < kTableBits) {
    Double(bits);
    return LookupFrameRuleSlow(pc);
  }
  FrameRule known = InSmallerTables(pc, bits);
  return known != 0 ? known : StoredOrComputed(pc);
}

void ForEachCachedRule(void (*fn)(uintptr_t pc, FrameRule rule, void* arg), void* arg) {
  const size_t used = TablesEnd(g_bits.load(std::memory_order_acquire));
  for (size_t i = 0; i < used; ++i) {
    const uintptr_t pc = g_table[i].pc.load(std::memory_order_acquire);
    if (pc == 0 || pc == kClaiming) continue;
    const FrameRule r = g_table[i].rule.load(std::memory_order_relaxed);
    if (r != 0) fn(pc, r, arg);
  }
}

void InvalidateFrameRules() {
  RecheckFrameRuleStore();
  frame_rules_internal::g_generation.fetch_add(1, std::memory_order_acq_rel);
  frame_rules_internal::ForgetFunctions();
  if (!g_cached.exchange(false, std::memory_order_acq_rel)) return;
  const size_t used = TablesEnd(g_bits.load(std::memory_order_relaxed));
  for (size_t i = 0; i < used; ++i) {
    if (g_table[i].rule.load(std::memory_order_relaxed) != 0) {
      g_table[i].rule.store(0, std::memory_order_relaxed);
    }
  }
}

}  // namespace track
}  // namespace poolscope
