#include "interpose/side_thread.h"

#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "gtest/gtest.h"

namespace poolscope {
namespace {

TEST(SeccompFilteredTest, OnlyModeZeroIsUnfiltered) {
  EXPECT_FALSE(SeccompFiltered("Name:\tx\nSeccomp:\t0\nSeccomp_filters:\t0\n"));
  EXPECT_FALSE(SeccompFiltered("Name:\tx\nSeccomp:\t0"));
  EXPECT_TRUE(SeccompFiltered("Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t1\n"));
  EXPECT_TRUE(SeccompFiltered("Name:\tx\nSeccomp:\t1\n"));
  EXPECT_TRUE(SeccompFiltered("Name:\tx\nSeccomp:\t02\n"));
  EXPECT_TRUE(SeccompFiltered("Name:\tx\nSeccomp_filters:\t0\n"));  // no Seccomp: line at all
  EXPECT_TRUE(SeccompFiltered(""));
}

struct Probe {
  long tid;
  uint64_t blocked;  // the thread's signal mask, first word
  int ran;
};

// Uses nothing but system calls made directly: no errno, no thread-local storage.
int Record(void* arg) {
  auto* p = static_cast<Probe*>(arg);
  p->tid = syscall(SYS_gettid);
  uint64_t mask[2] = {0, 0};
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, nullptr, mask, 8);
  p->blocked = mask[0];
  __atomic_store_n(&p->ran, 1, __ATOMIC_RELEASE);
  return 0;
}

TEST(TracedTest, OnlyTracerPidZeroIsUntraced) {
  EXPECT_FALSE(Traced("Name:\tx\nTracerPid:\t0\nUid:\t0\n"));
  EXPECT_FALSE(Traced("Name:\tx\nTracerPid:\t0"));
  EXPECT_FALSE(Traced("Name:\tx\n"));  // no line: nothing says a tracer is there
  EXPECT_TRUE(Traced("Name:\tx\nTracerPid:\t4242\nUid:\t0\n"));
  EXPECT_TRUE(Traced("Name:\tx\nTracerPid:\t01\n"));
}

TEST(SideThreadTest, RunsOnAnotherThreadWithEverySignalBlockedAndJoins) {
  sigset_t before, after;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &before), 0);
  Probe probe = {0, 0, 0};
  SideThread side;
  errno = EDOM;
  ASSERT_TRUE(side.Start(Record, &probe));
  side.Join();
  EXPECT_EQ(errno, EDOM);
  EXPECT_EQ(__atomic_load_n(&probe.ran, __ATOMIC_ACQUIRE), 1);  // Join returned after the thread's work
  EXPECT_NE(probe.tid, 0);
  EXPECT_NE(probe.tid, syscall(SYS_gettid));
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGCHLD, SIGALRM}) {
    EXPECT_NE(probe.blocked & (uint64_t{1} << (sig - 1)), 0u) << sig;
  }
  // The starting thread's own mask is as it was.
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &after), 0);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) EXPECT_EQ(sigismember(&before, sig), sigismember(&after, sig)) << sig;
  // The thread is gone: its task has left the process.
  EXPECT_NE(syscall(SYS_tgkill, getpid(), probe.tid, 0), 0);
}

TEST(SideThreadTest, StartsAgainAfterJoin) {
  for (int i = 0; i < 20; ++i) {
    Probe probe = {0, 0, 0};
    SideThread side;
    ASSERT_TRUE(side.Start(Record, &probe)) << i;
    side.Join();
    EXPECT_EQ(probe.ran, 1) << i;
  }
}

}  // namespace
}  // namespace poolscope
