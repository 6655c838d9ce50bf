// File: track/symbolizer.cc
#include "track/symbolizer.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace poolscope {
namespace track {

namespace {

constexpr char kDebugRoot[] = "/usr/lib/debug";

int TryOpen(const std::string& path, char** found) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) *found = strdup(path.c_str());
  return fd;
}

// $XDG_CACHE_HOME/poolscope/<sub>, else $HOME/.cache/poolscope/<sub>, made (0700) if missing: "debug"
// for uncompressed copies of debug files, "symbols" for answers already found. Empty when neither
// variable is usable or the directory cannot be made.
std::string CacheDir(const char* sub) {
  std::string base;
  const char* xdg = getenv("XDG_CACHE_HOME");
  const char* home = getenv("HOME");
  if (xdg != nullptr && xdg[0] == '/') {
    base = xdg;
  } else if (home != nullptr && home[0] == '/') {
    base = std::string(home) + "/.cache";
  } else {
    return std::string();
  }
  for (const std::string& dir : {base, base + "/poolscope", base + "/poolscope/" + sub}) {
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return std::string();
  }
  return base + "/poolscope/" + sub;
}

std::string HexBytes(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

// Where Debian's -dbg packages put the separate debug file of the object with build id `hex`.
std::string BuildIdDebugPath(const std::string& hex) {
  return std::string(kDebugRoot) + "/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug";
}

// The GNU build id of the loaded object whose segments hold `pc`, read from its PT_NOTE segments in
// memory (no file is opened). Empty when the object has none.
struct BuildIdQuery {
  uintptr_t pc;
  std::string hex;
};

int FindBuildId(struct dl_phdr_info* info, size_t, void* arg) {
  auto* q = static_cast<BuildIdQuery*>(arg);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    holds = ph.p_type == PT_LOAD && q->pc >= lo && q->pc < lo + ph.p_memsz;
  }
  if (!holds) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (end - p >= static_cast<long>(sizeof(ElfW(Nhdr)))) {
      ElfW(Nhdr) nh;
      memcpy(&nh, p, sizeof(nh));
      const char* name = p + sizeof(nh);
      const char* desc = name + ((nh.n_namesz + 3) & ~3u);
      const char* next = desc + ((nh.n_descsz + 3) & ~3u);
      if (next > end) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
        q->hex = HexBytes(reinterpret_cast<const unsigned char*>(desc), nh.n_descsz);
        return 1;
      }
      p = next;
    }
  }
  return 1;
}

bool HasCompressedSections(Elf* e) {
  for (Elf_Scn* scn = elf_nextscn(e, nullptr); scn != nullptr; scn = elf_nextscn(e, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) != nullptr && (shdr.sh_flags & SHF_COMPRESSED) != 0) return true;
  }
  return false;
}

// Writes `in` to `path` with every compressed section decompressed; false on any failure.
bool WriteUncompressed(Elf* in, const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = false;
  Elf* out = elf_begin(fd, ELF_C_WRITE, nullptr);
  GElf_Ehdr ehdr;
  size_t shstrndx, phnum;
  do {
    if (out == nullptr || gelf_getehdr(in, &ehdr) == nullptr || elf_getshdrstrndx(in, &shstrndx) != 0 ||
        elf_getphdrnum(in, &phnum) != 0 || gelf_newehdr(out, gelf_getclass(in)) == nullptr) {
      break;
    }
    if (phnum > 0) {
      if (gelf_newphdr(out, phnum) == nullptr) break;
      size_t i = 0;
      for (; i < phnum; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(in, static_cast<int>(i), &ph) == nullptr ||
            gelf_update_phdr(out, static_cast<int>(i), &ph) == 0) {
          break;
        }
      }
      if (i != phnum) break;
    }
    bool copied = true;
    for (Elf_Scn* scn = elf_nextscn(in, nullptr); scn != nullptr && copied; scn = elf_nextscn(in, scn)) {
      GElf_Shdr shdr;
      Elf_Scn* dst = elf_newscn(out);
      copied = dst != nullptr && gelf_getshdr(scn, &shdr) != nullptr && gelf_update_shdr(dst, &shdr) != 0;
      if (!copied) break;
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (data == nullptr) continue;  // an empty section: its header is all there is
      Elf_Data* copy = elf_newdata(dst);
      copied = copy != nullptr;
      if (!copied) break;
      *copy = *data;
      if ((shdr.sh_flags & SHF_COMPRESSED) != 0) copied = elf_compress(dst, 0, 0) == 1;
    }
    if (!copied) break;
    ehdr.e_shstrndx = shstrndx < SHN_LORESERVE ? static_cast<GElf_Half>(shstrndx) : SHN_XINDEX;
    if (gelf_update_ehdr(out, &ehdr) == 0) break;
    ok = elf_update(out, ELF_C_WRITE) >= 0;
  } while (false);
  if (out != nullptr) elf_end(out);
  if (close(fd) != 0) ok = false;
  return ok;
}

// Debian's separate debug files keep their DWARF zlib-compressed, and libdw inflates whole sections on
// the first line lookup in them: about 50 ms for libc's, paid by every process that writes a report
// naming a libc frame (nearly all of them). So the first process writes an uncompressed copy under
// CacheDir("debug"), named by build id and renamed into place whole, and later ones map that copy.
// Returns `fd` itself when the file is not compressed or no copy can be had.
int UncompressedDebugFile(int fd, const unsigned char* id, int id_len, char** found) {
  Elf* e = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (e == nullptr) return fd;
  const bool compressed = HasCompressedSections(e);
  std::string dir = compressed ? CacheDir("debug") : std::string();
  if (dir.empty()) {
    elf_end(e);
    return fd;
  }
  const std::string path = dir + "/" + HexBytes(id, static_cast<size_t>(id_len)) + ".debug";
  int cached = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (cached < 0) {
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    if (WriteUncompressed(e, tmp) && rename(tmp.c_str(), path.c_str()) == 0) {
      cached = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    } else {
      unlink(tmp.c_str());
    }
  }
  elf_end(e);
  if (cached < 0) return fd;
  // The copy must carry the build id it is named by (a stale or foreign file is ignored).
  bool same = false;
  if (Elf* c = elf_begin(cached, ELF_C_READ_MMAP, nullptr)) {
    const void* cid = nullptr;
    ssize_t n = dwelf_elf_gnu_build_id(c, &cid);
    same = n == id_len && memcmp(cid, id, static_cast<size_t>(n)) == 0 && !HasCompressedSections(c);
    elf_end(c);
  }
  if (!same) {
    close(cached);
    return fd;
  }
  close(fd);
  free(*found);
  *found = strdup(path.c_str());
  return cached;
}

// Dwfl_Callbacks::find_debuginfo, local only: the build-id tree, then the .gnu_debuglink places GDB
// looks in. Returns an open fd (libdwfl validates and owns it) or -1.
int FindLocalDebuginfo(Dwfl_Module* mod, void**, const char*, Dwarf_Addr, const char* file_name,
                       const char* debuglink_file, GElf_Word, char** debuginfo_file_name) {
  const unsigned char* id = nullptr;
  GElf_Addr id_vaddr;
  int id_len = dwfl_module_build_id(mod, &id, &id_vaddr);
  if (id_len > 1) {
    int fd = TryOpen(BuildIdDebugPath(HexBytes(id, static_cast<size_t>(id_len))), debuginfo_file_name);
    if (fd >= 0) return UncompressedDebugFile(fd, id, id_len, debuginfo_file_name);
  }
  if (debuglink_file != nullptr && file_name != nullptr) {
    std::string dir = file_name;
    size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? "." : dir.substr(0, slash);
    for (const std::string& path : {dir + "/" + debuglink_file, dir + "/.debug/" + debuglink_file,
                                     std::string(kDebugRoot) + dir + "/" + debuglink_file}) {
      if (path == file_name) continue;
      int fd = TryOpen(path, debuginfo_file_name);
      if (fd >= 0) return id_len > 1 ? UncompressedDebugFile(fd, id, id_len, debuginfo_file_name) : fd;
    }
  }
  return -1;
}

char* g_debuginfo_path = nullptr;

const Dwfl_Callbacks kCallbacks = {
    dwfl_linux_proc_find_elf,
    FindLocalDebuginfo,
    nullptr,  // section_address: only for ET_REL (kernel modules)
    &g_debuginfo_path,
};

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

// Answers already found for one object (one build id, with or without its debug file), kept on disk
// so that the next process that loads the same object needs neither libdwfl nor the object's tables
// for them. One line per address: offset from the object's start, has_symbol, line, object_offset,
// function, file, tab-separated. Processes append their new answers with one write(2) each; a line
// that does not parse is skipped.
struct SymbolTable {
  std::string path;
  std::unordered_map<uintptr_t, SymbolizedFrame> entries;
  std::string pending;

  void Load() {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> fields;
      std::stringstream ss(line);
      std::string field;
      while (std::getline(ss, field, '\t')) fields.push_back(field);
      if (line.empty() || line.back() == '\t') fields.push_back(std::string());
      if (fields.size() != 6) continue;
      char* end = nullptr;
      const uintptr_t off = strtoull(fields[0].c_str(), &end, 16);
      if (*end != '\0' || (fields[1] != "0" && fields[1] != "1")) continue;
      SymbolizedFrame f;
      f.has_symbol = fields[1] == "1";
      f.line = atoi(fields[2].c_str());
      f.object_offset = strtoull(fields[3].c_str(), &end, 16);
      if (*end != '\0') continue;
      f.function = fields[4];
      f.file = fields[5];
      entries[off] = f;
    }
  }

  void Add(uintptr_t off, const SymbolizedFrame& f) {
    if (f.function.find_first_of("\t\n") != std::string::npos || f.file.find_first_of("\t\n") != std::string::npos) {
      return;
    }
    char head[80];
    snprintf(head, sizeof(head), "%" PRIxPTR "\t%d\t%d\t%" PRIxPTR "\t", off, f.has_symbol ? 1 : 0, f.line,
             f.object_offset);
    pending += head + f.function + "\t" + f.file + "\n";
    SymbolizedFrame kept = f;
    kept.object.clear();
    entries[off] = kept;
  }

  void Flush() {
    if (pending.empty()) return;
    int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
      (void)!write(fd, pending.data(), pending.size());  // one append; a short write leaves a line that does not parse
      close(fd);
    }
    pending.clear();
  }
};

struct Mapping {
  uintptr_t lo, hi;
  std::string path;
};

struct Symbolizer::Impl {
  std::mutex mu;
  Dwfl* dwfl = nullptr;
  std::unordered_map<uintptr_t, SymbolizedFrame> cache;
  std::unordered_set<uintptr_t> reported_for;  // load addresses that made us read the maps again
  std::unordered_map<uintptr_t, SymbolTable*> table_of_base;  // nullptr: no table for that object
  std::unordered_map<std::string, SymbolTable> tables;        // by file
  std::vector<Mapping> maps;
  bool symbols_dir_tried = false;
  std::string symbols_dir;

  ~Impl() {
    for (auto& kv : tables) kv.second.Flush();
  }

  void ReadMaps() {
    maps.clear();
    std::ifstream in("/proc/self/maps");
    std::string line;
    while (std::getline(in, line)) {
      unsigned long lo, hi;
      int path_at = -1;
      if (sscanf(line.c_str(), "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &path_at) < 2 || path_at < 0) continue;
      std::string path = line.substr(static_cast<size_t>(path_at));
      if (path.empty() || path[0] != '/') continue;
      maps.push_back(Mapping{lo, hi, path});
    }
  }

  // The path of the file mapped at pc, as /proc/self/maps names it (what libdwfl reports).
  std::string MappedPath(uintptr_t pc) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (attempt == 1 || maps.empty()) ReadMaps();
      for (const Mapping& m : maps) {
        if (pc >= m.lo && pc < m.hi) return m.path;
      }
    }
    return std::string();
  }

  // The on-disk table for the object at `base` (holding pc), loaded on first use; nullptr when the
  // object has no build id or there is no cache directory.
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
    if (q.hex.size() >= 4 && !symbols_dir.empty()) {
      // Whether a separate debug file exists (and which) changes the answers: it is part of the name.
      std::string stamp = "n";
      struct stat st;
      if (stat(BuildIdDebugPath(q.hex).c_str(), &st) == 0) {
        stamp = "d" + std::to_string(static_cast<long long>(st.st_mtime)) + "-" + std::to_string(static_cast<long long>(st.st_size));
      }
      const std::string file = symbols_dir + "/" + q.hex + "-" + stamp + ".sym";
      auto ins = tables.emplace(file, SymbolTable());
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
    Dl_info info;
    SymbolTable* t = nullptr;
    uintptr_t off = 0;
    if (dladdr(reinterpret_cast<void*>(pc), &info) != 0 && info.dli_fbase != nullptr) {
      const uintptr_t base = reinterpret_cast<uintptr_t>(info.dli_fbase);
      off = pc - base;
      t = TableFor(base, pc);
      if (t != nullptr) {
        auto hit = t->entries.find(off);
        if (hit != t->entries.end()) {
          SymbolizedFrame f = hit->second;
          f.object = MappedPath(pc);
          if (!f.object.empty()) return f;
        }
      }
    }
    bool from_module = false;
    SymbolizedFrame f = LookupDwfl(pc, &from_module);
    // Kept only when a later process would get the same frame back: libdwfl answered, and the object
    // path is the mapped file's.
    if (t != nullptr && from_module && f.object == MappedPath(pc)) t->Add(off, f);
    return f;
  }

  // Reads /proc/self/maps again: objects dlopen'ed since the last report become known.
  void Report() {
    if (dwfl == nullptr) dwfl = dwfl_begin(&kCallbacks);
    if (dwfl == nullptr) return;
    dwfl_report_begin(dwfl);
    dwfl_linux_proc_report(dwfl, getpid());
    dwfl_report_end(dwfl, nullptr, nullptr);
  }

  static uintptr_t ModuleStart(Dwfl_Module* mod) {
    Dwarf_Addr start = 0;
    dwfl_module_info(mod, nullptr, &start, nullptr, nullptr, nullptr, nullptr, nullptr);
    return start;
  }

  SymbolizedFrame LookupDwfl(uintptr_t pc, bool* from_module) {
    if (dwfl == nullptr) Report();
    SymbolizedFrame f;
    // The loader's word on which object holds pc, now. libdwfl's modules are /proc/self/maps as it
    // was at the last Report: an object loaded since is missing, and a module's range may have
    // swallowed an anonymous mapping next to it that a later dlopen replaced.
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(pc), &info) == 0 || info.dli_fbase == nullptr) {
      f.function = Hex(pc);  // in no loaded object (unloaded library, JIT code, garbage)
      f.object_offset = pc;
      return f;
    }
    const uintptr_t base = reinterpret_cast<uintptr_t>(info.dli_fbase);
    Dwfl_Module* mod = dwfl != nullptr ? dwfl_addrmodule(dwfl, pc) : nullptr;
    if ((mod == nullptr || ModuleStart(mod) != base) && dwfl != nullptr && reported_for.insert(base).second) {
      Report();
      mod = dwfl_addrmodule(dwfl, pc);
    }
    if (mod == nullptr || ModuleStart(mod) != base) {
      // libdwfl cannot place it: what the loader knows.
      f.object = info.dli_fname != nullptr ? info.dli_fname : "";
      f.object_offset = pc - base;
      if (info.dli_sname != nullptr) {
        f.function = Demangle(info.dli_sname);
        f.has_symbol = true;
      } else {
        const char* slash = strrchr(f.object.c_str(), '/');
        f.function = std::string(slash != nullptr ? slash + 1 : f.object.c_str()) + "+" + Hex(f.object_offset);
      }
      return f;
    }
    *from_module = true;
    const char* mainfile = nullptr;
    const char* modname = dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, &mainfile, nullptr);
    f.object = mainfile != nullptr ? mainfile : (modname != nullptr ? modname : "");
    Dwarf_Addr bias = 0;
    if (dwfl_module_getelf(mod, &bias) != nullptr) f.object_offset = pc - bias;
    const char* name = dwfl_module_addrname(mod, pc);
    if (name != nullptr) {
      f.function = Demangle(name);
      f.has_symbol = true;
    } else {
      const char* base = strrchr(f.object.c_str(), '/');
      f.function = std::string(base != nullptr ? base + 1 : f.object.c_str()) + "+" + Hex(f.object_offset);
    }
    if (Dwfl_Line* line = dwfl_module_getsrc(mod, pc)) {
      int lineno = 0;
      const char* src = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
      if (src != nullptr) {
        f.file = src;
        f.line = lineno;
      }
    }
    return f;
  }
};

Symbolizer::Symbolizer() : impl_(new Impl) {}

Symbolizer::~Symbolizer() {
  if (impl_->dwfl != nullptr) dwfl_end(impl_->dwfl);
}

SymbolizedFrame Symbolizer::SymbolizeAddress(uintptr_t pc) {
  std::lock_guard<std::mutex> l(impl_->mu);
  auto it = impl_->cache.find(pc);
  if (it != impl_->cache.end()) return it->second;
  return impl_->cache.emplace(pc, impl_->Lookup(pc)).first->second;
}

SymbolizedFrame Symbolizer::SymbolizeReturnAddress(uintptr_t ra) {
  return SymbolizeAddress(ra == 0 ? 0 : ra - 1);
}

}  // namespace track
}  // namespace poolscope
