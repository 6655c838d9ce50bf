// File: track/symbolizer.cc
//
// The public Symbolizer: answers from the on-disk tables, the loaded objects, libdwfl's modules and
// their symbol indexes (symbol_index.h); libdw itself is dw_api.h's, the debug files debug_files.h's.
#include "track/symbolizer.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "track/debug_files.h"
#include "track/dw_api.h"
#include "track/key_index.h"
#include "track/proc_maps.h"
#include "track/symbol_index.h"

namespace poolscope {
namespace track {

namespace {

std::string Hex(uintptr_t v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "0x%" PRIxPTR, v);
  return buf;
}

}  // namespace

std::string Demangle(const char* name) {
  if (name == nullptr) return std::string();
  if (name[0] == '_' && name[1] == 'Z') {
    int status = 0;
    char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status == 0 && d != nullptr) {
      std::string out(d);
      free(d);
      return out;
    }
    free(d);
  }
  return name;
}

namespace {

// A field of digits in `base` (16 or 10, the latter with an optional '-'), at most 16 of them.
bool ParseNumber(const char* p, const char* end, int base, unsigned long long* v) {
  bool negative = false;
  if (base == 10 && p < end && *p == '-') {
    negative = true;
    ++p;
  }
  if (p == end || end - p > 16) return false;
  unsigned long long x = 0;
  for (; p < end; ++p) {
    const char c = *p;
    unsigned d;
    if (c >= '0' && c <= '9') {
      d = static_cast<unsigned>(c - '0');
    } else if (base == 16 && c >= 'a' && c <= 'f') {
      d = static_cast<unsigned>(c - 'a' + 10);
    } else if (base == 16 && c >= 'A' && c <= 'F') {
      d = static_cast<unsigned>(c - 'A' + 10);
    } else {
      return false;
    }
    x = x * static_cast<unsigned>(base) + d;
  }
  *v = negative ? 0 - x : x;
  return true;
}

// Where the five tabs of a line (without its newline) are; false when it has fewer or more. memchr
// finds each in a few vector compares where a loop over the characters took one a byte.
bool FindTabs(const char* line, size_t len, const char* tab[5]) {
  const char* p = line;
  const char* const end = line + len;
  for (int i = 0; i < 5; ++i) {
    const char* t = static_cast<const char*>(memchr(p, '\t', static_cast<size_t>(end - p)));
    if (t == nullptr) return false;
    tab[i] = t;
    p = t + 1;
  }
  return memchr(p, '\t', static_cast<size_t>(end - p)) == nullptr;
}

// The offset field, the has_symbol field, and the line's shape: what indexing a line needs.
bool ParseSymbolKey(const char* line, const char* const tab[5], uintptr_t* offset) {
  unsigned long long off = 0;
  if (!ParseNumber(line, tab[0], 16, &off)) return false;
  if (tab[1] - tab[0] != 2 || (tab[0][1] != '0' && tab[0][1] != '1')) return false;
  *offset = static_cast<uintptr_t>(off);
  return true;
}

}  // namespace

bool ParseSymbolLine(const char* line, size_t len, uintptr_t* offset, SymbolizedFrame* f) {
  const char* tab[5];
  if (memchr(line, '\n', len) != nullptr || !FindTabs(line, len, tab)) return false;
  unsigned long long object_offset = 0, lineno = 0;
  uintptr_t off = 0;
  if (!ParseSymbolKey(line, tab, &off) || !ParseNumber(tab[2] + 1, tab[3], 16, &object_offset) ||
      !ParseNumber(tab[1] + 1, tab[2], 10, &lineno)) {
    return false;
  }
  *offset = off;
  if (f != nullptr) {
    f->has_symbol = tab[0][1] == '1';
    f->line = static_cast<int>(static_cast<long long>(lineno));
    f->object_offset = static_cast<uintptr_t>(object_offset);
    f->function = std::string_view(tab[3] + 1, static_cast<size_t>(tab[4] - (tab[3] + 1)));
    f->file = std::string_view(tab[4] + 1, static_cast<size_t>(line + len - (tab[4] + 1)));
    f->object = std::string_view();
  }
  return true;
}

size_t IndexSymbolTable(const char* text, size_t size, std::vector<std::pair<uintptr_t, uint32_t>>* lines) {
  size_t at = 0;
  while (at < size) {
    const char* nl = static_cast<const char*>(memchr(text + at, '\n', size - at));
    if (nl == nullptr) break;  // a last line without its newline: cut short by a short write
    const size_t len = static_cast<size_t>(nl - (text + at));
    const char* tab[5];
    uintptr_t off = 0;
    // Its key and shape only: the other numbers are read, and checked, when the line is asked for.
    if (at <= UINT32_MAX && FindTabs(text + at, len, tab) && ParseSymbolKey(text + at, tab, &off)) {
      lines->emplace_back(off, static_cast<uint32_t>(at));
    }
    at += len + 1;
  }
  return at;
}

// Answers already found for one object (one build id, with or without its debug file), kept on disk
// so that the next process that loads the same object needs neither libdwfl nor the object's tables
// for them. One line per address: offset from the object's start, has_symbol, line, object_offset,
// function, file, tab-separated. Processes append their new answers with one write(2) each; a line
// that does not parse, or a last line without its newline, is skipped. The file is mapped (its pages
// are the page cache's: a copy into fresh heap pages cost a short process's report more than the
// rest of reading it) and indexed by offset; a line becomes a frame only when its address is asked
// for, its strings views of the mapping. Processes only append to the file, so the part mapped stays
// as it was while this one reads it.
struct SymbolTable {
  std::string path;
  const char* file = nullptr;  // the file's complete lines, mapped (nullptr: none)
  size_t file_bytes = 0;       // of complete lines
  size_t map_bytes = 0;
  std::string added;           // the lines this process added (their frames' strings are kept elsewhere)
  KeyIndex lines;              // offset -> start of its line: in `file`, or kAdded + its start in `added`
  std::string pending;
  bool cut = false;  // the file ends inside a line: the next append starts with a newline

  static constexpr uint32_t kAdded = uint32_t{1} << 31;

  SymbolTable() = default;
  SymbolTable(const SymbolTable&) = delete;
  SymbolTable& operator=(const SymbolTable&) = delete;
  ~SymbolTable() {
    if (map_bytes != 0) munmap(const_cast<char*>(file), map_bytes);
  }

  void Load() {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    void* map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size < static_cast<off_t>(kAdded)) {
      map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    }
    close(fd);
    if (map == MAP_FAILED) return;
    file = static_cast<const char*>(map);
    map_bytes = static_cast<size_t>(st.st_size);
    std::vector<std::pair<uintptr_t, uint32_t>> found;
    found.reserve(map_bytes / 48);  // a line of libc's table is about 60 bytes
    file_bytes = IndexSymbolTable(file, map_bytes, &found);
    lines.Reserve(found.size());
    for (const auto& entry : found) lines.Put(entry.first, entry.second);
    cut = file_bytes != map_bytes;
  }

  // *from_file: the frame's strings are views of the mapped file, which lives as long as this table.
  bool Find(uintptr_t off, SymbolizedFrame* f, bool* from_file) const {
    const uint32_t at = lines.Get(off);
    if (at == KeyIndex::kNone) return false;
    *from_file = (at & kAdded) == 0;
    const char* const text = *from_file ? file : added.data();
    const size_t size = *from_file ? file_bytes : added.size();
    const size_t start = at & ~kAdded;
    const char* line = text + start;
    const char* nl = static_cast<const char*>(memchr(line, '\n', size - start));
    uintptr_t parsed = 0;
    return nl != nullptr && ParseSymbolLine(line, static_cast<size_t>(nl - line), &parsed, f);
  }

  void Add(uintptr_t off, const SymbolizedFrame& f) {
    if (f.function.find_first_of("\t\n") != std::string::npos || f.file.find_first_of("\t\n") != std::string::npos) {
      return;
    }
    char head[80];
    snprintf(head, sizeof(head), "%" PRIxPTR "\t%d\t%d\t%" PRIxPTR "\t", off, f.has_symbol ? 1 : 0, f.line,
             f.object_offset);
    const size_t start = pending.size();
    pending.append(head).append(f.function).append(1, '\t').append(f.file).append(1, '\n');
    if (added.size() < kAdded) {
      lines.Put(off, kAdded | static_cast<uint32_t>(added.size()));
      added.append(pending, start, std::string::npos);
    }
  }

  void Flush() {
    if (pending.empty()) return;
    if (cut) pending.insert(0, "\n");  // ends the cut line, which stays unparsed, before ours
    int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
      (void)!write(fd, pending.data(), pending.size());  // one append; a short write leaves a line cut short
      close(fd);
    }
    pending.clear();
  }
};

// Which loaded object holds an address, as the dynamic loader sees it, without dladdr (which scans
// the object's whole symbol table for every address). The segments come from dl_iterate_phdr and
// are read again only when the loader's load/unload counters have moved since.
class LoadedObjects {
 public:
  // The load address of the object that holds pc (dladdr's dli_fbase: the start of its first
  // segment's page), or 0 when none does.
  uintptr_t BaseOf(uintptr_t pc) {
    RefreshIfChanged();
    auto it = std::upper_bound(segments_.begin(), segments_.end(), pc,
                               [](uintptr_t v, const Segment& s) { return v < s.lo; });
    if (it == segments_.begin()) return 0;
    --it;
    return pc < it->hi ? it->base : 0;
  }

 private:
  struct Segment {
    uintptr_t lo, hi, base;
  };
  struct Counters {
    unsigned long long adds = 0, subs = 0;
  };
  struct Walk {
    std::vector<Segment>* out;
    bool first;  // dl_iterate_phdr lists the main program first
  };

  static int ReadCounters(struct dl_phdr_info* info, size_t size, void* arg) {
    auto* c = static_cast<Counters*>(arg);
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
      c->adds = info->dlpi_adds;
      c->subs = info->dlpi_subs;
    }
    return 1;  // the counters are the same in every entry
  }

  // The loader's view of an object's extent (glibc's _dl_find_dso_for_object, which dladdr uses):
  // from its first segment's page to the end of its last segment, holes included, when its segments
  // follow each other page after page; otherwise only the bytes of its PT_LOAD segments. Whether
  // segments follow each other is judged as the loader judges it: on their file contents for a
  // library, on their memory size for the main program (mapped by the kernel).
  static int AddSegments(struct dl_phdr_info* info, size_t, void* arg) {
    auto* walk = static_cast<Walk*>(arg);
    const bool main_program = walk->first;
    walk->first = false;
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    auto up = [page](uintptr_t v) { return (v + page - 1) & ~(page - 1); };
    const size_t begin = walk->out->size();
    uintptr_t base = 0, end = 0, next_page = 0;
    bool contiguous = true, any = false;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
      const ElfW(Phdr)& ph = info->dlpi_phdr[i];
      if (ph.p_type != PT_LOAD) continue;
      const uintptr_t page_start = ph.p_vaddr & ~(page - 1);
      if (!any) {
        base = info->dlpi_addr + page_start;
      } else if (page_start != next_page) {
        contiguous = false;
      }
      any = true;
      next_page = up(ph.p_vaddr + (main_program ? ph.p_memsz : ph.p_filesz));
      end = std::max<uintptr_t>(end, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
      if (ph.p_memsz != 0) {
        const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
        walk->out->push_back(Segment{lo, lo + ph.p_memsz, 0});
      }
    }
    if (!any) return 0;
    if (contiguous) {
      walk->out->resize(begin);
      walk->out->push_back(Segment{base, end, base});
    }
    for (size_t i = begin; i < walk->out->size(); ++i) (*walk->out)[i].base = base;
    return 0;
  }

  void RefreshIfChanged() {
    Counters now;
    dl_iterate_phdr(ReadCounters, &now);
    if (read_ && now.adds == seen_.adds && now.subs == seen_.subs) return;
    read_ = true;
    seen_ = now;
    segments_.clear();
    Walk walk{&segments_, true};
    dl_iterate_phdr(AddSegments, &walk);
    std::sort(segments_.begin(), segments_.end(), [](const Segment& a, const Segment& b) { return a.lo < b.lo; });
  }

  bool read_ = false;
  Counters seen_;
  std::vector<Segment> segments_;
};

struct FileMapping {
  uintptr_t lo, hi;
  std::string_view path;  // kept in the Symbolizer's Strings
};

namespace {

// The text of a Symbolizer's answers, kept for its life: copied into chunks one after the other (a
// frame's strings are no allocations of their own), the object paths and source files once each.
class Strings {
 public:
  std::string_view Keep(std::string_view s) {
    if (s.empty()) return std::string_view();
    if (s.size() > left_) {
      const size_t room = std::max(kChunk, s.size());
      chunks_.emplace_back(new char[room]);
      at_ = chunks_.back().get();
      left_ = room;
    }
    memcpy(at_, s.data(), s.size());
    const std::string_view kept(at_, s.size());
    at_ += s.size();
    left_ -= s.size();
    return kept;
  }
  std::string_view Intern(std::string_view s) {
    auto it = interned_.find(s);
    if (it != interned_.end()) return *it;
    const std::string_view kept = Keep(s);
    interned_.insert(kept);
    return kept;
  }

 private:
  static constexpr size_t kChunk = 16 * 1024;
  std::vector<std::unique_ptr<char[]>> chunks_;
  char* at_ = nullptr;
  size_t left_ = 0;
  std::unordered_set<std::string_view> interned_;
};

// The frames a Symbolizer answered, each where it was put for the Symbolizer's life: in chunks of
// kFrames, filled in turn (a deque's chunks held seven frames, an allocation each).
class FrameStore {
 public:
  FrameStore() = default;
  FrameStore(const FrameStore&) = delete;
  FrameStore& operator=(const FrameStore&) = delete;

  const SymbolizedFrame& operator[](uint32_t i) const { return At(i); }
  // Where `f` now lies, and its number.
  uint32_t Add(const SymbolizedFrame& f) {
    if (size_ % kFrames == 0) chunks_.emplace_back(new char[kFrames * sizeof(SymbolizedFrame)]);
    new (chunks_.back().get() + size_ % kFrames * sizeof(SymbolizedFrame)) SymbolizedFrame(f);
    return size_++;
  }

 private:
  static_assert(std::is_trivially_destructible<SymbolizedFrame>::value, "frames are never destroyed");
  static constexpr uint32_t kFrames = 256;
  const SymbolizedFrame& At(uint32_t i) const {
    return *reinterpret_cast<const SymbolizedFrame*>(chunks_[i / kFrames].get() + i % kFrames * sizeof(SymbolizedFrame));
  }
  std::vector<std::unique_ptr<char[]>> chunks_;
  uint32_t size_ = 0;
};

// The last part of a path.
std::string_view BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

struct Symbolizer::Impl {
  std::mutex mu;
  bool dw_held = false;  // AcquireDw succeeded; released by ~Symbolizer
  bool dw_missing = false;  // AcquireDw failed: frames are objects and offsets
  Dwfl* dwfl = nullptr;
  Strings strings;
  KeyIndex cache_index;                 // pc -> its frame in `cache`
  FrameStore cache;
  std::unordered_set<uintptr_t> reported_for;  // load addresses that made us read the maps again
  std::unordered_map<uintptr_t, SymbolTable*> table_of_base;  // nullptr: no table for that object
  std::unordered_map<std::string, SymbolTable> tables;        // by file (made in place: never moved)
  std::vector<FileMapping> maps;  // sorted by address, as /proc/self/maps lists them
  LoadedObjects objects;
  struct ModuleNames {
    int direct_lookups = 0;              // names asked of libdwfl before the index was built
    std::unique_ptr<SymbolIndex> index;  // built on the module's kDirectLookups + 1st frame
  };
  // Building a module's index costs about as much as a few of libdwfl's whole-table walks: a module
  // with only a few frames in the report is not worth one.
  static constexpr int kDirectLookups = 4;
  std::unordered_map<Dwfl_Module*, ModuleNames> indexes;
  bool symbols_dir_tried = false;
  std::string symbols_dir;

  ~Impl() {
    for (auto& kv : tables) kv.second.Flush();
  }

  // The file mappings, read by ProcMaps (a stream's locale and a scanf a line cost a short process's
  // report more than the rest of its symbolizing).
  void ReadMaps() {
    MmapScratchMemory scratch;
    ProcMaps read(scratch);
    read.Read();  // (none when it fails)
    TakeMaps(read);
  }
  void TakeMaps(const ProcMaps& read) {
    maps.clear();
    for (size_t i = 0; i < read.size(); ++i) {
      if (read[i].path[0] == '/') maps.push_back(FileMapping{read[i].start, read[i].end, strings.Intern(read[i].path)});
    }
  }

  // The path of the file mapped at pc, as /proc/self/maps names it (what libdwfl reports).
  std::string_view MappedPath(uintptr_t pc) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (attempt == 1 || maps.empty()) ReadMaps();
      auto it = std::upper_bound(maps.begin(), maps.end(), pc, [](uintptr_t v, const FileMapping& m) { return v < m.lo; });
      if (it != maps.begin() && pc < (it - 1)->hi) return (it - 1)->path;
    }
    return std::string_view();
  }

  // The on-disk table for the object at `base` (holding pc), loaded on first use; nullptr when there
  // is no cache directory, or the object has no build id and its file cannot be identified.
  SymbolTable* TableFor(uintptr_t base, uintptr_t pc) {
    auto it = table_of_base.find(base);
    if (it != table_of_base.end()) return it->second;
    SymbolTable* t = nullptr;
    BuildIdQuery q{pc, std::string()};
    dl_iterate_phdr(FindBuildId, &q);
    if (!symbols_dir_tried) {
      symbols_dir_tried = true;
      symbols_dir = CacheDir("symbols");
    }
    std::string name;
    if (q.hex.size() >= 4) {
      // Whether a separate debug file exists (and which) changes the answers: it is part of the name.
      std::string stamp = "n";
      struct stat st;
      if (stat(BuildIdDebugPath(q.hex).c_str(), &st) == 0) {
        stamp = "d" + std::to_string(static_cast<long long>(st.st_mtime)) + "-" + std::to_string(static_cast<long long>(st.st_size));
      }
      name = q.hex + "-" + stamp;
    } else {
      name = FileIdentity(std::string(MappedPath(pc)));
    }
    if (!name.empty() && !symbols_dir.empty()) {
      const std::string file = symbols_dir + "/" + name + ".sym";
      auto ins = tables.try_emplace(file);
      t = &ins.first->second;
      if (ins.second) {
        t->path = file;
        t->Load();
      }
    }
    table_of_base[base] = t;
    return t;
  }

  SymbolizedFrame Lookup(uintptr_t pc) {
    SymbolTable* t = nullptr;
    uintptr_t off = 0;
    const uintptr_t base = objects.BaseOf(pc);
    if (base != 0) {
      off = pc - base;
      t = TableFor(base, pc);
      if (t != nullptr) {
        SymbolizedFrame f;
        bool from_file = false;
        if (t->Find(off, &f, &from_file)) {
          f.object = MappedPath(pc);
          if (!f.object.empty()) {
            if (!from_file) {
              f.function = strings.Keep(f.function);
              f.file = strings.Intern(f.file);
            }
            return f;
          }
        }
      }
    }
    bool from_module = false;
    SymbolizedFrame f = LookupDwfl(pc, base, &from_module);
    // Kept only when a later process would get the same frame back: libdwfl answered, and the object
    // path is the mapped file's.
    if (t != nullptr && from_module && f.object == MappedPath(pc)) t->Add(off, f);
    return f;
  }

  // Reads /proc/self/maps again: objects dlopen'ed since the last report become known.
  void Report() {
    if (dwfl == nullptr) {
      if (!dw_held && !dw_missing) {
        dw_held = AcquireDw();
        dw_missing = !dw_held;
      }
      if (!dw_held) return;
      g_debuginfo_callbacks.find_elf = Dw().dwfl_linux_proc_find_elf;
      dwfl = Dw().dwfl_begin(&g_debuginfo_callbacks);
    }
    if (dwfl == nullptr) return;
    Dw().dwfl_report_begin(dwfl);
    Dw().dwfl_linux_proc_report(dwfl, getpid());
    Dw().dwfl_report_end(dwfl, nullptr, nullptr);
    // Modules still mapped keep their Dwfl_Module (and their index); the others' indexes go.
    std::unordered_set<Dwfl_Module*> live;
    Dw().dwfl_getmodules(
        dwfl,
        [](Dwfl_Module* mod, void**, const char*, Dwarf_Addr, void* arg) {
          static_cast<std::unordered_set<Dwfl_Module*>*>(arg)->insert(mod);
          return static_cast<int>(DWARF_CB_OK);
        },
        &live, 0);
    for (auto it = indexes.begin(); it != indexes.end();) {
      const bool keep = live.count(it->first) != 0 && (it->second.index == nullptr || it->second.index->Describes(it->first));
      it = keep ? std::next(it) : indexes.erase(it);
    }
  }

  const char* SymbolName(Dwfl_Module* mod, uintptr_t pc) {
    ModuleNames& names = indexes[mod];
    if (names.index == nullptr) {
      if (names.direct_lookups < kDirectLookups) {
        ++names.direct_lookups;
        return Dw().dwfl_module_addrname(mod, pc);
      }
      names.index.reset(new SymbolIndex(mod));
    }
    bool sizeless = false;
    const char* name = names.index->Name(pc, &sizeless);
    return sizeless ? Dw().dwfl_module_addrname(mod, pc) : name;
  }

  static uintptr_t ModuleStart(Dwfl_Module* mod) {
    Dwarf_Addr start = 0;
    Dw().dwfl_module_info(mod, nullptr, &start, nullptr, nullptr, nullptr, nullptr, nullptr);
    return start;
  }

  // "object+0xoffset" for a frame whose object and offset are known and nothing more.
  std::string_view ObjectAndOffset(const SymbolizedFrame& f) {
    return strings.Keep(std::string(BaseName(f.object)) + "+" + Hex(f.object_offset));
  }

  // `base`: the load address of the object holding pc, 0 when no loaded object holds it.
  SymbolizedFrame LookupDwfl(uintptr_t pc, uintptr_t base, bool* from_module) {
    SymbolizedFrame f;
    // The loader's word on which object holds pc, now. libdwfl's modules are /proc/self/maps as it
    // was at the last Report: an object loaded since is missing, and a module's range may have
    // swallowed an anonymous mapping next to it that a later dlopen replaced.
    if (base == 0) {
      f.function = strings.Keep(Hex(pc));  // in no loaded object (unloaded library, JIT code, garbage)
      f.object_offset = pc;
      return f;
    }
    if (dwfl == nullptr) Report();
    if (dw_missing) {
      // Without libdw: the object and the offset in it, nothing more.
      f.object = MappedPath(pc);
      f.object_offset = pc - base;
      f.function = ObjectAndOffset(f);
      return f;
    }
    Dwfl_Module* mod = dwfl != nullptr ? Dw().dwfl_addrmodule(dwfl, pc) : nullptr;
    if ((mod == nullptr || ModuleStart(mod) != base) && dwfl != nullptr && reported_for.insert(base).second) {
      Report();
      mod = Dw().dwfl_addrmodule(dwfl, pc);
    }
    Dl_info info;
    if (mod == nullptr || ModuleStart(mod) != base) {
      // libdwfl cannot place it: what the loader knows (rare: dladdr's scan is paid only here).
      if (dladdr(reinterpret_cast<void*>(pc), &info) == 0) info = Dl_info{};
      f.object = strings.Intern(info.dli_fname != nullptr ? info.dli_fname : "");
      f.object_offset = pc - base;
      if (info.dli_sname != nullptr) {
        f.function = strings.Keep(Demangle(info.dli_sname));
        f.has_symbol = true;
      } else {
        f.function = ObjectAndOffset(f);
      }
      return f;
    }
    *from_module = true;
    const char* mainfile = nullptr;
    const char* modname = Dw().dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, &mainfile, nullptr);
    f.object = strings.Intern(mainfile != nullptr ? mainfile : (modname != nullptr ? modname : ""));
    Dwarf_Addr bias = 0;
    if (Dw().dwfl_module_getelf(mod, &bias) != nullptr) f.object_offset = pc - bias;
    const char* name = SymbolName(mod, pc);
    if (name != nullptr) {
      f.function = strings.Keep(Demangle(name));
      f.has_symbol = true;
    } else {
      f.function = ObjectAndOffset(f);
    }
    if (Dwfl_Line* line = Dw().dwfl_module_getsrc(mod, pc)) {
      int lineno = 0;
      const char* src = Dw().dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
      if (src != nullptr) {
        f.file = strings.Intern(src);
        f.line = lineno;
      }
    }
    return f;
  }
};

Symbolizer::Symbolizer() : impl_(new Impl) {}

Symbolizer::~Symbolizer() {
  if (impl_->dwfl != nullptr) Dw().dwfl_end(impl_->dwfl);
  const bool held = impl_->dw_held;
  impl_.reset();
  if (held) ReleaseDw();
}

const SymbolizedFrame& Symbolizer::AddressFrame(uintptr_t pc) {
  std::lock_guard<std::mutex> l(impl_->mu);
  const uint32_t at = impl_->cache_index.Get(pc);
  if (at != KeyIndex::kNone) return impl_->cache[at];
  const uint32_t added = impl_->cache.Add(impl_->Lookup(pc));
  impl_->cache_index.Put(pc, added);
  return impl_->cache[added];
}

void Symbolizer::UseMaps(const ProcMaps& maps) {
  std::lock_guard<std::mutex> l(impl_->mu);
  impl_->TakeMaps(maps);
}

SymbolizedFrame Symbolizer::SymbolizeAddress(uintptr_t pc) { return AddressFrame(pc); }

const SymbolizedFrame& Symbolizer::ReturnAddressFrame(uintptr_t ra) { return AddressFrame(ra == 0 ? 0 : ra - 1); }

const char* SymbolizerUnavailable() { return DwUnavailable(); }

SymbolizedFrame Symbolizer::SymbolizeReturnAddress(uintptr_t ra) {
  return SymbolizeAddress(ra == 0 ? 0 : ra - 1);
}

}  // namespace track
}  // namespace poolscope
