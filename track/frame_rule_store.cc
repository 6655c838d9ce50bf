// File: track/frame_rule_store.cc
//
// See frame_rule_store.h. The objects are listed once, at OpenFrameRuleStore; a lookup finds its
// object by a pass over that list (a process has tens of objects) and probes the object's table.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "track/frame_rule_store.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>  // rename
#include <cstring>

#include "track/build_id.h"
#include "track/populate.h"

namespace poolscope {
namespace track {

namespace {

constexpr uint64_t kMagic = 0x32454c5552465350ull;  // "PSFRULE2"
constexpr uint64_t kTop = uint64_t{1} << 63;
constexpr uint32_t kMinBits = 8;
constexpr uint32_t kMaxBits = 20;  // 16 MiB of slots: a million rules
constexpr int kMaxObjects = 256;
constexpr size_t kIdBytes = 20;  // a SHA-1 build id; longer ones are cut (the name only needs to differ)

struct Header {
  uint64_t magic;
  uint32_t bits;
  uint32_t count;
  uint64_t checksum;  // of bits, count and every slot's two words
  uint64_t reserved;
};
// key: kTop | (offset + 1), 0 for an empty slot; rule: the rule ^ kTop (every rule is non-zero and has
// its top bit clear or bits 47-62 set, so the word is never a user-space address).
struct FileSlot {
  uint64_t key;
  uint64_t rule;
};
static_assert(sizeof(Header) == 32 && sizeof(FileSlot) == 16, "the file's layout");

enum ObjectState : int { kNotRead = 0, kReading = 1, kRead = 2, kNoFile = 3 };

struct Object {
  uintptr_t lo, hi;  // its PT_LOAD segments' extent
  uintptr_t base;    // the load bias (dlpi_addr)
  char id[2 * kIdBytes + 1];
  std::atomic<int> state;
  std::atomic<bool> gone;  // unloaded (RecheckFrameRuleStore): another object may be where it was
  std::atomic<uint32_t> computed;  // rules computed here for its code: none of them came from its file
  const FileSlot* slots;
  uint32_t bits;
  uint32_t count;
  void* map;
  size_t map_bytes;
};

POOLSCOPE_LARGE_BSS Object g_objects[kMaxObjects];
int g_nobjects = 0;
char g_dir[512];
std::atomic<bool> g_open{false};
std::atomic<uint64_t> g_answered{0};
std::atomic<int> g_files_read{0};

inline size_t Home(uint64_t key, uint32_t bits) {
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

// FNV-1a's step over 64-bit words, in four lanes (slot i in lane i % 4) that the CPU multiplies side
// by side: one chain of multiplies over a large program's file (cc1: 16,384 slots) took 0.3 ms of every
// start.
static_assert(kMinBits >= 2, "a file's slots come in fours");
uint64_t Checksum(uint32_t bits, uint32_t count, const FileSlot* slots) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  constexpr uint64_t kBasis = 0xcbf29ce484222325ull;
  uint64_t lane[4] = {kBasis ^ bits, kBasis ^ count, kBasis + 1, kBasis + 2};
  const size_t n = size_t{1} << bits;
  for (size_t i = 0; i < n; i += 4) {
    for (size_t k = 0; k < 4; ++k) lane[k] = ((lane[k] ^ slots[i + k].key) * kPrime ^ slots[i + k].rule) * kPrime;
  }
  uint64_t h = lane[0];
  for (size_t k = 1; k < 4; ++k) h = (h ^ lane[k]) * kPrime;
  return h;
}

// The build id of an object, as hex in `out` (its first kIdBytes bytes); false when it has none.
bool BuildId(const struct dl_phdr_info* info, char* out) {
  const BuildIdNote note = FindBuildIdNote(info);
  if (note.n < 4) return false;
  static const char kHex[] = "0123456789abcdef";
  const size_t bytes = note.n < kIdBytes ? note.n : kIdBytes;
  for (size_t k = 0; k < bytes; ++k) {
    out[2 * k] = kHex[note.bytes[k] >> 4];
    out[2 * k + 1] = kHex[note.bytes[k] & 15];
  }
  out[2 * bytes] = '\0';
  return true;
}

int ListObject(struct dl_phdr_info* info, size_t, void*) {
  if (g_nobjects == kMaxObjects) return 1;
  Object& o = g_objects[g_nobjects];
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t a = info->dlpi_addr + ph.p_vaddr;
    if (a < lo) lo = a;
    if (a + ph.p_memsz > hi) hi = a + ph.p_memsz;
  }
  if (lo >= hi || !BuildId(info, o.id)) return 0;
  o.lo = lo;
  o.hi = hi;
  o.base = info->dlpi_addr;
  o.state.store(kNotRead, std::memory_order_relaxed);
  o.gone.store(false, std::memory_order_relaxed);
  o.computed.store(0, std::memory_order_relaxed);
  ++g_nobjects;
  return 0;
}

// Appends `s` at out[*n], within `room` bytes and terminated; false when it does not fit.
bool Append(char* out, size_t room, size_t* n, const char* s) {
  const size_t len = strlen(s);
  if (*n + len >= room) return false;
  memcpy(out + *n, s, len + 1);
  *n += len;
  return true;
}

// The file's path for `o` (".<pid>.tmp" added when `temp`): false when it does not fit. (Read inside
// a capture: no snprintf.)
bool PathOf(const Object& o, bool temp, char* out, size_t room) {
  size_t n = 0;
  if (!Append(out, room, &n, g_dir) || !Append(out, room, &n, "/") || !Append(out, room, &n, o.id) ||
      !Append(out, room, &n, ".rules")) {
    return false;
  }
  if (!temp) return true;
  char digits[24];
  size_t d = sizeof digits;
  digits[--d] = '\0';
  unsigned v = static_cast<unsigned>(getpid());
  do {
    digits[--d] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  return Append(out, room, &n, ".") && Append(out, room, &n, digits + d) && Append(out, room, &n, ".tmp");
}

// Maps and checks the file of `o`. kRead or kNoFile.
int ReadFile(Object* o) {
  char path[sizeof(g_dir) + 64];
  if (!PathOf(*o, false, path, sizeof path)) return kNoFile;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return kNoFile;
  struct stat st;
  void* map = MAP_FAILED;
  size_t bytes = 0;
  if (fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(Header))) {
    bytes = static_cast<size_t>(st.st_size);
    map = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  }
  close(fd);
  if (map == MAP_FAILED) return kNoFile;
  const auto* h = static_cast<const Header*>(map);
  const auto* slots = reinterpret_cast<const FileSlot*>(h + 1);
  const bool ok = h->magic == kMagic && h->bits >= kMinBits && h->bits <= kMaxBits &&
                  bytes == sizeof(Header) + (sizeof(FileSlot) << h->bits) && h->count <= (1u << h->bits) / 2 &&
                  h->checksum == Checksum(h->bits, h->count, slots);
  if (!ok) {
    munmap(map, bytes);
    return kNoFile;
  }
  o->slots = slots;
  o->bits = h->bits;
  o->count = h->count;
  o->map = map;
  o->map_bytes = bytes;
  g_files_read.fetch_add(1, std::memory_order_relaxed);
  return kRead;
}

Object* ObjectOf(uintptr_t pc) {
  for (int i = 0; i < g_nobjects; ++i) {
    if (pc >= g_objects[i].lo && pc < g_objects[i].hi) {
      return g_objects[i].gone.load(std::memory_order_acquire) ? nullptr : &g_objects[i];
    }
  }
  return nullptr;
}

// RecheckFrameRuleStore's walk: marks `seen` the store's objects still loaded (the same load bias and
// build id).
struct Seen {
  bool loaded[kMaxObjects];
};
int MarkLoaded(struct dl_phdr_info* info, size_t, void* arg) {
  char id[2 * kIdBytes + 1];
  bool have_id = false;
  for (int i = 0; i < g_nobjects; ++i) {
    if (g_objects[i].base != info->dlpi_addr) continue;
    if (!have_id && !(have_id = BuildId(info, id))) return 0;
    if (strcmp(id, g_objects[i].id) == 0) static_cast<Seen*>(arg)->loaded[i] = true;
  }
  return 0;
}

// Whether `o` is read (reading it first if no one has tried).
bool Ready(Object* o) {
  int s = o->state.load(std::memory_order_acquire);
  if (s == kNotRead) {
    if (!o->state.compare_exchange_strong(s, kReading, std::memory_order_acquire)) return s == kRead;
    s = ReadFile(o);
    o->state.store(s, std::memory_order_release);
  }
  return s == kRead;
}

// The rule at `key` in a table of 2^bits slots, or 0.
FrameRule Probe(const FileSlot* slots, uint32_t bits, uint64_t key) {
  const size_t mask = (size_t{1} << bits) - 1;
  for (size_t i = Home(key, bits), n = 0; n <= mask; i = (i + 1) & mask, ++n) {
    if (slots[i].key == key) return slots[i].rule ^ kTop;
    if (slots[i].key == 0) return 0;
  }
  return 0;
}

// Puts (key, rule) into a table of 2^bits slots that has room; an existing key keeps its rule.
void Put(FileSlot* slots, uint32_t bits, uint64_t key, FrameRule rule, uint32_t* count) {
  const size_t mask = (size_t{1} << bits) - 1;
  for (size_t i = Home(key, bits);; i = (i + 1) & mask) {
    if (slots[i].key == key) return;
    if (slots[i].key == 0) {
      slots[i].key = key;
      slots[i].rule = rule ^ kTop;
      ++*count;
      return;
    }
  }
}

inline bool KeyOf(const Object& o, uintptr_t pc, uint64_t* key) {
  const uintptr_t off = pc - o.base;
  if (off >= UINT32_MAX) return false;
  *key = kTop | (off + 1);
  return true;
}

// SaveFrameRuleStore's passes over the cached rules.
struct Tally {
  uint32_t fresh[kMaxObjects];
};
struct Fill {
  Object* o;
  FileSlot* slots;
  uint32_t bits;
  uint32_t count;
};

void CountFresh(uintptr_t pc, FrameRule rule, void* arg) {
  Object* o = ObjectOf(pc);
  uint64_t key;
  if (o == nullptr || rule == 0 || !KeyOf(*o, pc, &key)) return;
  if (Ready(o) && Probe(o->slots, o->bits, key) != 0) return;
  ++static_cast<Tally*>(arg)->fresh[o - g_objects];
}

void FillFresh(uintptr_t pc, FrameRule rule, void* arg) {
  auto* f = static_cast<Fill*>(arg);
  uint64_t key;
  if (rule == 0 || pc < f->o->lo || pc >= f->o->hi || !KeyOf(*f->o, pc, &key)) return;
  Put(f->slots, f->bits, key, rule, &f->count);
}

bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// A new file for `o`: what it held and what this process cached. True when it was written.
bool Rewrite(Object* o, uint32_t fresh) {
  const uint64_t total = uint64_t{fresh} + (o->state.load(std::memory_order_acquire) == kRead ? o->count : 0);
  uint32_t bits = kMinBits;
  while ((uint64_t{1} << bits) < 2 * total && bits < kMaxBits) ++bits;
  if ((uint64_t{1} << bits) < 2 * total) return false;
  const size_t bytes = sizeof(Header) + (sizeof(FileSlot) << bits);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return false;
  auto* h = static_cast<Header*>(mem);
  Fill fill{o, reinterpret_cast<FileSlot*>(h + 1), bits, 0};
  if (o->state.load(std::memory_order_acquire) == kRead) {
    const size_t n = size_t{1} << o->bits;
    for (size_t i = 0; i < n; ++i) {
      if (o->slots[i].key != 0) Put(fill.slots, bits, o->slots[i].key, o->slots[i].rule ^ kTop, &fill.count);
    }
  }
  ForEachCachedRule(FillFresh, &fill);
  h->magic = kMagic;
  h->bits = bits;
  h->count = fill.count;
  h->checksum = Checksum(bits, fill.count, fill.slots);
  h->reserved = 0;
  char temp[sizeof(g_dir) + 64], path[sizeof(g_dir) + 64];
  bool ok = PathOf(*o, true, temp, sizeof temp) && PathOf(*o, false, path, sizeof path);
  if (ok) {
    const int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ok = fd >= 0 && WriteAll(fd, mem, bytes);
    if (fd >= 0 && close(fd) != 0) ok = false;
    if (ok) ok = rename(temp, path) == 0;
    if (!ok && fd >= 0) unlink(temp);
  }
  munmap(mem, bytes);
  return ok;
}

// Makes g_dir and its parents (poolscope's cache directory is made on first use).
bool MakeDir() {
  char path[sizeof(g_dir)];
  memcpy(path, g_dir, sizeof path);
  for (char* p = path + 1; *p != '\0'; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return false;
    *p = '/';
  }
  return mkdir(path, 0700) == 0 || errno == EEXIST;
}

// Whether a file holding `held` rules is rewritten for `fresh` more: at least one, and one for each
// kHeldPerFresh it holds. A rule the file lacks is computed again by every later process that needs
// it (tens of microseconds, its object's tables read), where the rewrite is paid once, in proportion
// to the file (16 KiB for 512 rules): a program that needs a few rules beyond its file (`as` on a new
// input: 5 beside 180) has them from the next run on.
constexpr uint64_t kHeldPerFresh = 512;
bool WorthRewriting(uint32_t fresh, uint32_t held) {
  return fresh != 0 && uint64_t{fresh} * kHeldPerFresh >= held;
}

}  // namespace

void OpenFrameRuleStore(const char* dir) {
  if (dir == nullptr || dir[0] != '/' || strlen(dir) >= sizeof(g_dir) || g_open.load(std::memory_order_acquire)) return;
  memcpy(g_dir, dir, strlen(dir) + 1);
  g_nobjects = 0;
  dl_iterate_phdr(ListObject, nullptr);
  g_open.store(g_nobjects > 0, std::memory_order_release);
}

FrameRule StoredFrameRule(uintptr_t pc) {
  if (!g_open.load(std::memory_order_acquire)) return 0;
  Object* o = ObjectOf(pc);
  uint64_t key;
  if (o == nullptr || !KeyOf(*o, pc, &key) || !Ready(o)) return 0;
  const FrameRule r = Probe(o->slots, o->bits, key);
  if (r != 0) g_answered.fetch_add(1, std::memory_order_relaxed);
  return r;
}

void RecheckFrameRuleStore() {
  if (!g_open.load(std::memory_order_acquire)) return;
  static Seen seen;  // (256 bytes: dlclose may run on a small stack)
  memset(&seen, 0, sizeof seen);
  dl_iterate_phdr(MarkLoaded, &seen);
  for (int i = 0; i < g_nobjects; ++i) {
    if (!seen.loaded[i]) g_objects[i].gone.store(true, std::memory_order_release);
  }
}

void NoteComputedFrameRule(uintptr_t pc) {
  if (!g_open.load(std::memory_order_acquire)) return;
  if (Object* o = ObjectOf(pc)) o->computed.fetch_add(1, std::memory_order_relaxed);
}

int SaveFrameRuleStore() {
  if (!g_open.load(std::memory_order_acquire)) return 0;
  // A rule its file lacks was computed in this process (one from the file is in it): an object that
  // had fewer rules computed than a rewrite needs is passed over without looking at the cached rules,
  // and when none had enough, so is the walk of the cache (most processes, from the second run on).
  bool any = false;
  for (int i = 0; i < g_nobjects && !any; ++i) {
    const Object& o = g_objects[i];
    const uint32_t held = o.state.load(std::memory_order_acquire) == kRead ? o.count : 0;
    any = !o.gone.load(std::memory_order_acquire) && WorthRewriting(o.computed.load(std::memory_order_relaxed), held);
  }
  if (!any) return 0;
  static Tally tally;  // (1 KiB: not on the exiting thread's stack, which may be small)
  memset(&tally, 0, sizeof tally);
  ForEachCachedRule(CountFresh, &tally);
  int written = 0;
  bool dir_made = false;
  for (int i = 0; i < g_nobjects; ++i) {
    Object* o = &g_objects[i];
    if (o->gone.load(std::memory_order_acquire)) continue;
    const uint32_t held = o->state.load(std::memory_order_acquire) == kRead ? o->count : 0;
    if (!WorthRewriting(tally.fresh[i], held)) continue;
    if (!dir_made && !(dir_made = MakeDir())) return written;
    written += Rewrite(o, tally.fresh[i]) ? 1 : 0;
  }
  return written;
}

uint64_t FrameRulesFromStore() { return g_answered.load(std::memory_order_relaxed); }

namespace frame_rule_store_internal {
void ResetForTest() {
  g_open.store(false, std::memory_order_release);
  for (int i = 0; i < g_nobjects; ++i) {
    if (g_objects[i].state.load(std::memory_order_acquire) == kRead) munmap(g_objects[i].map, g_objects[i].map_bytes);
    g_objects[i].state.store(kNotRead, std::memory_order_relaxed);
  }
  g_nobjects = 0;
  g_answered.store(0, std::memory_order_relaxed);
  g_files_read.store(0, std::memory_order_relaxed);
}
}  // namespace frame_rule_store_internal

int FrameRuleFilesRead() { return g_files_read.load(std::memory_order_relaxed); }

}  // namespace track
}  // namespace poolscope
