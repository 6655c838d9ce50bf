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

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace poolscope {
namespace track {

namespace {

// The functions of libdw and libelf the symbolizer calls, looked up in libdw.so.1 (which brings
// libelf.so.1 with it) when the first address needs them: a process that never symbolizes never maps
// either library, and one whose report finds every answer in the on-disk tables does not either.
#define POOLSCOPE_DW_FUNCTIONS(X) \
  X(dwelf_elf_gnu_build_id) \
  X(dwfl_addrmodule) \
  X(dwfl_begin) \
  X(dwfl_end) \
  X(dwfl_getmodules) \
  X(dwfl_lineinfo) \
  X(dwfl_linux_proc_find_elf) \
  X(dwfl_linux_proc_report) \
  X(dwfl_module_addrname) \
  X(dwfl_module_build_id) \
  X(dwfl_module_getelf) \
  X(dwfl_module_getsrc) \
  X(dwfl_module_getsym_info) \
  X(dwfl_module_getsymtab) \
  X(dwfl_module_getsymtab_first_global) \
  X(dwfl_module_info) \
  X(dwfl_report_begin) \
  X(dwfl_report_end) \
  X(elf_begin) \
  X(elf_compress) \
  X(elf_end) \
  X(elf_getdata) \
  X(elf_getphdrnum) \
  X(elf_getshdrstrndx) \
  X(elf_ndxscn) \
  X(elf_newdata) \
  X(elf_newscn) \
  X(elf_nextscn) \
  X(elf_update) \
  X(gelf_getclass) \
  X(gelf_getehdr) \
  X(gelf_getphdr) \
  X(gelf_getshdr) \
  X(gelf_newehdr) \
  X(gelf_newphdr) \
  X(gelf_update_ehdr) \
  X(gelf_update_phdr) \
  X(gelf_update_shdr)

struct DwApi {
#define POOLSCOPE_DW_MEMBER(name) decltype(&::name) name;
  POOLSCOPE_DW_FUNCTIONS(POOLSCOPE_DW_MEMBER)
#undef POOLSCOPE_DW_MEMBER
};

DwApi g_dw;
// Symbolizers holding the libraries (under g_dw_lock). The first loads them, the last closes them:
// what loading them allocates is given back when the report is written, so that a leak detector
// below poolscope finds none of it live at exit.
std::mutex g_dw_lock;
int g_dw_users = 0;
void* g_dw_handle = nullptr;
// Set when the last attempt to load them failed (g_dw_error says why), cleared when one succeeds.
std::atomic<bool> g_dw_failed{false};
char g_dw_error[300];

bool OpenDw() {
  void* h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);  // the program's lookups never see these names
  if (h == nullptr) {
    const char* why = dlerror();
    snprintf(g_dw_error, sizeof g_dw_error, "%s", why != nullptr ? why : "libdw.so.1: cannot be loaded");
    return false;
  }
  const char* missing = nullptr;
#define POOLSCOPE_DW_LOOKUP(name)                                      \
  g_dw.name = reinterpret_cast<decltype(&::name)>(dlsym(h, #name)); \
  if (g_dw.name == nullptr && missing == nullptr) missing = #name;
  POOLSCOPE_DW_FUNCTIONS(POOLSCOPE_DW_LOOKUP)
#undef POOLSCOPE_DW_LOOKUP
  if (missing != nullptr) {
    snprintf(g_dw_error, sizeof g_dw_error, "libdw.so.1 has no %s", missing);
    dlclose(h);
    return false;
  }
  g_dw_handle = h;
  return true;
}

// Takes a hold on the libraries, loading them if no Symbolizer holds them; false when they cannot be
// loaded (no hold taken).
bool AcquireDw() {
  std::lock_guard<std::mutex> l(g_dw_lock);
  if (g_dw_users == 0 && !OpenDw()) {
    g_dw_failed = true;
    return false;
  }
  g_dw_failed = false;
  ++g_dw_users;
  return true;
}

void ReleaseDw() {
  std::lock_guard<std::mutex> l(g_dw_lock);
  if (--g_dw_users == 0) {
    dlclose(g_dw_handle);
    g_dw_handle = nullptr;
  }
}

// Only while this Symbolizer holds the libraries (Impl::dw_held).
inline const DwApi& Dw() { return g_dw; }

}  // namespace

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

// A name for the object file at `path` when it has no build id (Rust's toolchain ships libLLVM and
// rust-lld without one): its device, inode, size and modification and change times, so that a file
// rebuilt or replaced in place gets a table of its own. Empty when the file cannot be stat'ed.
std::string FileIdentity(const std::string& path) {
  struct stat st;
  if (path.empty() || stat(path.c_str(), &st) != 0) return std::string();
  char buf[160];
  snprintf(buf, sizeof buf, "f%llx-%llx-%llx-%llx.%09ld-%llx.%09ld", static_cast<unsigned long long>(st.st_dev),
           static_cast<unsigned long long>(st.st_ino), static_cast<unsigned long long>(st.st_size),
           static_cast<unsigned long long>(st.st_mtim.tv_sec), static_cast<long>(st.st_mtim.tv_nsec),
           static_cast<unsigned long long>(st.st_ctim.tv_sec), static_cast<long>(st.st_ctim.tv_nsec));
  return buf;
}

bool HasCompressedSections(Elf* e) {
  for (Elf_Scn* scn = Dw().elf_nextscn(e, nullptr); scn != nullptr; scn = Dw().elf_nextscn(e, scn)) {
    GElf_Shdr shdr;
    if (Dw().gelf_getshdr(scn, &shdr) != nullptr && (shdr.sh_flags & SHF_COMPRESSED) != 0) return true;
  }
  return false;
}

// Writes `in` to `path` with every compressed section decompressed; false on any failure.
bool WriteUncompressed(Elf* in, const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = false;
  Elf* out = Dw().elf_begin(fd, ELF_C_WRITE, nullptr);
  GElf_Ehdr ehdr;
  size_t shstrndx, phnum;
  do {
    if (out == nullptr || Dw().gelf_getehdr(in, &ehdr) == nullptr || Dw().elf_getshdrstrndx(in, &shstrndx) != 0 ||
        Dw().elf_getphdrnum(in, &phnum) != 0 || Dw().gelf_newehdr(out, Dw().gelf_getclass(in)) == nullptr) {
      break;
    }
    if (phnum > 0) {
      if (Dw().gelf_newphdr(out, phnum) == nullptr) break;
      size_t i = 0;
      for (; i < phnum; ++i) {
        GElf_Phdr ph;
        if (Dw().gelf_getphdr(in, static_cast<int>(i), &ph) == nullptr ||
            Dw().gelf_update_phdr(out, static_cast<int>(i), &ph) == 0) {
          break;
        }
      }
      if (i != phnum) break;
    }
    bool copied = true;
    for (Elf_Scn* scn = Dw().elf_nextscn(in, nullptr); scn != nullptr && copied; scn = Dw().elf_nextscn(in, scn)) {
      GElf_Shdr shdr;
      Elf_Scn* dst = Dw().elf_newscn(out);
      copied = dst != nullptr && Dw().gelf_getshdr(scn, &shdr) != nullptr && Dw().gelf_update_shdr(dst, &shdr) != 0;
      if (!copied) break;
      Elf_Data* data = Dw().elf_getdata(scn, nullptr);
      if (data == nullptr) continue;  // an empty section: its header is all there is
      Elf_Data* copy = Dw().elf_newdata(dst);
      copied = copy != nullptr;
      if (!copied) break;
      *copy = *data;
      if ((shdr.sh_flags & SHF_COMPRESSED) != 0) copied = Dw().elf_compress(dst, 0, 0) == 1;
    }
    if (!copied) break;
    ehdr.e_shstrndx = shstrndx < SHN_LORESERVE ? static_cast<GElf_Half>(shstrndx) : SHN_XINDEX;
    if (Dw().gelf_update_ehdr(out, &ehdr) == 0) break;
    ok = Dw().elf_update(out, ELF_C_WRITE) >= 0;
  } while (false);
  if (out != nullptr) Dw().elf_end(out);
  if (close(fd) != 0) ok = false;
  return ok;
}

// Debian's separate debug files keep their DWARF zlib-compressed, and libdw inflates whole sections on
// the first line lookup in them: about 50 ms for libc's, paid by every process that writes a report
// naming a libc frame (nearly all of them). So the first process writes an uncompressed copy under
// CacheDir("debug"), named by build id and renamed into place whole, and later ones map that copy.
// Returns `fd` itself when the file is not compressed or no copy can be had.
int UncompressedDebugFile(int fd, const unsigned char* id, int id_len, char** found) {
  Elf* e = Dw().elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (e == nullptr) return fd;
  const bool compressed = HasCompressedSections(e);
  std::string dir = compressed ? CacheDir("debug") : std::string();
  if (dir.empty()) {
    Dw().elf_end(e);
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
  Dw().elf_end(e);
  if (cached < 0) return fd;
  // The copy must carry the build id it is named by (a stale or foreign file is ignored).
  bool same = false;
  if (Elf* c = Dw().elf_begin(cached, ELF_C_READ_MMAP, nullptr)) {
    const void* cid = nullptr;
    ssize_t n = Dw().dwelf_elf_gnu_build_id(c, &cid);
    same = n == id_len && memcmp(cid, id, static_cast<size_t>(n)) == 0 && !HasCompressedSections(c);
    Dw().elf_end(c);
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
  int id_len = Dw().dwfl_module_build_id(mod, &id, &id_vaddr);
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

// find_elf is libdw's dwfl_linux_proc_find_elf, set when libdw is loaded.
Dwfl_Callbacks g_callbacks = {
    nullptr,
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

struct Mapping {
  uintptr_t lo, hi;
  std::string path;
};

struct Symbolizer::Impl {
  std::mutex mu;
  bool dw_held = false;  // AcquireDw succeeded; released by ~Symbolizer
  bool dw_missing = false;  // AcquireDw failed: frames are objects and offsets
  Dwfl* dwfl = nullptr;
  std::unordered_map<uintptr_t, SymbolizedFrame> cache;
  std::unordered_set<uintptr_t> reported_for;  // load addresses that made us read the maps again
  std::unordered_map<uintptr_t, SymbolTable*> table_of_base;  // nullptr: no table for that object
  std::unordered_map<std::string, SymbolTable> tables;        // by file
  std::vector<Mapping> maps;  // sorted by address, as /proc/self/maps lists them
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
      auto it = std::upper_bound(maps.begin(), maps.end(), pc, [](uintptr_t v, const Mapping& m) { return v < m.lo; });
      if (it != maps.begin() && pc < (it - 1)->hi) return (it - 1)->path;
    }
    return std::string();
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
      name = FileIdentity(MappedPath(pc));
    }
    if (!name.empty() && !symbols_dir.empty()) {
      const std::string file = symbols_dir + "/" + name + ".sym";
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
    SymbolTable* t = nullptr;
    uintptr_t off = 0;
    const uintptr_t base = objects.BaseOf(pc);
    if (base != 0) {
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
      g_callbacks.find_elf = Dw().dwfl_linux_proc_find_elf;
      dwfl = Dw().dwfl_begin(&g_callbacks);
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

  // `base`: the load address of the object holding pc, 0 when no loaded object holds it.
  SymbolizedFrame LookupDwfl(uintptr_t pc, uintptr_t base, bool* from_module) {
    SymbolizedFrame f;
    // The loader's word on which object holds pc, now. libdwfl's modules are /proc/self/maps as it
    // was at the last Report: an object loaded since is missing, and a module's range may have
    // swallowed an anonymous mapping next to it that a later dlopen replaced.
    if (base == 0) {
      f.function = Hex(pc);  // in no loaded object (unloaded library, JIT code, garbage)
      f.object_offset = pc;
      return f;
    }
    if (dwfl == nullptr) Report();
    if (dw_missing) {
      // Without libdw: the object and the offset in it, nothing more.
      f.object = MappedPath(pc);
      f.object_offset = pc - base;
      const char* slash = strrchr(f.object.c_str(), '/');
      f.function = std::string(slash != nullptr ? slash + 1 : f.object.c_str()) + "+" + Hex(f.object_offset);
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
    const char* modname = Dw().dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, &mainfile, nullptr);
    f.object = mainfile != nullptr ? mainfile : (modname != nullptr ? modname : "");
    Dwarf_Addr bias = 0;
    if (Dw().dwfl_module_getelf(mod, &bias) != nullptr) f.object_offset = pc - bias;
    const char* name = SymbolName(mod, pc);
    if (name != nullptr) {
      f.function = Demangle(name);
      f.has_symbol = true;
    } else {
      const char* base = strrchr(f.object.c_str(), '/');
      f.function = std::string(base != nullptr ? base + 1 : f.object.c_str()) + "+" + Hex(f.object_offset);
    }
    if (Dwfl_Line* line = Dw().dwfl_module_getsrc(mod, pc)) {
      int lineno = 0;
      const char* src = Dw().dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
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
  if (impl_->dwfl != nullptr) Dw().dwfl_end(impl_->dwfl);
  const bool held = impl_->dw_held;
  impl_.reset();
  if (held) ReleaseDw();
}

SymbolizedFrame Symbolizer::SymbolizeAddress(uintptr_t pc) {
  std::lock_guard<std::mutex> l(impl_->mu);
  auto it = impl_->cache.find(pc);
  if (it != impl_->cache.end()) return it->second;
  return impl_->cache.emplace(pc, impl_->Lookup(pc)).first->second;
}

const char* SymbolizerUnavailable() { return g_dw_failed ? g_dw_error : nullptr; }

SymbolizedFrame Symbolizer::SymbolizeReturnAddress(uintptr_t ra) {
  return SymbolizeAddress(ra == 0 ? 0 : ra - 1);
}

}  // namespace track
}  // namespace poolscope
