// File: track/debug_files.cc
#include "track/debug_files.h"

#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "track/build_id.h"
#include "track/cache_dir.h"
#include "track/dw_api.h"

namespace poolscope {
namespace track {

namespace {

constexpr char kDebugRoot[] = "/usr/lib/debug";

int TryOpen(const std::string& path, char** found) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) *found = strdup(path.c_str());
  return fd;
}

}  // namespace

std::string CacheDir(const char* sub) {
  char path[4096];
  if (!CacheDirPath(sub, path, sizeof path)) return std::string();
  // It and its two parents, each made if missing.
  const std::string dir = path;
  const size_t parent = dir.rfind('/'), grandparent = dir.rfind('/', parent - 1);
  for (const std::string& d : {dir.substr(0, grandparent), dir.substr(0, parent), dir}) {
    if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) return std::string();
  }
  return dir;
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

std::string BuildIdDebugPath(const std::string& hex) {
  return std::string(kDebugRoot) + "/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug";
}

int FindBuildId(struct dl_phdr_info* info, size_t, void* arg) {
  auto* q = static_cast<BuildIdQuery*>(arg);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum && !holds; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    holds = ph.p_type == PT_LOAD && q->pc >= lo && q->pc < lo + ph.p_memsz;
  }
  if (!holds) return 0;
  const BuildIdNote note = FindBuildIdNote(info);
  if (note.bytes != nullptr) q->hex = HexBytes(note.bytes, note.n);
  return 1;
}

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

namespace {

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

}  // namespace

Dwfl_Callbacks g_debuginfo_callbacks = {
    nullptr,
    FindLocalDebuginfo,
    nullptr,  // section_address: only for ET_REL (kernel modules)
    &g_debuginfo_path,
};

}  // namespace track
}  // namespace poolscope
