// File: interpose/side_thread.cc
//
// See side_thread.h.
#include "interpose/side_thread.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <valgrind/valgrind.h>

#include <cstring>

#include "interpose/internal.h"

namespace poolscope {

bool SeccompFiltered(const char* status) {
  const char* line = strstr(status, "\nSeccomp:");
  if (line == nullptr) return true;
  line += strlen("\nSeccomp:");
  while (*line == ' ' || *line == '\t') ++line;
  return !(line[0] == '0' && (line[1] == '\n' || line[1] == '\0'));
}

bool Traced(const char* status) {
  const char* line = strstr(status, "\nTracerPid:");
  if (line == nullptr) return false;
  line += strlen("\nTracerPid:");
  while (*line == ' ' || *line == '\t') ++line;
  return !(line[0] == '0' && (line[1] == '\n' || line[1] == '\0'));
}

bool SideThread::Usable() {
  if (RUNNING_ON_VALGRIND != 0) return false;
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0 || CPU_COUNT(&cpus) < 2) return false;
  char buf[8192];
  return ReadSelfStatus(buf, sizeof buf) && !SeccompFiltered(buf) && !Traced(buf);
}

bool SideThread::Start(int (*fn)(void*), void* arg) {
  stack_ = static_cast<char*>(InternalAlloc(kStackBytes));
  if (stack_ == nullptr) return false;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
                    CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
  const int tid = clone(fn, stack_ + kStackBytes, flags, arg, &tid_, nullptr, &tid_);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (tid <= 0) {
    InternalFree(stack_, kStackBytes);
    stack_ = nullptr;
    return false;
  }
  return true;
}

void SideThread::Join() {
  // The kernel clears tid_ when the thread ends and wakes the futex on it.
  for (;;) {
    const pid_t t = __atomic_load_n(&tid_, __ATOMIC_ACQUIRE);
    if (t == 0) break;
    syscall(SYS_futex, &tid_, FUTEX_WAIT, t, nullptr, nullptr, 0);
  }
  InternalFree(stack_, kStackBytes);
  stack_ = nullptr;
}

}  // namespace poolscope
