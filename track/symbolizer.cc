// File: track/symbolizer.cc
#include "track/symbolizer.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
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

// The directory for uncompressed copies of debug files: $XDG_CACHE_HOME/poolscope/debug, else
// $HOME/.cache/poolscope/debug, made (0700) if missing. Empty when neither variable is usable.
std::string DebugCacheDir() {
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
  for (const char* part : {"", "/poolscope", "/poolscope/debug"}) {
    std::string dir = base + part;
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return std::string();
  }
  return base + "/poolscope/debug";
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
// DebugCacheDir(), named by build id and renamed into place whole, and later ones map that copy.
// Returns `fd` itself when the file is not compressed or no copy can be had.
int UncompressedDebugFile(int fd, const unsigned char* id, int id_len, char** found) {
  Elf* e = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (e == nullptr) return fd;
  const bool compressed = HasCompressedSections(e);
  std::string dir = compressed ? DebugCacheDir() : std::string();
  if (dir.empty()) {
    elf_end(e);
    return fd;
  }
  std::string name;
  char hex[3];
  for (int i = 0; i < id_len; ++i) {
    snprintf(hex, sizeof(hex), "%02x", id[i]);
    name += hex;
  }
  const std::string path = dir + "/" + name + ".debug";
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
    std::string path = std::string(kDebugRoot) + "/.build-id/";
    char hex[3];
    for (int i = 0; i < id_len; ++i) {
      snprintf(hex, sizeof(hex), "%02x", id[i]);
      path += hex;
      if (i == 0) path += '/';
    }
    path += ".debug";
    int fd = TryOpen(path, debuginfo_file_name);
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

struct Symbolizer::Impl {
  std::mutex mu;
  Dwfl* dwfl = nullptr;
  std::unordered_map<uintptr_t, SymbolizedFrame> cache;
  std::unordered_set<uintptr_t> reported_for;  // load addresses that made us read the maps again

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

  SymbolizedFrame Lookup(uintptr_t pc) {
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
