// File: track/frame_rules.cc
//
// Computing a pc's rule (ComputeFrameRule) with the CFI reader of cfi.h, through the functions read
// whole (below); the rules' cache, which LookupFrameRule probes, is frame_rule_table.cc.
#include "track/frame_rules.h"

#include <atomic>
#include <cstring>

#include "track/cfi.h"
#include "track/populate.h"
#include "track/spin_lock.h"

namespace poolscope {
namespace track {

using cfi::Cie;
using cfi::EntryBounds;
using cfi::Execute;
using cfi::FindFde;
using cfi::kMaxRemembered;
using cfi::Pack;
using cfi::ParseCie;
using cfi::Reader;
using cfi::Row;

namespace {
std::atomic<uint64_t> g_computed{0};
}  // namespace

const void* FunctionOf(uintptr_t pc) { return FindFde(pc); }

namespace {

// An FDE read as far as its instructions: the function's range, its CIE, and a reader over the FDE's
// own instructions. False when the reader cannot use it (the rule is then kRuleUnsupported).
struct FdeInfo {
  Cie cie;
  uintptr_t start = 0, range = 0;
  Reader insns{nullptr, nullptr};
  Row initial;  // the row after the CIE's instructions
};

// Inlined into its callers, so that a capture's deepest nesting of frames (a rule computed inside
// malloc, on a thread's stack of 16 KiB) is its caller's frame and Execute's, no more.
__attribute__((always_inline)) inline bool ReadFde(const uint8_t* fde, FdeInfo* f, Row* remembered) {
  const uint8_t* body;
  const uint8_t* end;
  if (!EntryBounds(fde, &body, &end)) return false;
  uint32_t cie_ptr;
  memcpy(&cie_ptr, body, 4);
  if (cie_ptr == 0) return false;  // a CIE, not an FDE
  if (!ParseCie(body - cie_ptr, &f->cie) || f->cie.signal_frame) return false;
  Reader r{body + 4, end};
  if (!r.Pointer(f->cie.fde_enc, 0, &f->start) || !r.Pointer(f->cie.fde_enc & 0x0f, 0, &f->range)) return false;
  if (f->cie.has_aug_data) r.Skip(r.Uleb());
  if (r.bad) return false;
  f->insns = r;
  // The CIE's instructions give the row every FDE starts from (and DW_CFA_restore goes back to).
  uintptr_t loc = f->start;
  return Execute(Reader{f->cie.insns, f->cie.insns_end}, f->cie, ~uintptr_t{0}, &loc, f->initial, &f->initial,
                 remembered);
}

// The rule at pc by running the FDE's instructions up to it.
__attribute__((noinline)) FrameRule InterpretAt(const uint8_t* fde, uintptr_t pc) {
  FdeInfo f;
  Row remembered[kMaxRemembered];
  if (!ReadFde(fde, &f, remembered)) return kRuleUnsupported;
  if (pc < f.start || pc - f.start >= f.range) return kRuleUnsupported;
  Row row = f.initial;
  uintptr_t loc = f.start;
  if (!Execute(f.insns, f.cie, pc, &loc, f.initial, &row, remembered)) return kRuleUnsupported;
  return Pack(row);
}

// Functions read whole: a function's CFI is interpreted once, into its rows (the offset from the
// function's start where each rule starts, and the rule), so that a pc of a known function costs a probe
// and a binary search of its rows: big functions have many call sites, and interpreting each one's rule
// from the function's start (what InterpretAt does) made CFI interpretation a fifth of tracking's time
// on cc1. Kept compactly, since a page touched costs more than a function interpreted: a row is a 16-bit
// offset (32-bit in functions of 64 KiB or more) and a 16-bit index into one table of the distinct
// rules of the process (a few hundred: functions share their prologues' rules), 4 to 6 bytes where the
// rule itself is 8; a function's header is 32 bytes. Records sit one after the other in an arena in
// .bss (touched as it fills, each page written before it is read), found by FDE through a table of
// arena offsets that doubles from 2^kFirstFunctionBits slots.
//
// Everything here is under g_functions_lock, taken with TryLock only (a capture in a signal handler may
// interrupt one holding it): a capture that finds it taken interprets as InterpretAt does, and so does
// one whose function cannot be kept (the arena, the table or the rule table full, or rows out of order).
constexpr size_t kArenaBytes = size_t{1} << 20;
constexpr int kFirstFunctionBits = 10;
constexpr int kMaxFunctionBits = 15;
constexpr int kRuleBits = 12;  // the distinct rules' table: 2^kRuleBits slots, at most 3/4 used
constexpr size_t kRuleSlots = size_t{1} << kRuleBits;
constexpr uint32_t kMaxRows = 16384;  // rows of a function (beyond: not kept)

struct FunctionRecord {
  const uint8_t* fde;
  uintptr_t start;
  uint32_t range;
  uint32_t nrows;  // 0: every pc of the function is kRuleUnsupported
  uint32_t bytes;  // of the record, its rows included (a multiple of 8)
  uint32_t wide;   // offsets are 32-bit (else 16-bit)
  // nrows offsets (uint16_t or uint32_t) in increasing order, then nrows uint16_t rule indices.
};

alignas(64) POOLSCOPE_LARGE_BSS uint8_t g_arena[kArenaBytes];
// A slot: the arena offset + 1 of a record in its low kOffsetBits, and above them bits of the FDE's hash
// that the slot's home does not say (a probe passes other functions' slots without reading their
// records); 0 when empty.
constexpr int kOffsetBits = 21;
static_assert(kArenaBytes < (size_t{1} << kOffsetBits), "arena offsets fit a slot");
constexpr uint32_t kOffsetMask = (uint32_t{1} << kOffsetBits) - 1;
POOLSCOPE_LARGE_BSS uint32_t g_functions[size_t{1} << kMaxFunctionBits];
int g_function_bits = kFirstFunctionBits;
size_t g_arena_used = 0;
size_t g_arena_populated = 0;  // the arena's bytes faulted in
// Faulted in ahead of the records by as much as they hold already, up to kArenaAhead: a process that
// reads a few functions (cc1 with its rules stored: 7) touches a page or two, not 64 KiB it never
// writes (16 pages at some 11 us each on first write here).
constexpr size_t kArenaAhead = size_t{64} << 10;
size_t g_nfunctions = 0;
POOLSCOPE_LARGE_BSS FrameRule g_rules[kRuleSlots];      // the distinct rules, by index
POOLSCOPE_LARGE_BSS uint16_t g_rule_slots[kRuleSlots];  // index + 1 of a rule, by hash of the rule, or 0
uint32_t g_nrules = 0;
POOLSCOPE_LARGE_BSS uint16_t g_scratch[kMaxRows];  // the rule indices of the function being read
Row g_remembered[kMaxRemembered];  // its interpretation's DW_CFA_remember_state rows
SpinLock g_functions_lock;
std::atomic<uint64_t> g_functions_read{0};

inline uint64_t FunctionHash(const uint8_t* fde) {
  return reinterpret_cast<uintptr_t>(fde) * 0x9E3779B97F4A7C15ull;
}
inline size_t FunctionHome(uint64_t hash, int bits) { return static_cast<size_t>(hash >> (64 - bits)); }
// The slot's tag: the hash's low bits (the home takes its high ones).
inline uint32_t FunctionTag(uint64_t hash) { return static_cast<uint32_t>(hash >> 8) & ~kOffsetMask; }

FunctionRecord* RecordAt(uint32_t slot) {
  return reinterpret_cast<FunctionRecord*>(g_arena + (slot & kOffsetMask) - 1);
}

// The index of `rule` in g_rules, added if new; -1 when the table is full.
int RuleIndex(FrameRule rule) {
  const size_t mask = kRuleSlots - 1;
  for (size_t i = static_cast<size_t>((rule * 0x9E3779B97F4A7C15ull) >> (64 - kRuleBits));; i = (i + 1) & mask) {
    const uint16_t v = g_rule_slots[i];
    if (v == 0) {
      if ((g_nrules + 1) * 4 > kRuleSlots * 3) return -1;
      g_rules[g_nrules] = rule;
      g_rule_slots[i] = static_cast<uint16_t>(++g_nrules);
      return static_cast<int>(g_nrules - 1);
    }
    if (g_rules[v - 1] == rule) return v - 1;
  }
}

FrameRule RuleIn(const FunctionRecord* f, uintptr_t pc) {
  if (f->nrows == 0 || pc < f->start || pc - f->start >= f->range) return kRuleUnsupported;
  const uint32_t off = static_cast<uint32_t>(pc - f->start);
  const auto* const offsets = reinterpret_cast<const uint8_t*>(f + 1);
  const size_t width = f->wide ? 4 : 2;
  auto offset = [&](uint32_t i) -> uint32_t {
    if (width == 4) return reinterpret_cast<const uint32_t*>(offsets)[i];
    return reinterpret_cast<const uint16_t*>(offsets)[i];
  };
  uint32_t lo = 0, hi = f->nrows;  // the last row whose offset is <= off (row 0 is at offset 0)
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (offset(mid) <= off) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const auto* index = reinterpret_cast<const uint16_t*>(offsets + width * f->nrows);
  return g_rules[index[lo]];
}

// Places the record at arena offset `at`.
void PlaceFunction(size_t at) {
  const size_t mask = (size_t{1} << g_function_bits) - 1;
  const uint64_t hash = FunctionHash(reinterpret_cast<const FunctionRecord*>(g_arena + at)->fde);
  size_t i = FunctionHome(hash, g_function_bits);
  while (g_functions[i] != 0) i = (i + 1) & mask;
  g_functions[i] = static_cast<uint32_t>(at + 1) | FunctionTag(hash);
}

// The rows of the function being read: their offsets, 32-bit, straight into the arena where the record
// will have them (made 16-bit there afterwards when the function is small), their rule indices into
// g_scratch (they follow the offsets, whose number is not known yet). A row is merged into the one
// before it when their rules are equal. !ok: the function is not kept (out of arena, too many rows,
// locations out of order, or the rules' table full).
class RowsSink {
 public:
  static constexpr bool kKeeps = true;
  RowsSink(uint32_t* offsets, size_t room, uintptr_t start) : offsets_(offsets), room_(room), start_(start) {}
  void Emit(uintptr_t from, const Row& row) { Put(from, Pack(row)); }
  void Put(uintptr_t from, FrameRule rule) {
    if (!ok_) return;
    if (from < start_ || from - start_ > UINT32_MAX) {
      ok_ = false;
      return;
    }
    const uint32_t off = static_cast<uint32_t>(from - start_);
    if (n_ > 0 && off < offsets_[n_ - 1]) {
      ok_ = false;
      return;
    }
    if (n_ > 0 && off == offsets_[n_ - 1]) {
      --n_;  // a row of no bytes: the later one stands
    } else if (n_ > 0 && rule == last_rule_) {
      return;  // the row before goes on (the index of its rule is the one RuleIndex would give)
    }
    const int k = RuleIndex(rule);
    if (k < 0) {
      ok_ = false;
      return;
    }
    if (n_ > 0 && g_scratch[n_ - 1] == k) {
      last_rule_ = rule;  // (row n_ - 1 may be another than before the merge above)
      return;
    }
    if (n_ == kMaxRows || sizeof(uint32_t) * (n_ + 1) > room_) {
      ok_ = false;
      return;
    }
    offsets_[n_] = off;
    g_scratch[n_] = static_cast<uint16_t>(k);
    last_rule_ = rule;
    ++n_;
  }
  bool ok() const { return ok_; }
  uint32_t n() const { return n_; }

 private:
  uint32_t* const offsets_;
  const size_t room_;
  const uintptr_t start_;
  uint32_t n_ = 0;
  FrameRule last_rule_ = 0;  // the rule of row n_ - 1
  bool ok_ = true;
};

// The function of `fde`, found or read now; nullptr when it cannot be kept. With g_functions_lock held.
__attribute__((noinline)) const FunctionRecord* FunctionLocked(const uint8_t* fde) {
  const size_t mask = (size_t{1} << g_function_bits) - 1;
  const uint64_t hash = FunctionHash(fde);
  const uint32_t tag = FunctionTag(hash);
  for (size_t i = FunctionHome(hash, g_function_bits);; i = (i + 1) & mask) {
    const uint32_t slot = g_functions[i];
    if (slot == 0) break;
    if ((slot & ~kOffsetMask) == tag && RecordAt(slot)->fde == fde) return RecordAt(slot);
  }
  if ((g_nfunctions + 1) * 4 > (size_t{3} << g_function_bits)) {
    // Three quarters full: twice the slots, every record placed again (the arena lists them).
    if (g_function_bits == kMaxFunctionBits) return nullptr;
    ++g_function_bits;
    memset(g_functions, 0, sizeof(uint32_t) << g_function_bits);
    for (size_t at = 0; at < g_arena_used; at += reinterpret_cast<FunctionRecord*>(g_arena + at)->bytes) {
      PlaceFunction(at);
    }
  }
  if (g_arena_used + sizeof(FunctionRecord) > kArenaBytes) return nullptr;
  auto* f = reinterpret_cast<FunctionRecord*>(g_arena + g_arena_used);
  auto* const offsets = reinterpret_cast<uint8_t*>(f + 1);
  // Records are written in order: the arena is faulted in ahead of them, a batch of pages at a time.
  const uintptr_t arena = reinterpret_cast<uintptr_t>(g_arena);
  g_arena_populated = PopulateAhead(arena + g_arena_populated, reinterpret_cast<uintptr_t>(f),
                                    reinterpret_cast<uintptr_t>(offsets) + kPageBytes, arena + kArenaBytes,
                                    g_arena_used < kArenaAhead ? g_arena_used : kArenaAhead) -
                      arena;
  FdeInfo info;
  uint32_t nrows = 0;
  if (ReadFde(fde, &info, g_remembered)) {
    if (info.range > UINT32_MAX) return nullptr;
    RowsSink sink(reinterpret_cast<uint32_t*>(offsets), kArenaBytes - g_arena_used - sizeof(FunctionRecord),
                  info.start);
    Row row = info.initial;
    uintptr_t loc = info.start;
    if (Execute(info.insns, info.cie, ~uintptr_t{0}, &loc, info.initial, &row, g_remembered, &sink)) {
      sink.Emit(loc, row);  // in effect to the function's end
    } else {
      sink.Put(loc, kRuleUnsupported);  // the instructions stop making sense here
    }
    if (!sink.ok()) return nullptr;
    nrows = sink.n();
  }
  const bool wide = info.range > 0xffff;
  const size_t width = wide ? 4 : 2;
  const size_t bytes = (sizeof(FunctionRecord) + (width + 2) * nrows + 7) & ~size_t{7};
  if (g_arena_used + bytes > kArenaBytes) return nullptr;
  if (!wide) {  // in place, front to back: offset i moves from byte 4i to byte 2i
    for (uint32_t i = 0; i < nrows; ++i) {
      const uint32_t off = reinterpret_cast<const uint32_t*>(offsets)[i];
      reinterpret_cast<uint16_t*>(offsets)[i] = static_cast<uint16_t>(off);
    }
  }
  memcpy(offsets + width * nrows, g_scratch, sizeof(uint16_t) * nrows);
  f->fde = fde;
  f->start = info.start;
  f->range = static_cast<uint32_t>(info.range);
  f->nrows = nrows;
  f->bytes = static_cast<uint32_t>(bytes);
  f->wide = wide ? 1 : 0;
  PlaceFunction(g_arena_used);
  g_arena_used += bytes;
  ++g_nfunctions;
  g_functions_read.fetch_add(1, std::memory_order_relaxed);
  return f;
}

// Forgets every function (the rules' table stays: rules are values, whoever's code they came from).
void ForgetFunctionsLocked() {
  if (g_nfunctions == 0) return;
  memset(g_functions, 0, sizeof(uint32_t) << g_function_bits);
  g_nfunctions = 0;
  g_arena_used = 0;
}

}  // namespace

FrameRule ComputeFrameRule(uintptr_t pc) {
  g_computed.fetch_add(1, std::memory_order_relaxed);
  const uint8_t* fde = FindFde(pc);
  if (fde == nullptr) return kRuleUnsupported;
  if (g_functions_lock.TryLock()) {
    const FunctionRecord* f = FunctionLocked(fde);
    const FrameRule r = f != nullptr ? RuleIn(f, pc) : 0;
    g_functions_lock.Unlock();
    if (r != 0) return r;
  }
  return InterpretAt(fde, pc);
}

namespace frame_rules_internal {
FrameRule InterpretFrameRule(uintptr_t pc) {
  const uint8_t* fde = FindFde(pc);
  return fde == nullptr ? kRuleUnsupported : InterpretAt(fde, pc);
}
SpinLock& FunctionsLock() { return g_functions_lock; }
}  // namespace frame_rules_internal

uint64_t FrameRulesFunctionsRead() { return g_functions_read.load(std::memory_order_relaxed); }

void FrameRulesForkChild() {
  // A thread that no longer exists may have held the lock, in the middle of a doubling or a record.
  if (!g_functions_lock.TryLock()) {
    g_functions_lock.Reset();
    g_functions_lock.Lock();
    g_nfunctions = 1;  // whatever the table holds goes
    ForgetFunctionsLocked();
  }
  g_functions_lock.Unlock();
}

uint64_t FrameRulesComputed() { return g_computed.load(std::memory_order_relaxed); }

namespace frame_rules_internal {
void ForgetFunctions() {
  SpinLockHolder h(&g_functions_lock);
  ForgetFunctionsLocked();
}
}  // namespace frame_rules_internal

void ForEachFrameRuleMemory(void (*fn)(uintptr_t begin, uintptr_t end, void* arg), void* arg) {
  auto each = [fn, arg](const void* p, size_t bytes) {
    const uintptr_t b = reinterpret_cast<uintptr_t>(p);
    fn(b, b + bytes, arg);
  };
  each(frame_rules_internal::g_table, sizeof frame_rules_internal::g_table);
  each(g_arena, sizeof g_arena);
  each(g_functions, sizeof g_functions);
  each(g_rules, sizeof g_rules);
  each(g_rule_slots, sizeof g_rule_slots);
}

}  // namespace track
}  // namespace poolscope
