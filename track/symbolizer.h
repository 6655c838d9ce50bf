// File: track/symbolizer.h
//
// Turns code addresses of this process into {demangled function, object path, source file, line}, for
// the report. Runs at report time only, never on the allocation path: it allocates through the normal
// malloc (under poolscope's reentrancy guard those calls pass straight through, counted as poolscope's own in
// the report's `internal.passthrough_allocs`), opens files and reads debug info.
//
// libdw and libelf are not linked: the first address a Symbolizer cannot answer from the on-disk
// tables loads libdw.so.1 (and libelf.so.1 with it) with dlopen, RTLD_LOCAL, and the last Symbolizer
// destroyed closes it. A process that writes no report never maps them, and what loading them
// allocates is given back once the report is written. When libdw.so.1 cannot be loaded, frames are
// "object+0xoffset" with their object (SymbolizerUnavailable() says why).
//
// Why libdwfl (elfutils libdw, Debian libdw-dev): one library answers all four questions, from the
// objects actually mapped (dwfl_linux_proc_report reads /proc/self/maps, so dlopen'ed code is found):
// function names from .symtab when present and .dynsym otherwise (Debian's stripped libraries keep
// only .dynsym), file:line from DWARF line tables in the object or in a separate debug file
// (/usr/lib/debug/.build-id, installed -dbgsym packages), all DWARF versions GCC 12 emits. The
// alternatives: dladdr sees only exported (.dynsym) names, so static functions and everything in a
// non-exporting executable would be missing, and has no line numbers; Abseil's symbolizer gives names
// but no file:line, and Debian's static Abseil is not PIC; shelling out to addr2line costs a process
// per object and does not see dlopen'ed objects' load addresses.
// Separate debug files are looked up locally only (build-id and .gnu_debuglink paths): libdw's
// standard lookup would contact the debuginfod servers in DEBUGINFOD_URLS, and a profiler must not go
// to the network from inside the program it observes.
//
// Work scales with the frames symbolized, not with the size of the objects: which object holds an
// address comes from the loader's segment list (dl_iterate_phdr, read again only when a library was
// loaded or unloaded), not from dladdr, which scans the object's whole symbol table per address; a
// function name comes from a per-module index of the symbol table, sorted once and searched by
// binary search, giving exactly what dwfl_module_addrname gives (which walks the whole table per
// address). Building an index costs about as much as a few such walks, so a module's first four names
// are asked of libdwfl and its fifth builds the index: at most about twice the cheaper of the two,
// and modules no frame lands in are never read. libdwfl keeps each module's missing debug info and its line tables, so the line lookup
// costs a module without debug info one failed search, and a module with it one CU's line table.
//
// Results are cached per address. When nothing is known the function is "object+0xoffset" (offset as
// addr2line takes it), or "0x<pc>" when no mapped object contains the address (for instance a library
// unloaded before the report was written).
//
// Cost (track_benchmark, -c opt): the first address 0.4 ms (reading /proc/self/maps, the object's
// symbol and line tables); a new address in an object already read 2.9 us; a cached one 45 ns.
//
// Thread-safety: all methods may be called from any thread; one internal mutex serialises them
// (libdwfl is not thread-safe).
#ifndef POOLSCOPE_TRACK_SYMBOLIZER_H_
#define POOLSCOPE_TRACK_SYMBOLIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace poolscope {
namespace track {

// Its strings are views of text the Symbolizer that answered keeps for its life (a frame from
// ParseSymbolLine: of the line it read): a report's few thousand frames are no allocations of their
// own, and each object path and source file is kept once.
struct SymbolizedFrame {
  std::string_view function;  // demangled; "object+0xoffset" or "0x<pc>" when no symbol covers the address
  std::string_view object;    // path of the loaded object containing the address; "" when none does
  std::string_view file;      // source file as recorded in the debug info; "" without debug info
  int line = 0;          // 0 without debug info
  uintptr_t object_offset = 0;  // the address as the object's file sees it (what addr2line -e takes)
  bool has_symbol = false;      // `function` came from a symbol table
};

class ProcMaps;

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // A return address from CaptureStack: looks up ra - 1, the call instruction, so the line is the
  // call's and a call that ends a function is not attributed to the next one. The frame's strings
  // live as long as this Symbolizer.
  SymbolizedFrame SymbolizeReturnAddress(uintptr_t ra);
  // Any other code address (a function's entry, the faulting pc of a signal frame).
  SymbolizedFrame SymbolizeAddress(uintptr_t pc);
  // The same answers without a copy: the cached frame, valid as long as this Symbolizer.
  const SymbolizedFrame& ReturnAddressFrame(uintptr_t ra);
  const SymbolizedFrame& AddressFrame(uintptr_t pc);
  // Takes the process's mappings as `maps` read them just now (the exit scan's), for the objects' paths,
  // instead of reading /proc/self/maps again; an address in none of them has the maps read again.
  void UseMaps(const ProcMaps& maps);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Why libdw.so.1 could not be loaded (dlerror's text) at the last attempt, or nullptr when that
// attempt succeeded or none was made. Without it every frame is "object+0xoffset" with its object, no file:line
// (answers already in the on-disk tables excepted).
const char* SymbolizerUnavailable();

// The on-disk answer tables (symbolizer.cc): one line per address, "offset has_symbol line
// object_offset function file" tab-separated (offsets in hex, has_symbol 0 or 1, line in decimal).
// ParseSymbolLine reads one line without its newline: false when it does not parse, else *offset and,
// when f is given, *f (its object empty, its function and file views of the line). IndexSymbolTable appends (offset, start of the line) for
// each line of a table's text that has six fields and whose offset and has_symbol fields parse, in the
// text's order (the table answers with the last one for an offset; its other fields are read when it
// is asked for, and a line that does not parse then answers nothing, so the address is symbolized
// again and its new line appended), and returns the bytes of complete lines: a last line without its
// newline (a write cut short) is not read.
bool ParseSymbolLine(const char* line, size_t len, uintptr_t* offset, SymbolizedFrame* f);
size_t IndexSymbolTable(const char* text, size_t size, std::vector<std::pair<uintptr_t, uint32_t>>* lines);

// abi::__cxa_demangle, or `name` itself when it is not a mangled C++ name.
std::string Demangle(const char* name);

}  // namespace track
}  // namespace poolscope

#endif  // POOLSCOPE_TRACK_SYMBOLIZER_H_
