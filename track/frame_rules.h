// File: track/frame_rules.h
//
// How to step from a frame to its caller on x86-64, read from the DWARF call frame information
// (.eh_frame) that every Debian object carries, and kept in a process-wide table keyed by pc so that
// a pc seen before costs one hash probe.
//
// A rule says where the frame's canonical frame address (CFA) is (rsp or rbp plus an offset, or the
// word at rbp plus an offset for functions that realign their stack), that the return address is the
// word just below the CFA, and where the caller's rbp was saved, if anywhere. That is the whole state
// a call-site unwind needs: rsp, rbp and the return address. Frames whose CFI says anything else
// (signal frames, CFA expressions other than the realignment one, a return address not at CFA-8)
// get kUnsupported, and the capture that met them is left to the unwinder (stack_capture.cc).
//
// The table: up to 2^17 slots of {pc, rule}, in .bss (the slots in use faulted in when a table is first
// used). A slot's pc is claimed once with a compare-and-swap and never changes; its rule is one 64-bit
// word, written after the claim and read with one load, so a reader sees either no rule yet or a whole
// one. Behind it, ComputeFrameRule keeps each function it read whole (its rows, compactly), so that the
// function's other pcs need no CFI interpretation. dlclose makes rules of unloaded code stale (another
// object may be mapped at the same addresses): InvalidateFrameRules forgets every rule and every
// function, keeping the claimed pcs.
//
// No malloc, and no lock that is waited for inside a capture (the functions' store is taken with a
// try-lock; InvalidateFrameRules waits for it): looking an object's .eh_frame_hdr up goes through
// glibc's _dl_find_object, which is lock-free and async-signal-safe.
#ifndef POOLSCOPE_TRACK_FRAME_RULES_H_
#define POOLSCOPE_TRACK_FRAME_RULES_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "track/spin_lock.h"

namespace poolscope {
namespace track {

// A rule packed into one word (0 means "not known yet").
//   bits 0-1   kind: kStep, kOutermost (return address undefined: _start, a thread's first frame),
//              kUnsupported
//   bit  2     CFA is based on rbp (else rsp)
//   bit  3     CFA is the word at base + offset (stack-realigning functions)
//   bits 4-5   caller's rbp: 0 unchanged, 1 saved at CFA + rbp_offset, 2 saved at rbp + rbp_offset
//   bits 16-31 rbp_offset (signed)
//   bits 32-63 cfa_offset (signed)
using FrameRule = uint64_t;

enum FrameRuleKind : uint64_t { kRuleStep = 1, kRuleOutermost = 2, kRuleUnsupported = 3 };
constexpr uint64_t kRuleKindMask = 3;
constexpr uint64_t kRuleCfaOnRbp = 1 << 2;
constexpr uint64_t kRuleCfaDeref = 1 << 3;
constexpr int kRuleRbpShift = 4;
enum RbpSaved : uint64_t { kRbpUnchanged = 0, kRbpAtCfa = 1, kRbpAtRbp = 2 };

inline uint64_t RuleKind(FrameRule r) { return r & kRuleKindMask; }
inline uint64_t RuleRbp(FrameRule r) { return (r >> kRuleRbpShift) & 3; }
inline int64_t RuleRbpOffset(FrameRule r) { return static_cast<int16_t>(r >> 16); }
inline int64_t RuleCfaOffset(FrameRule r) { return static_cast<int32_t>(r >> 32); }

// The rule in effect at `pc` (an address inside an instruction: for a return address, pass ra - 1),
// computed from the CFI of the object holding it. Never 0. Slow (a binary search and a CFI
// interpretation); use LookupFrameRule.
FrameRule ComputeFrameRule(uintptr_t pc);

// How many functions' CFI was interpreted whole so far (ComputeFrameRule reads a function once and
// keeps its rows: its other pcs are answered from them until InvalidateFrameRules), for tests.
uint64_t FrameRulesFunctionsRead();

// fork() child: forgets the functions read if a thread that no longer exists was reading one.
void FrameRulesForkChild();

// The FDE covering `pc` (an address inside an instruction), which stands for the function holding it:
// two pcs with the same non-null answer lie in one function. nullptr when unknown. Slow (a binary
// search of the object's .eh_frame_hdr table); no malloc, no lock.
const void* FunctionOf(uintptr_t pc);
// The table lookup in front of ComputeFrameRule: inline for a pc found in its home slot, the
// common case; LookupFrameRuleSlow probes further, computes and caches.
FrameRule LookupFrameRuleSlow(uintptr_t pc);

namespace frame_rules_internal {
// The cache: a table of 2^g_bits slots, at g_table + TableBase(g_bits). It starts at 2^kFirstTableBits
// slots (16 KiB, faulted in at the first rule: /bin/true caches 8 rules) and doubles, up
// to 2^kTableBits (1 MiB), each time half its slots are filled, so the pages a process touches for it
// follow the code it unwinds through. Each size has slots of its own,
// after the smaller ones', which keep the rules cached before a doubling (a miss takes them from there
// instead of computing them again): no table is ever more than half full. A pc whose 16 probed slots
// are all claimed (rare at half full, but a hot pc there would be computed again at every lookup)
// makes the table double at once; only in the largest table is such a pc answered without caching.
constexpr int kFirstTableBits = 10;
constexpr int kTableBits = 16;
constexpr size_t kTableSize = (size_t{2} << kTableBits) - (size_t{1} << kFirstTableBits);
inline size_t TableBase(int bits) { return (size_t{1} << bits) - (size_t{1} << kFirstTableBits); }
struct Slot {
  std::atomic<uintptr_t> pc;
  std::atomic<FrameRule> rule;
};
extern Slot g_table[kTableSize];
extern std::atomic<int> g_bits;
extern std::atomic<uint32_t> g_generation;
// The rule at pc by interpreting its function's CFI up to it, without the functions kept: what
// ComputeFrameRule must answer, for tests.
FrameRule InterpretFrameRule(uintptr_t pc);
// The lock of the functions read, for tests.
SpinLock& FunctionsLock();
// Forgets every function read whole (InvalidateFrameRules: code was unmapped).
void ForgetFunctions();
inline size_t Hash(uintptr_t pc, int bits) {
  return static_cast<size_t>((pc * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}
}  // namespace frame_rules_internal

inline FrameRule LookupFrameRule(uintptr_t pc) {
  const int bits = frame_rules_internal::g_bits.load(std::memory_order_relaxed);
  const frame_rules_internal::Slot& s =
      frame_rules_internal::g_table[frame_rules_internal::TableBase(bits) + frame_rules_internal::Hash(pc, bits)];
  if (s.pc.load(std::memory_order_acquire) == pc) {
    FrameRule r = s.rule.load(std::memory_order_relaxed);
    if (r != 0) return r;
  }
  return LookupFrameRuleSlow(pc);
}

// Forgets every cached rule (call after code was unmapped, not inside an allocation: the store of
// frame_rule_store.h walks the loaded objects), and moves the generation on.
void InvalidateFrameRules();
// Starts at 0 and changes with every InvalidateFrameRules: anything derived from rules (a stack
// capture's memo) is stale when the generation it was made under is not the current one.
inline uint32_t FrameRulesGeneration() {
  return frame_rules_internal::g_generation.load(std::memory_order_acquire);
}

// How many times ComputeFrameRule ran (cache misses and direct calls), for tests and the report.
uint64_t FrameRulesComputed();

// Calls fn(pc, rule, arg) for each rule cached now (frame_rule_store.cc writes them at exit).
void ForEachCachedRule(void (*fn)(uintptr_t pc, FrameRule rule, void* arg), void* arg);

// Calls fn(begin, end, arg) for each piece of .bss the rules and the functions read are kept in (the
// table, the functions' records and their index, the distinct rules). They hold pcs, offsets into
// loaded objects and rules, never a pointer into the heap: a leak detector below poolscope finds
// nothing in them, and the exit scan's prediction of it leaves them unread.
void ForEachFrameRuleMemory(void (*fn)(uintptr_t begin, uintptr_t end, void* arg), void* arg);

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_FRAME_RULES_H_
