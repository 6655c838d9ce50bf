// File: track/proc_maps.cc
//
// A maps line: "start-end perms offset dev inode   path", numbers in hex except the inode (decimal);
// the path is everything after the spaces that follow the inode, and may be absent or contain spaces.
#include "track/proc_maps.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "track/sorted_search.h"

namespace poolscope {
namespace track {

namespace {

constexpr size_t kPage = 4096;

const char* ParseHex(const char* p, const char* end, uint64_t* v) {
  uint64_t x = 0;
  for (; p < end; ++p) {
    char c = *p;
    if (c >= '0' && c <= '9') {
      x = x * 16 + (c - '0');
    } else if (c >= 'a' && c <= 'f') {
      x = x * 16 + (c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      x = x * 16 + (c - 'A' + 10);
    } else {
      break;
    }
  }
  *v = x;
  return p;
}

const char* ParseDec(const char* p, const char* end, uint64_t* v) {
  uint64_t x = 0;
  for (; p < end && *p >= '0' && *p <= '9'; ++p) x = x * 10 + (*p - '0');
  *v = x;
  return p;
}

const char* SkipSpaces(const char* p, const char* end) {
  while (p < end && *p == ' ') ++p;
  return p;
}

const char* SkipField(const char* p, const char* end) {
  while (p < end && *p != ' ') ++p;
  return SkipSpaces(p, end);
}

// Parses the line [p, end) (no newline; *end is writable and becomes the path's NUL).
bool ParseLine(char* p, char* end, Mapping* m) {
  uint64_t start, stop, offset, inode;
  const char* q = ParseHex(p, end, &start);
  if (q == end || *q != '-') return false;
  q = ParseHex(q + 1, end, &stop);
  q = SkipSpaces(q, end);
  if (end - q < 4) return false;
  memcpy(m->perms, q, 4);
  m->perms[4] = '\0';
  q = SkipSpaces(q + 4, end);
  q = SkipSpaces(ParseHex(q, end, &offset), end);
  q = SkipField(q, end);  // dev
  q = SkipSpaces(ParseDec(q, end, &inode), end);
  m->start = start;
  m->end = stop;
  m->offset = offset;
  m->inode = inode;
  *end = '\0';
  m->path = q;
  return true;
}

bool StartsWith(const char* s, const char* prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

}  // namespace

ProcMaps::~ProcMaps() { Release(); }

void ProcMaps::Release() {
  if (text_ != nullptr) scratch_.Unmap(text_, text_capacity_);
  if (mappings_ != nullptr) scratch_.Unmap(mappings_, mappings_capacity_ * sizeof(Mapping));
  text_ = nullptr;
  mappings_ = nullptr;
  text_capacity_ = mappings_capacity_ = count_ = 0;
}

bool ProcMaps::Read(const char* path) {
  Release();
  int fd;
  do {
    fd = open(path, O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return false;
  size_t used = 0;
  bool ok = true;
  for (;;) {
    if (text_capacity_ - used < kPage) {  // keep a byte spare for a last line without a newline
      size_t capacity = text_capacity_ == 0 ? 16 * kPage : 2 * text_capacity_;
      char* bigger = static_cast<char*>(scratch_.MapSparse(capacity));  // the text fills what it needs
      if (bigger == nullptr) {
        ok = false;
        break;
      }
      if (text_ != nullptr) {
        memcpy(bigger, text_, used);
        scratch_.Unmap(text_, text_capacity_);
      }
      text_ = bigger;
      text_capacity_ = capacity;
    }
    ssize_t got = read(fd, text_ + used, text_capacity_ - used - 1);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) ok = false;
    if (got <= 0) break;
    used += static_cast<size_t>(got);
  }
  close(fd);
  if (!ok) {
    Release();
    return false;
  }
  size_t lines = 1;
  for (size_t i = 0; i < used; ++i) lines += text_[i] == '\n';
  mappings_capacity_ = lines;
  mappings_ = static_cast<Mapping*>(scratch_.Map(lines * sizeof(Mapping)));
  if (mappings_ == nullptr) {
    Release();
    return false;
  }
  char* p = text_;
  char* const end = text_ + used;
  while (p < end) {
    char* eol = static_cast<char*>(memchr(p, '\n', end - p));
    if (eol == nullptr) eol = end;  // text_[used] is spare: the NUL goes there
    if (eol > p && ParseLine(p, eol, &mappings_[count_])) ++count_;
    p = eol + 1;
  }
  return true;
}

bool IsRootCandidate(const Mapping& m) {
  if (!m.readable() || !m.writable()) return false;
  const char* p = m.path;
  if (p[0] == '[') {
    return strcmp(p, "[vvar]") != 0 && strcmp(p, "[vvar_vclock]") != 0 &&
           strcmp(p, "[vsyscall]") != 0 && strcmp(p, "[vdso]") != 0 && strcmp(p, "[heap]") != 0;
  }
  // Shared anonymous memory is listed as "/dev/zero (deleted)" and POSIX shared memory lives under
  // /dev/shm/: both are plain memory the program may keep pointers in.
  return !StartsWith(p, "/dev/") || StartsWith(p, "/dev/zero ") || StartsWith(p, "/dev/shm/");
}

size_t ReadPagemap(int pagemap_fd, uintptr_t first_page, uint64_t* entries, size_t n) {
  if (pagemap_fd < 0) return 0;
  const off_t at = static_cast<off_t>(first_page * sizeof(uint64_t));
  ssize_t got;
  do {
    got = pread(pagemap_fd, entries, n * sizeof(uint64_t), at);
  } while (got < 0 && errno == EINTR);
  return got <= 0 ? 0 : static_cast<size_t>(got) / sizeof(uint64_t);
}

bool ReadableThroughout(const ProcMaps& maps, uintptr_t begin, uintptr_t end) {
  uintptr_t at = begin;
  // From the first mapping that ends after begin.
  for (size_t k = PartitionPoint(0, maps.size(), [&](size_t i) { return maps[i].end <= begin; });
       k < maps.size() && at < end; ++k) {
    if (maps[k].start > at || !maps[k].readable()) return false;
    at = maps[k].end;
  }
  return at >= end;
}

bool IsPrivateAnonymous(const Mapping& m) {
  return m.perms[3] == 'p' && m.inode == 0 && (m.path[0] == '\0' || m.path[0] == '[');
}

size_t BuildRootRanges(const ProcMaps& maps, const RootRange* exclude, size_t nexclude, RootRange* out,
                       size_t capacity, int pagemap_fd) {
  size_t count = 0;
  auto push = [&](uintptr_t b, uintptr_t e) {
    if (count < capacity) out[count] = RootRange{b, e};
    ++count;
  };
  size_t x = 0;  // exclusions ending at or before the current point are behind us
  for (size_t i = 0; i < maps.size(); ++i) {
    const Mapping& m = maps[i];
    if (!IsRootCandidate(m)) continue;
    // A private anonymous mapping (the stacks and [anon:...] names included) gives its touched runs.
    const bool by_pages = pagemap_fd >= 0 && IsPrivateAnonymous(m);
    auto add = [&](uintptr_t b, uintptr_t e) {
      if (by_pages) {
        ForEachTouchedRun(pagemap_fd, b, e, push);
      } else {
        push(b, e);
      }
    };
    uintptr_t at = m.start;
    while (x < nexclude && exclude[x].end <= at) ++x;
    // Walk the exclusions that overlap [at, m.end); they are sorted by begin, possibly overlapping.
    for (size_t k = x; at < m.end && k < nexclude && exclude[k].begin < m.end; ++k) {
      if (exclude[k].end <= at) continue;
      if (exclude[k].begin > at) add(at, exclude[k].begin);
      at = exclude[k].end;
    }
    if (at < m.end) add(at, m.end);
  }
  return count;
}

bool AllWithinRanges(const ScanBlock* blocks, size_t n, const RootRange* ranges, size_t nranges) {
  size_t r = 0;
  for (size_t i = 0; i < n; ++i) {
    const uintptr_t b = blocks[i].start, e = b + (blocks[i].size() > 0 ? blocks[i].size() : 1);
    while (r < nranges && ranges[r].end <= b) ++r;
    if (r == nranges || ranges[r].begin > b || ranges[r].end < e) return false;
  }
  return true;
}

void MarkMappingsHoldingBlocks(const ProcMaps& maps, const ScanBlock* blocks, size_t n, uint8_t* hit) {
  MarkMappingsHoldingBlocks(maps, blocks, n, hit, [](const ScanBlock&) { return false; });
}

namespace {

// process_vm_readv that leaves errno alone: the count read, or -errno. The exit scan reads from a
// second thread that shares the first one's thread-local storage (errno included).
long VmReadv(pid_t pid, const struct iovec* local, unsigned long nlocal, const struct iovec* remote,
             unsigned long nremote) {
#if defined(__x86_64__)
  long ret;
  register const struct iovec* r10 asm("r10") = remote;
  register unsigned long r8 asm("r8") = nremote;
  register unsigned long r9 asm("r9") = 0;  // flags
  asm volatile("syscall"
               : "=a"(ret)
               : "0"(static_cast<long>(SYS_process_vm_readv)), "D"(static_cast<long>(pid)), "S"(local),
                 "d"(nlocal), "r"(r10), "r"(r8), "r"(r9)
               : "rcx", "r11", "memory");
  return ret;
#else
  const int saved = errno;
  long ret = process_vm_readv(pid, local, nlocal, remote, nremote, 0);
  if (ret < 0) ret = -errno;
  errno = saved;
  return ret;
#endif
}

}  // namespace

ProcessVmReader::ProcessVmReader() : pid_(getpid()) {}

size_t ProcessVmReader::Read(uintptr_t addr, void* buf, size_t n) {
  constexpr int kIov = 16;
  const pid_t pid = pid_;
  size_t done = 0;
  while (done < n) {
    struct iovec local;
    struct iovec remote[kIov];
    int k = 0;
    size_t want = 0;
    uintptr_t at = addr + done;
    while (k < kIov && done + want < n) {
      size_t in_page = kPage - (at % kPage);
      size_t len = n - done - want < in_page ? n - done - want : in_page;
      remote[k].iov_base = reinterpret_cast<void*>(at);
      remote[k].iov_len = len;
      ++k;
      at += len;
      want += len;
    }
    local.iov_base = static_cast<char*>(buf) + done;
    local.iov_len = want;
    const long got = VmReadv(pid, &local, 1, remote, static_cast<unsigned long>(k));
    if (got == -EINTR) continue;
    if (got <= 0) break;
    done += static_cast<size_t>(got);
    if (static_cast<size_t>(got) < want) break;
  }
  return done;
}

size_t ProcessVmReader::ReadMany(const Range* ranges, size_t k, void* buf) {
  constexpr int kMaxIov = 256;  // well under IOV_MAX (1024); 4 KiB of stack
  struct iovec remote[kMaxIov];
  size_t done = 0;
  size_t i = 0;
  while (i < k) {
    // As many whole ranges as fit, each split at page boundaries: the kernel never splits an iovec, so
    // a short count ends at the first piece it could not read.
    int n = 0;
    size_t want = 0;
    size_t j = i;
    for (; j < k; ++j) {
      int pieces = 0;
      for (uintptr_t a = ranges[j].addr, end = ranges[j].addr + ranges[j].n; a < end; a = (a | (kPage - 1)) + 1) {
        ++pieces;
      }
      if (n + pieces > kMaxIov) break;
      for (uintptr_t a = ranges[j].addr, end = ranges[j].addr + ranges[j].n; a < end;) {
        const uintptr_t next = (a | (kPage - 1)) + 1;
        const uintptr_t stop = next < end ? next : end;
        remote[n].iov_base = reinterpret_cast<void*>(a);
        remote[n].iov_len = stop - a;
        ++n;
        a = stop;
      }
      want += ranges[j].n;
    }
    if (j == i) return done + Read(ranges[i].addr, static_cast<char*>(buf) + done, ranges[i].n);
    struct iovec local;
    local.iov_base = static_cast<char*>(buf) + done;
    local.iov_len = want;
    long got;
    do {
      got = n == 0 ? 0 : VmReadv(pid_, &local, 1, remote, static_cast<unsigned long>(n));
    } while (got == -EINTR);
    if (got < 0) return done;
    done += static_cast<size_t>(got);
    if (static_cast<size_t>(got) < want) return done;
    i = j;
  }
  return done;
}

bool ProcessVmReader::Available() {
  volatile uint64_t probe = 0x5eed;
  uint64_t copy = 0;
  ProcessVmReader r;
  return r.Read(reinterpret_cast<uintptr_t>(&probe), &copy, sizeof(copy)) == sizeof(copy) &&
         copy == 0x5eed;
}

}  // namespace track
}  // namespace poolscope
