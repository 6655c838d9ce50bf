// File: interpose/signals.cc
//
// See signals.h. The table below holds, for each of the three signals, whether poolscope's handler
// stands in for the default action (`held`) and the SIG_DFL action the program is shown meanwhile.
// Every change goes the same way, under the table lock: the program's request is made for real
// (glibc's own function, so its flags and return value are glibc's), then the disposition is read
// back; if it is SIG_DFL, it is what the program is shown, and poolscope's handler goes back in.
#include "interpose/signals.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <initializer_list>

namespace poolscope {
namespace {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
using SignalFn = sighandler_t (*)(int, sighandler_t);
using SigignoreFn = int (*)(int);
using SiginterruptFn = int (*)(int, int);

std::atomic<SigactionFn> g_sigaction{nullptr};
std::atomic<SignalFn> g_signal{nullptr}, g_sysv_signal{nullptr}, g_sigset{nullptr};
std::atomic<SigignoreFn> g_sigignore{nullptr};
std::atomic<SiginterruptFn> g_siginterrupt{nullptr};

// The next definition of `name` (glibc's), looked up once.
template <typename F>
F Next(std::atomic<F>& slot, const char* name) {
  F f = slot.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
    slot.store(f, std::memory_order_release);
  }
  return f;
}

int RealSigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  SigactionFn f = Next(g_sigaction, "sigaction");
  if (f == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return f(sig, act, old);
}

struct Managed {
  int sig;
  bool held;                // poolscope's handler is installed in place of SIG_DFL
  struct sigaction shown;  // while held: what sigaction() shows the program
};
Managed g_table[] = {{SIGTERM, false, {}}, {SIGINT, false, {}}, {SIGHUP, false, {}}};
std::atomic<bool> g_installed{false};
std::atomic<bool> g_table_lock{false};
void (*g_write_report)() = nullptr;
bool (*g_defer)(int sig) = nullptr;

std::atomic<int> g_report_signal{0};
uint64_t g_report_signal_ns = 0;
bool g_interrupted_poolscope = false;
uintptr_t g_text_begin = 0, g_text_end = 0;  // poolscope's executable segment

// The table's entry for `sig`, or null: not one of the three, or not installed.
Managed* Find(int sig) {
  if (!g_installed.load(std::memory_order_acquire)) return nullptr;
  for (Managed& m : g_table) {
    if (m.sig == sig) return &m;
  }
  return nullptr;
}

// Every signal blocked while the lock is held, so a handler on the same thread never waits for it.
class TableLock {
 public:
  TableLock() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved_);
    while (g_table_lock.exchange(true, std::memory_order_acquire)) sched_yield();
  }
  ~TableLock() {
    g_table_lock.store(false, std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  TableLock(const TableLock&) = delete;
  TableLock& operator=(const TableLock&) = delete;

 private:
  sigset_t saved_;
};

// fork(): the child's one thread never holds the lock, whoever held it in the parent.
void ResetLockInChild() { g_table_lock.store(false, std::memory_order_relaxed); }

void OnSignal(int sig, siginfo_t* info, void* context);

bool IsOurs(const struct sigaction& a) { return a.sa_sigaction == OnSignal; }

void InstallHandler(int sig) {
  struct sigaction ours = {};
  ours.sa_sigaction = OnSignal;
  ours.sa_flags = SA_SIGINFO | SA_RESTART;
  // The program's other handlers do not run while the report is written; the three signals (each
  // ends the process at once then) and the faults stay deliverable.
  sigfillset(&ours.sa_mask);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT}) {
    sigdelset(&ours.sa_mask, s);
  }
  RealSigaction(sig, &ours, nullptr);
}

// After a request was made for real: SIG_DFL is taken back, anything else is the program's.
// Holds the table lock.
void Settle(Managed& m) {
  struct sigaction now;
  if (RealSigaction(m.sig, nullptr, &now) != 0) return;
  if (IsOurs(now)) return;  // unchanged (sigset(SIG_HOLD))
  if (now.sa_handler == SIG_DFL) {  // (sa_handler and sa_sigaction share their storage)
    m.shown = now;
    InstallHandler(m.sig);
    m.held = true;
  } else {
    m.held = false;
  }
}

// A request through one of glibc's functions: `call` makes it, `old_was_ours` rewrites what it
// returns about the previous disposition when that was poolscope's handler.
template <typename Result, typename Call, typename Fix>
Result Apply(int sig, Call call, Result failed, Fix old_was_ours) {
  Managed* m = Find(sig);
  if (m == nullptr) return call();
  TableLock lock;
  const bool was_held = m->held;
  Result r = call();
  if (r == failed) return r;
  Settle(*m);
  if (was_held) old_was_ours(&r);
  return r;
}

pid_t Tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// Puts `sig` back to its default action and unblocks it on this thread: it kills at its next arrival.
void RestoreDefault(int sig) {
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  RealSigaction(sig, &dfl, nullptr);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, sig);
  pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
}

// Ends the process with `sig` and its default action, as the kernel would have without us.
void Die(int sig) {
  RestoreDefault(sig);
  syscall(SYS_tgkill, getpid(), Tid(), sig);
}

// Sends `sig` to this thread after the deadline (a POSIX timer: the kernel's, created by system
// call, which allocates nothing in the process). False when it could not be armed.
bool ArmWatchdog(int sig) {
  struct sigevent ev = {};
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = sig;
  ev._sigev_un._tid = Tid();
  int timer = -1;
  if (syscall(SYS_timer_create, CLOCK_MONOTONIC, &ev, &timer) != 0) return false;
  struct itimerspec when = {};
  when.it_value.tv_sec = kReportDeadlineSeconds;
  return syscall(SYS_timer_settime, timer, 0, &when, nullptr) == 0;
}

constexpr size_t kStackBytes = size_t{1} << 20;
constexpr size_t kGuardBytes = 4096;

void WriteReportOnThisStack() { g_write_report(); }  // back to the handler (uc_link)

// The report on a stack of its own: the signal may have come while the thread ran on a small one
// (a coroutine's, a thread's of PTHREAD_STACK_MIN). Written in place when no stack can be mapped.
void WriteReport() {
  void* map = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ucontext_t back, run;
  if (map == MAP_FAILED || mprotect(map, kGuardBytes, PROT_NONE) != 0 || getcontext(&run) != 0) {
    g_write_report();
    return;
  }
  char* stack = static_cast<char*>(map) + kGuardBytes;
  run.uc_stack.ss_sp = stack;
  run.uc_stack.ss_size = kStackBytes;
  run.uc_link = &back;
  makecontext(&run, WriteReportOnThisStack, 0);
  const unsigned id = VALGRIND_STACK_REGISTER(stack, stack + kStackBytes);
  if (swapcontext(&back, &run) != 0) g_write_report();
  VALGRIND_STACK_DEREGISTER(id);
}

void OnSignal(int sig, siginfo_t*, void* context) {
  const int saved_errno = errno;
  // The first of the three signals writes the report; any other arrival ends the process now.
  int none = 0;
  if (!g_report_signal.compare_exchange_strong(none, sig, std::memory_order_acq_rel)) {
    Die(sig);
    errno = saved_errno;
    return;
  }
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  g_report_signal_ns = static_cast<uint64_t>(now.tv_sec) * 1000000000 + static_cast<uint64_t>(now.tv_nsec);
  // From here the signal kills at once if it comes again (SIG_DFL, unblocked), and the watchdog
  // sends it once the deadline passes.
  RestoreDefault(sig);
  if (ArmWatchdog(sig) && g_write_report != nullptr) {
    const auto* uc = static_cast<const ucontext_t*>(context);
    const uintptr_t pc = uc != nullptr ? static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]) : 0;
    g_interrupted_poolscope = pc - g_text_begin < g_text_end - g_text_begin;
    if (g_defer != nullptr && g_defer(sig)) {
      g_interrupted_poolscope = true;
      errno = saved_errno;
      return;
    }
    WriteReport();
  }
  Die(sig);
  errno = saved_errno;  // (reached only if the program put a handler in meanwhile)
}

// poolscope's executable segment, for SignalInterruptedPoolscope.
int FindText(struct dl_phdr_info* info, size_t, void*) {
  const uintptr_t self = reinterpret_cast<uintptr_t>(&FindText);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    if (self - begin < ph.p_memsz) {
      g_text_begin = begin;
      g_text_end = begin + ph.p_memsz;
      return 1;
    }
  }
  return 0;
}

}  // namespace

void RunDeferredSignalReport(int sig) {
  if (g_write_report != nullptr) WriteReport();
  Die(sig);
}

void InstallSignalReport(void (*write_report)(), bool (*defer)(int sig)) {
  if (g_installed.load(std::memory_order_acquire) || write_report == nullptr) return;
  g_defer = defer;
  if (Next(g_sigaction, "sigaction") == nullptr) return;
  Next(g_signal, "signal");
  Next(g_sysv_signal, "sysv_signal");
  Next(g_sigset, "sigset");
  Next(g_sigignore, "sigignore");
  Next(g_siginterrupt, "siginterrupt");
  dl_iterate_phdr(FindText, nullptr);
  g_write_report = write_report;
  pthread_atfork(nullptr, nullptr, ResetLockInChild);
  TableLock lock;
  for (Managed& m : g_table) {
    struct sigaction now;
    if (RealSigaction(m.sig, nullptr, &now) != 0) continue;
    if (now.sa_handler == SIG_DFL) {
      m.shown = now;
      InstallHandler(m.sig);
      m.held = true;
    }
  }
  g_installed.store(true, std::memory_order_release);
}

int ReportSignal() { return g_report_signal.load(std::memory_order_acquire); }

uint64_t ReportSignalNs() { return ReportSignal() != 0 ? g_report_signal_ns : 0; }

bool SignalInterruptedPoolscope() { return ReportSignal() != 0 && g_interrupted_poolscope; }

const char* SignalName(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
  }
  static char other[16];
  snprintf(other, sizeof other, "SIG%d", sig);
  return other;
}

int Sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  Managed* m = Find(sig);
  if (m == nullptr) return RealSigaction(sig, act, old);
  TableLock lock;
  const bool was_held = m->held;
  const struct sigaction shown = m->shown;
  int rc = RealSigaction(sig, act, old);
  if (rc != 0) return rc;
  if (act != nullptr) Settle(*m);
  if (was_held && old != nullptr) *old = shown;
  return rc;
}

sighandler_t Signal(int sig, sighandler_t handler) {
  SignalFn f = Next(g_signal, "signal");
  if (f == nullptr) return SIG_ERR;
  return Apply(sig, [&] { return f(sig, handler); }, SIG_ERR, [](sighandler_t* old) { *old = SIG_DFL; });
}

sighandler_t SysvSignal(int sig, sighandler_t handler) {
  SignalFn f = Next(g_sysv_signal, "sysv_signal");
  if (f == nullptr) return SIG_ERR;
  return Apply(sig, [&] { return f(sig, handler); }, SIG_ERR, [](sighandler_t* old) { *old = SIG_DFL; });
}

// glibc's sigset, made of the interposed sigaction: sigset changes the thread's signal mask, which the
// table lock would undo.
sighandler_t Sigset(int sig, sighandler_t disp) {
  if (Find(sig) == nullptr) {
    SignalFn f = Next(g_sigset, "sigset");
    return f != nullptr ? f(sig, disp) : SIG_ERR;
  }
  if (disp == SIG_ERR) {
    errno = EINVAL;
    return SIG_ERR;
  }
  sigset_t set, oset;
  sigemptyset(&set);
  sigaddset(&set, sig);
  struct sigaction act = {}, oact;
  if (disp == SIG_HOLD) {
    if (sigprocmask(SIG_BLOCK, &set, &oset) < 0) return SIG_ERR;
    if (sigismember(&oset, sig)) return SIG_HOLD;
    if (Sigaction(sig, nullptr, &oact) < 0) return SIG_ERR;
    return oact.sa_handler;
  }
  act.sa_handler = disp;
  sigemptyset(&act.sa_mask);
  if (Sigaction(sig, &act, &oact) < 0) return SIG_ERR;
  if (sigprocmask(SIG_UNBLOCK, &set, &oset) < 0) return SIG_ERR;
  return sigismember(&oset, sig) ? SIG_HOLD : oact.sa_handler;
}

// glibc's siginterrupt sets or clears SA_RESTART in the disposition in place; while poolscope's
// handler stands in, in the one the program is shown as well.
int Siginterrupt(int sig, int interrupt) {
  SiginterruptFn f = Next(g_siginterrupt, "siginterrupt");
  if (f == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  Managed* m = Find(sig);
  if (m == nullptr) return f(sig, interrupt);
  TableLock lock;
  int rc = f(sig, interrupt);
  if (rc == 0 && m->held) {
    if (interrupt) {
      m->shown.sa_flags &= ~SA_RESTART;
    } else {
      m->shown.sa_flags |= SA_RESTART;
    }
  }
  return rc;
}

int Sigignore(int sig) {
  SigignoreFn f = Next(g_sigignore, "sigignore");
  if (f == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return Apply(sig, [&] { return f(sig); }, -1, [](int*) {});
}

}  // namespace poolscope
