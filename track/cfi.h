// File: track/cfi.h
//
// The reader of .eh_frame call frame information that frame_rules.cc computes rules with. It follows
// the DWARF 4 "Call Frame Information" chapter and the LSB's .eh_frame and .eh_frame_hdr layout,
// interprets only what a call-site unwind on x86-64 needs (the CFA, rbp and the return-address
// column) and answers kRuleUnsupported for anything it does not understand, so a wrong answer is
// never guessed. Inline: a rule is computed inside malloc, on a thread's stack of 16 KiB, where each
// frame counts; the callers inline it as they did when it lived in their file.
//
// Thread-safety: reads mapped CFI only; no state.
#ifndef POOLSCOPE_TRACK_CFI_H_
#define POOLSCOPE_TRACK_CFI_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "track/frame_rules.h"

namespace poolscope {
namespace track {
namespace cfi {


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
inline bool EntryBounds(const uint8_t* entry, const uint8_t** body, const uint8_t** end) {
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

inline bool ParseCie(const uint8_t* entry, Cie* cie) {
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

inline bool FitsInt16(int64_t v) { return v >= INT16_MIN && v <= INT16_MAX; }
inline bool FitsInt32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

inline FrameRule Pack(const Row& row) {
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

// Finds the FDE covering pc through the object's .eh_frame_hdr search table; nullptr when none.
const uint8_t* FindFde(uintptr_t pc);

}  // namespace cfi
}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_CFI_H_
