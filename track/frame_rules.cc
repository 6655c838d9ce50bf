// File: track/frame_rules.cc
//
// The CFI reader follows the DWARF 4 "Call Frame Information" chapter and the LSB's .eh_frame and
// .eh_frame_hdr layout. It interprets only what a call-site unwind on x86-64 needs (the CFA, rbp and
// the return-address column) and answers kUnsupported for anything it does not understand, so a
// wrong answer is never guessed.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "track/frame_rules.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>

#include "track/frame_rule_store.h"
#include "track/populate.h"
#include "track/spin_lock.h"

namespace poolscope {
namespace track {

namespace {

// DWARF register numbers on x86-64.
constexpr uint64_t kRegRbp = 6;
constexpr uint64_t kRegRsp = 7;

// Pointer encodings (DW_EH_PE_*).
constexpr uint8_t kPeOmit = 0xff;
constexpr uint8_t kPeAbsptr = 0x00;
constexpr uint8_t kPeUleb128 = 0x01;
constexpr uint8_t kPeUdata2 = 0x02;
constexpr uint8_t kPeUdata4 = 0x03;
constexpr uint8_t kPeUdata8 = 0x04;
constexpr uint8_t kPeSleb128 = 0x09;
constexpr uint8_t kPeSdata2 = 0x0a;
constexpr uint8_t kPeSdata4 = 0x0b;
constexpr uint8_t kPeSdata8 = 0x0c;
constexpr uint8_t kPePcrel = 0x10;
constexpr uint8_t kPeDatarel = 0x30;
constexpr uint8_t kPeIndirect = 0x80;

// DWARF expression opcodes the realignment pattern uses.
constexpr uint8_t kOpBreg6 = 0x76;
constexpr uint8_t kOpDeref = 0x06;

// A bounded reader over mapped CFI bytes; any overrun marks it bad and reads zeros.
struct Reader {
  const uint8_t* p;
  const uint8_t* end;
  bool bad = false;

  bool AtEnd() const { return p >= end; }
  uint8_t U8() {
    if (p >= end) {
      bad = true;
      return 0;
    }
    return *p++;
  }
  template <typename T>
  T Fixed() {
    if (end - p < static_cast<long>(sizeof(T))) {
      bad = true;
      p = end;
      return 0;
    }
    T v;
    memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  uint64_t Uleb() {
    // One byte, the common case (DW_CFA_def_cfa_offset of a push or a pop, register numbers).
    if (p < end && *p < 0x80) return *p++;
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b = U8();
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    bad = true;
    return v;
  }
  int64_t Sleb() {
    uint64_t v = 0;
    int shift = 0;
    uint8_t b;
    do {
      b = U8();
      if (shift < 64) v |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
    } while ((b & 0x80) != 0 && !bad);
    if (shift < 64 && (b & 0x40) != 0) v |= ~uint64_t{0} << shift;
    return static_cast<int64_t>(v);
  }
  void Skip(uint64_t n) {
    if (static_cast<uint64_t>(end - p) < n) {
      bad = true;
      p = end;
      return;
    }
    p += n;
  }
  // An encoded pointer; `datarel` is the base for DW_EH_PE_datarel (the .eh_frame_hdr's start).
  // Returns false for encodings a local unwind never meets (textrel, funcrel, aligned).
  bool Pointer(uint8_t enc, uintptr_t datarel, uintptr_t* out) {
    const uintptr_t here = reinterpret_cast<uintptr_t>(p);
    uint64_t v;
    switch (enc & 0x0f) {
      case kPeAbsptr:
        v = Fixed<uint64_t>();
        break;
      case kPeUleb128:
        v = Uleb();
        break;
      case kPeUdata2:
        v = Fixed<uint16_t>();
        break;
      case kPeUdata4:
        v = Fixed<uint32_t>();
        break;
      case kPeUdata8:
        v = Fixed<uint64_t>();
        break;
      case kPeSleb128:
        v = static_cast<uint64_t>(Sleb());
        break;
      case kPeSdata2:
        v = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int16_t>()));
        break;
      case kPeSdata4:
        v = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int32_t>()));
        break;
      case kPeSdata8:
        v = Fixed<uint64_t>();
        break;
      default:
        return false;
    }
    switch (enc & 0x70) {
      case 0:
        break;
      case kPePcrel:
        v += here;
        break;
      case kPeDatarel:
        v += datarel;
        break;
      default:
        return false;
    }
    if (enc & kPeIndirect) {
      if (v == 0) return false;
      memcpy(&v, reinterpret_cast<const void*>(v), sizeof(v));
    }
    *out = static_cast<uintptr_t>(v);
    return !bad;
  }
};

// How one register is recovered, as far as this reader cares.
enum class RegRule : uint8_t { kSame, kUndefined, kAtCfa, kAtRbp, kOther };

// The CFA's register as a Row keeps it: rsp or rbp, or kRegOther for any other (a rule never uses it).
constexpr uint8_t kRegOther = 0xff;
inline uint8_t CfaReg(uint64_t reg) { return reg == kRegRsp || reg == kRegRbp ? static_cast<uint8_t>(reg) : kRegOther; }

// (The small fields last: 32 bytes, and a reader keeps eleven on its stack.)
struct Row {
  int64_t cfa_off = 8;
  int64_t rbp_off = 0;
  int64_t ra_off = 0;
  bool cfa_deref = false;  // CFA = *(rbp + cfa_off) (DW_OP_breg6 off; DW_OP_deref)
  bool cfa_other = false;  // any other CFA expression
  RegRule rbp = RegRule::kSame;
  RegRule ra = RegRule::kSame;
  uint8_t cfa_reg = kRegRsp;
};

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint64_t ra_reg = 16;
  uint8_t fde_enc = kPeAbsptr;
  bool has_aug_data = false;
  bool signal_frame = false;
  const uint8_t* insns = nullptr;
  const uint8_t* insns_end = nullptr;
};

// Reads an entry's length; sets *body to the first byte after it and *end past the entry.
bool EntryBounds(const uint8_t* entry, const uint8_t** body, const uint8_t** end) {
  uint32_t len32;
  memcpy(&len32, entry, 4);
  if (len32 == 0) return false;  // terminator
  if (len32 == 0xffffffffu) {
    uint64_t len64;
    memcpy(&len64, entry + 4, 8);
    *body = entry + 12;
    *end = *body + len64;
  } else {
    *body = entry + 4;
    *end = *body + len32;
  }
  return true;
}

bool ParseCie(const uint8_t* entry, Cie* cie) {
  const uint8_t* body;
  const uint8_t* end;
  if (!EntryBounds(entry, &body, &end)) return false;
  Reader r{body, end};
  if (r.Fixed<uint32_t>() != 0) return false;  // not a CIE
  const uint8_t version = r.U8();
  if (version != 1 && version != 3 && version != 4) return false;
  const char* aug = reinterpret_cast<const char*>(r.p);
  const size_t aug_len = strnlen(aug, static_cast<size_t>(end - r.p));
  r.Skip(aug_len + 1);
  if (version == 4) r.Skip(2);  // address size, segment selector size
  cie->code_align = r.Uleb();
  cie->data_align = r.Sleb();
  cie->ra_reg = version == 1 ? r.U8() : r.Uleb();
  const uint8_t* aug_end = nullptr;
  for (size_t i = 0; i < aug_len && !r.bad; ++i) {
    switch (aug[i]) {
      case 'z': {
        if (i != 0) return false;
        uint64_t n = r.Uleb();
        cie->has_aug_data = true;
        aug_end = r.p + n;
        break;
      }
      case 'L':
        r.U8();
        break;
      case 'R':
        cie->fde_enc = r.U8();
        break;
      case 'P': {
        uint8_t enc = r.U8();
        uintptr_t ignored;
        // The personality pointer is not needed; an indirect one must not be followed, so read it
        // without the indirection.
        if (!r.Pointer(enc & 0x7f, 0, &ignored)) return false;
        break;
      }
      case 'S':
        cie->signal_frame = true;
        break;
      default:
        // Unknown augmentation: with 'z' its data can be skipped, without it nothing can be read.
        if (aug_end == nullptr) return false;
        r.p = aug_end;
        i = aug_len;
        break;
    }
  }
  if (aug_end != nullptr) r.p = aug_end;
  if (r.bad || r.p > end) return false;
  cie->insns = r.p;
  cie->insns_end = end;
  return true;
}

// Where a whole function's rows go: told each row with the location it starts at (RowsSink below). An
// interpretation up to one pc keeps no rows (NoRows): Execute is a template over the sink, so that the
// rows' hand-over is inlined where there is one and gone where there is none.
struct NoRows {
  static constexpr bool kKeeps = false;
  void Emit(uintptr_t, const Row&) {}
};

// Runs CFA instructions from `r` until the location passes `target`. `initial` is the row after the
// CIE's instructions (for DW_CFA_restore); `loc` the current location. With a sink, every row is handed
// to it as the location moves past it (the row in effect at the end is the caller's to emit).
// `stack` holds kMaxRemembered rows for DW_CFA_remember_state: the caller's, so that the function
// store's reads keep it in static memory and a capture's deepest frame stays small.
constexpr int kMaxRemembered = 8;
template <typename Sink = NoRows>
bool Execute(Reader r, const Cie& cie, uintptr_t target, uintptr_t* loc, const Row& initial, Row* row, Row* stack,
             Sink* sink = nullptr) {
  int depth = 0;
  auto set_reg = [&](uint64_t reg, RegRule rule, int64_t off) {
    if (reg == kRegRbp) {
      row->rbp = rule;
      row->rbp_off = off;
    } else if (reg == cie.ra_reg) {
      row->ra = rule;
      row->ra_off = off;
    }
  };
  auto restore_reg = [&](uint64_t reg) {
    if (reg == kRegRbp) {
      row->rbp = initial.rbp;
      row->rbp_off = initial.rbp_off;
    } else if (reg == cie.ra_reg) {
      row->ra = initial.ra;
      row->ra_off = initial.ra_off;
    }
  };
  auto advance = [&](uint64_t delta) {
    if (Sink::kKeeps && delta != 0) sink->Emit(*loc, *row);
    *loc += delta * cie.code_align;
    return *loc <= target;
  };
  while (!r.AtEnd() && !r.bad) {
    const uint8_t op = r.U8();
    const uint8_t low = op & 0x3f;
    switch (op >> 6) {
      case 1:  // DW_CFA_advance_loc
        if (!advance(low)) return true;
        continue;
      case 2:  // DW_CFA_offset
        set_reg(low, RegRule::kAtCfa, static_cast<int64_t>(r.Uleb()) * cie.data_align);
        continue;
      case 3:  // DW_CFA_restore
        restore_reg(low);
        continue;
      default:
        break;
    }
    switch (op) {
      case 0x00:  // DW_CFA_nop
        break;
      case 0x01: {  // DW_CFA_set_loc
        uintptr_t to;
        if (!r.Pointer(cie.fde_enc, 0, &to)) return false;
        if (to > target) return true;
        if (Sink::kKeeps && to != *loc) sink->Emit(*loc, *row);
        *loc = to;
        break;
      }
      case 0x02:  // DW_CFA_advance_loc1
        if (!advance(r.U8())) return true;
        break;
      case 0x03:  // DW_CFA_advance_loc2
        if (!advance(r.Fixed<uint16_t>())) return true;
        break;
      case 0x04:  // DW_CFA_advance_loc4
        if (!advance(r.Fixed<uint32_t>())) return true;
        break;
      case 0x05: {  // DW_CFA_offset_extended
        uint64_t reg = r.Uleb();
        set_reg(reg, RegRule::kAtCfa, static_cast<int64_t>(r.Uleb()) * cie.data_align);
        break;
      }
      case 0x06:  // DW_CFA_restore_extended
        restore_reg(r.Uleb());
        break;
      case 0x07:  // DW_CFA_undefined
        set_reg(r.Uleb(), RegRule::kUndefined, 0);
        break;
      case 0x08:  // DW_CFA_same_value
        set_reg(r.Uleb(), RegRule::kSame, 0);
        break;
      case 0x09: {  // DW_CFA_register
        uint64_t reg = r.Uleb();
        r.Uleb();
        set_reg(reg, RegRule::kOther, 0);
        break;
      }
      case 0x0a:  // DW_CFA_remember_state
        if (depth == kMaxRemembered) return false;
        stack[depth++] = *row;
        break;
      case 0x0b:  // DW_CFA_restore_state (the CFA rule included, as GCC's code relies on)
        if (depth == 0) return false;
        *row = stack[--depth];
        break;
      case 0x0c:  // DW_CFA_def_cfa
        row->cfa_reg = CfaReg(r.Uleb());
        row->cfa_off = static_cast<int64_t>(r.Uleb());
        row->cfa_deref = row->cfa_other = false;
        break;
      case 0x0d:  // DW_CFA_def_cfa_register
        row->cfa_reg = CfaReg(r.Uleb());
        row->cfa_deref = row->cfa_other = false;
        break;
      case 0x0e:  // DW_CFA_def_cfa_offset
        row->cfa_off = static_cast<int64_t>(r.Uleb());
        break;
      case 0x0f: {  // DW_CFA_def_cfa_expression
        uint64_t n = r.Uleb();
        Reader e{r.p, r.p + n};
        r.Skip(n);
        row->cfa_deref = false;
        row->cfa_other = true;
        if (e.U8() == kOpBreg6) {
          int64_t off = e.Sleb();
          if (e.U8() == kOpDeref && e.AtEnd() && !e.bad) {
            row->cfa_reg = kRegRbp;
            row->cfa_off = off;
            row->cfa_deref = true;
            row->cfa_other = false;
          }
        }
        break;
      }
      case 0x10: {  // DW_CFA_expression
        uint64_t reg = r.Uleb();
        uint64_t n = r.Uleb();
        Reader e{r.p, r.p + n};
        r.Skip(n);
        RegRule rule = RegRule::kOther;
        int64_t off = 0;
        if (e.U8() == kOpBreg6) {
          off = e.Sleb();
          if (e.AtEnd() && !e.bad) rule = RegRule::kAtRbp;
        }
        set_reg(reg, rule, off);
        break;
      }
      case 0x11: {  // DW_CFA_offset_extended_sf
        uint64_t reg = r.Uleb();
        set_reg(reg, RegRule::kAtCfa, r.Sleb() * cie.data_align);
        break;
      }
      case 0x12:  // DW_CFA_def_cfa_sf
        row->cfa_reg = CfaReg(r.Uleb());
        row->cfa_off = r.Sleb() * cie.data_align;
        row->cfa_deref = row->cfa_other = false;
        break;
      case 0x13:  // DW_CFA_def_cfa_offset_sf
        row->cfa_off = r.Sleb() * cie.data_align;
        break;
      case 0x14:  // DW_CFA_val_offset
      case 0x15: {  // DW_CFA_val_offset_sf
        uint64_t reg = r.Uleb();
        if (op == 0x14) {
          r.Uleb();
        } else {
          r.Sleb();
        }
        set_reg(reg, RegRule::kOther, 0);
        break;
      }
      case 0x16: {  // DW_CFA_val_expression
        uint64_t reg = r.Uleb();
        r.Skip(r.Uleb());
        set_reg(reg, RegRule::kOther, 0);
        break;
      }
      case 0x2e:  // DW_CFA_GNU_args_size
        r.Uleb();
        break;
      case 0x2f: {  // DW_CFA_GNU_negative_offset_extended
        uint64_t reg = r.Uleb();
        set_reg(reg, RegRule::kAtCfa, -static_cast<int64_t>(r.Uleb()) * cie.data_align);
        break;
      }
      default:
        return false;
    }
  }
  return !r.bad;
}

bool FitsInt16(int64_t v) { return v >= INT16_MIN && v <= INT16_MAX; }
bool FitsInt32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

FrameRule Pack(const Row& row) {
  if (row.ra == RegRule::kUndefined) return kRuleOutermost;
  if (row.cfa_other || (row.cfa_reg != kRegRsp && row.cfa_reg != kRegRbp)) return kRuleUnsupported;
  if (row.ra != RegRule::kAtCfa || row.ra_off != -8) return kRuleUnsupported;
  if (!FitsInt32(row.cfa_off) || !FitsInt16(row.rbp_off)) return kRuleUnsupported;
  uint64_t rbp;
  switch (row.rbp) {
    case RegRule::kSame:
      rbp = kRbpUnchanged;
      break;
    case RegRule::kAtCfa:
      rbp = kRbpAtCfa;
      break;
    case RegRule::kAtRbp:
      rbp = kRbpAtRbp;
      break;
    default:
      return kRuleUnsupported;
  }
  FrameRule r = kRuleStep | (rbp << kRuleRbpShift);
  if (row.cfa_reg == kRegRbp) r |= kRuleCfaOnRbp;
  if (row.cfa_deref) r |= kRuleCfaDeref;
  r |= static_cast<uint64_t>(static_cast<uint16_t>(static_cast<int16_t>(row.rbp_off))) << 16;
  r |= static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(row.cfa_off))) << 32;
  return r;
}

// Finds the FDE covering pc through the object's .eh_frame_hdr search table.
const uint8_t* FindFde(uintptr_t pc) {
  struct dl_find_object obj;
  if (_dl_find_object(reinterpret_cast<void*>(pc), &obj) != 0 || obj.dlfo_eh_frame == nullptr) {
    return nullptr;
  }
  const uint8_t* hdr = static_cast<const uint8_t*>(obj.dlfo_eh_frame);
  const uintptr_t base = reinterpret_cast<uintptr_t>(hdr);
  if (hdr[0] != 1) return nullptr;
  const uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
  // The table is an array of (initial location, FDE) pairs of 4-byte offsets from the header: the
  // only layout GNU ld and lld write. Anything else: no answer.
  if (table_enc != (kPeDatarel | kPeSdata4) || count_enc == kPeOmit) return nullptr;
  Reader r{hdr + 4, hdr + 4 + 16};
  uintptr_t eh_frame, count;
  if (!r.Pointer(ptr_enc, base, &eh_frame) || !r.Pointer(count_enc, base, &count) || count == 0) {
    return nullptr;
  }
  const int32_t* table = reinterpret_cast<const int32_t*>(r.p);
  const int64_t rel = static_cast<int64_t>(pc - base);
  size_t lo = 0, hi = count;  // the last entry whose start is <= pc
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (table[2 * mid] <= rel) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  if (table[2 * lo] > rel) return nullptr;
  return hdr + table[2 * lo + 1];
}

using frame_rules_internal::g_table;
using frame_rules_internal::Hash;
using frame_rules_internal::kTableSize;
using frame_rules_internal::Slot;

constexpr int kMaxProbe = 16;
constexpr uintptr_t kClaiming = 1;  // a slot being claimed: its pc is not written yet

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

alignas(64) uint8_t g_arena[kArenaBytes];
// A slot: the arena offset + 1 of a record in its low kOffsetBits, and above them bits of the FDE's hash
// that the slot's home does not say (a probe passes other functions' slots without reading their
// records); 0 when empty.
constexpr int kOffsetBits = 21;
static_assert(kArenaBytes < (size_t{1} << kOffsetBits), "arena offsets fit a slot");
constexpr uint32_t kOffsetMask = (uint32_t{1} << kOffsetBits) - 1;
uint32_t g_functions[size_t{1} << kMaxFunctionBits];
int g_function_bits = kFirstFunctionBits;
size_t g_arena_used = 0;
size_t g_arena_populated = 0;  // the arena's bytes faulted in
constexpr size_t kArenaAhead = size_t{64} << 10;
size_t g_nfunctions = 0;
FrameRule g_rules[kRuleSlots];           // the distinct rules, by index
uint16_t g_rule_slots[kRuleSlots];       // index + 1 of a rule, by hash of the rule, or 0
uint32_t g_nrules = 0;
uint16_t g_scratch[kMaxRows];  // the rule indices of the function being read
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
                                    reinterpret_cast<uintptr_t>(offsets) + kPageBytes, arena + kArenaBytes, kArenaAhead) -
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

namespace frame_rules_internal {
Slot g_table[kTableSize];
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

// Half of the table's slots are filled: the next table, twice as large, from now on. The rules cached
// so far stay in the smaller tables, where a miss looks for them (InSmallerTables) before it computes
// the rule again. (A claimed slot never changes its pc, so no reader can see a slot emptied under it.)
void MaybeDouble(int bits) {
  if (bits >= kTableBits) return;
  if (g_filled.fetch_add(1, std::memory_order_relaxed) + 1 < (size_t{1} << bits) / 2) return;
  PopulateSlots(bits + 1);
  if (!g_bits.compare_exchange_strong(bits, bits + 1, std::memory_order_acq_rel)) return;
  g_filled.store(0, std::memory_order_relaxed);
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
  // The neighbourhood is full: answer without caching.
  FrameRule known = InSmallerTables(pc, bits);
  return known != 0 ? known : StoredOrComputed(pc);
}

uint64_t FrameRulesComputed() { return g_computed.load(std::memory_order_relaxed); }

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
  {
    SpinLockHolder h(&g_functions_lock);
    ForgetFunctionsLocked();
  }
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
