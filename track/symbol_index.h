// File: track/symbol_index.h
//
// SymbolIndex: a module's ELF symbol table sorted once, for the symbolizer (symbolizer.cc).
#ifndef POOLSCOPE_TRACK_SYMBOL_INDEX_H_
#define POOLSCOPE_TRACK_SYMBOL_INDEX_H_

#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "track/dw_api.h"

namespace poolscope {
namespace track {

// One module's symbol table (libdwfl's choice: .symtab when the object or its debug file has one,
// else .dynsym, plus a .gnu_debugdata table), sorted by address once, answering what
// dwfl_module_addrname answers for any address in O(log n + symbols covering the address).
// dwfl_module_addrname itself walks every symbol of the table per address.
//
// The rule reproduced (elfutils 0.188's dwfl_module_addrinfo, which dwfl_module_addrname calls):
// candidates are named symbols with a section, not STT_SECTION/FILE/TLS, at or below the address,
// valued as dwfl_module_getsym_info gives them. Global and weak symbols are searched first; locals
// only when no sized global covers the address and no sizeless global "in the address's section"
// sits exactly at it. Among the sized symbols that cover the address, in table order, a symbol
// replaces the one kept when it starts later or binds more strongly (global > weak > local), or when
// it starts at the same address and is smaller with no weaker binding. Without a covering sized
// symbol, a sizeless one in the address's section may answer: only one that no candidate below the
// address extends past (the last such in table order). "Section" is the SHF_ALLOC section of the
// main file found by libdwfl's binary search over them (a section's end address counts as inside
// it), SHN_UNDEF outside them all; absolute symbols match only their exact address. On targets
// with function descriptors (ppc64 ELFv1) libdwfl also tries a second value per function symbol,
// which this index does not: poolscope runs on x86-64. The sizeless rule matches libdwfl on every
// symbol and section bound of libc, libstdc++ and an executable, but not on a data section of
// libtsan (.fini_array): when it finds a sizeless answer, libdwfl is asked instead (return addresses
// fall in sized functions nearly always, so this stays rare).
//
// Names point into libdwfl's string tables: an index lives no longer than its Dwfl_Module.
class SymbolIndex {
 public:
  explicit SymbolIndex(Dwfl_Module* mod) : mod_(mod) {
    Dw().dwfl_module_info(mod, nullptr, &start_, &end_, nullptr, nullptr, nullptr, nullptr);
    const int n = Dw().dwfl_module_getsymtab(mod);
    const int first_global = n < 0 ? -1 : Dw().dwfl_module_getsymtab_first_global(mod);
    if (first_global < 0) return;
    locals_searched_ = first_global > 1;
    locals_.reserve(static_cast<size_t>(first_global));
    globals_.reserve(static_cast<size_t>(n - first_global));
    for (int i = 1; i < n; ++i) {
      GElf_Sym sym;
      GElf_Addr value;
      GElf_Word shndx;
      const char* name = Dw().dwfl_module_getsym_info(mod, i, &sym, &value, &shndx, nullptr, nullptr);
      if (name == nullptr || name[0] == '\0' || sym.st_shndx == SHN_UNDEF) continue;
      const int type = GELF_ST_TYPE(sym.st_info);
      if (type == STT_SECTION || type == STT_FILE || type == STT_TLS) continue;
      Entry e;
      e.value = value;
      e.size = sym.st_size;
      e.name = name;
      e.ndx = i;
      e.shndx = shndx;
      e.binding = BindingRank(GELF_ST_BIND(sym.st_info));
      (first_global == 0 || i >= first_global ? globals_ : locals_).push_back(e);
    }
    Finish(&globals_);
    Finish(&locals_);
    ReadSections(mod);
  }

  // Whether `mod` is still the module this index was built from (libdwfl may reuse the memory of a
  // module it dropped).
  bool Describes(Dwfl_Module* mod) const {
    Dwarf_Addr start = 0, end = 0;
    Dw().dwfl_module_info(mod, nullptr, &start, &end, nullptr, nullptr, nullptr, nullptr);
    return mod == mod_ && start == start_ && end == end_;
  }

  // dwfl_module_addrname(mod, addr): the symbol's name, or nullptr. Sets *sizeless when the answer is a
  // sizeless symbol: the caller asks libdwfl then (see the class comment).
  const char* Name(GElf_Addr addr, bool* sizeless) const {
    *sizeless = false;
    GElf_Addr min_label = 0;
    std::vector<const Entry*> covering;
    Covering(globals_, addr, &covering, &min_label);
    if (!covering.empty()) return Closest(covering)->name;
    const bool locals = locals_searched_ && LastSizelessAt(globals_, addr, addr) == nullptr;
    const Entry* e = nullptr;
    if (locals) {
      Covering(locals_, addr, &covering, &min_label);
      if (!covering.empty()) return Closest(covering)->name;
      e = LastSizelessAt(locals_, min_label, addr);
    }
    if (e == nullptr) e = LastSizelessAt(globals_, min_label, addr);
    *sizeless = e != nullptr;
    return e != nullptr ? e->name : nullptr;
  }

  size_t size() const { return globals_.size() + locals_.size(); }

 private:
  struct Entry {
    GElf_Addr value;
    GElf_Xword size;
    GElf_Addr max_end;  // the largest value + size over this entry and every one sorted before it
    const char* name;
    int ndx;            // position in libdwfl's table: the search order
    GElf_Word shndx;    // section index; (GElf_Word)-1 for a section without SHF_ALLOC
    int binding;
  };

  static int BindingRank(int bind) {
    return bind == STB_GLOBAL ? 3 : bind == STB_WEAK ? 2 : bind == STB_LOCAL ? 1 : 0;
  }

  static void Finish(std::vector<Entry>* v) {
    std::sort(v->begin(), v->end(),
              [](const Entry& a, const Entry& b) { return a.value != b.value ? a.value < b.value : a.ndx < b.ndx; });
    GElf_Addr max_end = 0;
    for (Entry& e : *v) {
      max_end = std::max(max_end, e.value + e.size);
      e.max_end = max_end;
    }
  }

  static std::vector<Entry>::const_iterator UpTo(const std::vector<Entry>& v, GElf_Addr addr) {
    return std::upper_bound(v.begin(), v.end(), addr, [](GElf_Addr a, const Entry& e) { return a < e.value; });
  }

  // Appends the sized entries of `v` covering addr, and raises *min_label to the largest end of the
  // entries at or below addr.
  static void Covering(const std::vector<Entry>& v, GElf_Addr addr, std::vector<const Entry*>* out,
                       GElf_Addr* min_label) {
    auto hi = UpTo(v, addr);
    if (hi == v.begin()) return;
    *min_label = std::max(*min_label, (hi - 1)->max_end);
    for (auto it = hi; it != v.begin();) {
      --it;
      if (it->max_end <= addr) break;  // nothing at or before `it` reaches addr
      if (it->size != 0 && addr - it->value < it->size) out->push_back(&*it);
    }
  }

  static const Entry* Closest(std::vector<const Entry*>& covering) {
    std::sort(covering.begin(), covering.end(), [](const Entry* a, const Entry* b) { return a->ndx < b->ndx; });
    const Entry* best = nullptr;
    for (const Entry* e : covering) {
      if (best == nullptr || best->value < e->value || best->binding < e->binding ||
          (best->value == e->value && best->size > e->size && best->binding <= e->binding)) {
        best = e;
      }
    }
    return best;
  }

  // The sizeless entry of `v` at `value`, in addr's section, last in table order; nullptr if none.
  const Entry* LastSizelessAt(const std::vector<Entry>& v, GElf_Addr value, GElf_Addr addr) const {
    const Entry* last = nullptr;
    auto lo = std::lower_bound(v.begin(), v.end(), value, [](const Entry& e, GElf_Addr a) { return e.value < a; });
    for (auto it = lo; it != v.end() && it->value == value; ++it) {
      if (it->size == 0 && (last == nullptr || it->ndx > last->ndx) && SameSection(*it, addr)) last = &*it;
    }
    return last;
  }

  // Whether the sizeless symbol e counts as in addr's section (see the class comment).
  bool SameSection(const Entry& e, GElf_Addr addr) const {
    if (e.shndx >= SHN_LORESERVE) return e.value == addr;
    return SectionOf(addr) == SectionOf(e.value);
  }

  // The main file's SHF_ALLOC sections at their loaded addresses, ordered by start (ties in section
  // order), as libdwfl searches them.
  void ReadSections(Dwfl_Module* mod) {
    Dwarf_Addr bias = 0;
    Elf* elf = Dw().dwfl_module_getelf(mod, &bias);
    if (elf == nullptr) return;
    for (Elf_Scn* scn = Dw().elf_nextscn(elf, nullptr); scn != nullptr; scn = Dw().elf_nextscn(elf, scn)) {
      GElf_Shdr shdr;
      if (Dw().gelf_getshdr(scn, &shdr) == nullptr) {
        sections_.clear();
        return;
      }
      if ((shdr.sh_flags & SHF_ALLOC) == 0) continue;
      sections_.push_back(Section{shdr.sh_addr + bias, shdr.sh_addr + bias + shdr.sh_size, Dw().elf_ndxscn(scn)});
    }
    std::stable_sort(sections_.begin(), sections_.end(), [](const Section& a, const Section& b) { return a.start < b.start; });
  }

  // libdwfl's binary search: an address at a section's end is in it unless the next one starts there.
  size_t SectionOf(GElf_Addr addr) const {
    size_t l = 0, u = sections_.size();
    while (l < u) {
      const size_t i = (l + u) / 2;
      if (addr < sections_[i].start) {
        u = i;
      } else if (addr > sections_[i].end) {
        l = i + 1;
      } else {
        return addr == sections_[i].end && i + 1 < sections_.size() && addr == sections_[i + 1].start
                   ? sections_[i + 1].ndx
                   : sections_[i].ndx;
      }
    }
    return SHN_UNDEF;
  }

  struct Section {
    GElf_Addr start, end;
    size_t ndx;
  };

  Dwfl_Module* mod_;
  Dwarf_Addr start_ = 0, end_ = 0;
  std::vector<Section> sections_;
  bool locals_searched_ = false;
  std::vector<Entry> globals_;  // global and weak symbols, and every symbol when the table is not split
  std::vector<Entry> locals_;
};

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_SYMBOL_INDEX_H_
