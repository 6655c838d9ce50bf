// File: interpose/thread_registers.cc
//
// See thread_registers.h.
#include "interpose/thread_registers.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace poolscope {
namespace {

static_assert(sizeof(user_regs_struct) == ThreadRegisters::kWords * 8, "PTRACE_GETREGS fills 27 words");

// A system call without libc: the helper shares the caller's thread pointer, so libc's wrappers, which
// write errno there, are not for it. Returns -errno on failure.
long Raw(long n, long a = 0, long b = 0, long c = 0, long d = 0) {
  long ret;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
  return ret;
}

constexpr size_t kMaxThreads = 4096;

struct Job {
  const pid_t* tids;
  size_t n;
  ThreadRegisters* out;
  size_t max;
  std::atomic<int> go;
  std::atomic<int> done;
  std::atomic<size_t> read;  // out[0, read) are whole
};

int Helper(void* arg) {
  auto* j = static_cast<Job*>(arg);
  while (j->go.load(std::memory_order_acquire) == 0) Raw(SYS_sched_yield);
  for (size_t i = 0; i < j->n; ++i) {
    const size_t k = j->read.load(std::memory_order_relaxed);
    if (k >= j->max) break;
    const pid_t tid = j->tids[i];
    if (Raw(SYS_ptrace, PTRACE_SEIZE, tid, 0, 0) != 0) continue;
    if (Raw(SYS_ptrace, PTRACE_INTERRUPT, tid, 0, 0) != 0) {
      Raw(SYS_ptrace, PTRACE_DETACH, tid, 0, 0);
      continue;
    }
    int status = 0;
    if (Raw(SYS_wait4, tid, reinterpret_cast<long>(&status), __WALL, 0) != tid || !WIFSTOPPED(status)) {
      continue;  // it ended (no longer traced)
    }
    // The interrupt's stop, or a signal's delivery stop that came first: that signal is given back
    // when the thread is let go, or it would be lost.
    const int signal = (status >> 16) == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(status);
    user_regs_struct regs;
    if (Raw(SYS_ptrace, PTRACE_GETREGS, tid, 0, reinterpret_cast<long>(&regs)) == 0) {
      j->out[k].tid = tid;
      memcpy(j->out[k].words, &regs, sizeof regs);
      j->read.store(k + 1, std::memory_order_release);
    }
    Raw(SYS_ptrace, PTRACE_DETACH, tid, 0, signal);
  }
  j->done.store(1, std::memory_order_release);
  return 0;
}

uint64_t NowMs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000 + static_cast<uint64_t>(t.tv_nsec) / 1000000;
}

// Whether Yama restricts ptrace to descendants (ptrace_scope 1): the process must then name its
// helper as its tracer.
bool YamaRestricts() {
  const int fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char c = 0;
  const bool one = read(fd, &c, 1) == 1 && c == '1';
  close(fd);
  return one;
}

}  // namespace

bool ListThreads(pid_t* tids, size_t max, size_t* count) {
  *count = 0;
  const int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  for (;;) {
    const long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (got <= 0) break;
    for (long off = 0; off < got;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(buf + off);
      off += d->d_reclen;
      if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
      pid_t tid = 0;
      for (const char* c = d->d_name; *c >= '0' && *c <= '9'; ++c) tid = tid * 10 + (*c - '0');
      if (*count < max) tids[*count] = tid;
      ++*count;
    }
  }
  close(fd);
  return true;
}

RegistersRead ReadOtherThreadsRegisters(ThreadRegisters* out, size_t max, void* stack, uint64_t timeout_ms) {
  // The other threads' ids (the caller's taken out of those listed).
  pid_t tids[kMaxThreads];
  size_t listed = 0;
  ListThreads(tids, kMaxThreads, &listed);
  const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
  size_t n = 0;
  for (size_t i = 0; i < listed && i < kMaxThreads; ++i) {
    if (tids[i] != self) tids[n++] = tids[i];
  }
  const size_t others = listed > 0 ? listed - 1 : 0;
  RegistersRead r{0, others};
  if (n == 0 || max == 0) return r;
  Job job{tids, n, out, max, {0}, {0}, {0}};
  // The helper starts with every signal blocked: none of the program's handlers runs on it.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int pid = clone(Helper, static_cast<char*>(stack) + kHelperStackBytes, CLONE_VM | CLONE_UNTRACED, &job);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid <= 0) return r;
  const bool yama = YamaRestricts();
  if (yama) prctl(PR_SET_PTRACER, pid, 0, 0, 0);
  job.go.store(1, std::memory_order_release);
  const uint64_t deadline = NowMs() + timeout_ms;
  while (job.done.load(std::memory_order_acquire) == 0 && NowMs() < deadline) {
    const timespec pause = {0, 200000};
    nanosleep(&pause, nullptr);
  }
  if (job.done.load(std::memory_order_acquire) == 0) kill(pid, SIGKILL);  // the threads it holds go free
  int status;
  while (waitpid(pid, &status, __WALL) < 0 && errno == EINTR) {
  }
  if (yama) prctl(PR_SET_PTRACER, 0, 0, 0, 0);
  r.read = job.read.load(std::memory_order_acquire);
  r.failed = others - r.read;
  return r;
}

}  // namespace poolscope
