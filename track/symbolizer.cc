// File: track/symbolizer.cc
#include "track/symbolizer.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <unistd.h>

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
    if (fd >= 0) return fd;
  }
  if (debuglink_file != nullptr && file_name != nullptr) {
    std::string dir = file_name;
    size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? "." : dir.substr(0, slash);
    for (const std::string& path : {dir + "/" + debuglink_file, dir + "/.debug/" + debuglink_file,
                                     std::string(kDebugRoot) + dir + "/" + debuglink_file}) {
      if (path == file_name) continue;
      int fd = TryOpen(path, debuginfo_file_name);
      if (fd >= 0) return fd;
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
