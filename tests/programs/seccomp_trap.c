// A process in a seccomp sandbox of the kind browsers run their renderers in: openat and open are
// trapped (SECCOMP_RET_TRAP) and a SIGSYS handler answers them with EACCES, as a broker that refuses
// the path would. Then it allocates on the regular path for `ms` milliseconds (timeline_test runs
// it under poolscope, whose timeline samples read /proc/self/statm meanwhile), and prints how many
// opens it refused and a checksum. A trapped call made while SIGSYS is blocked kills the process.
// Usage: seccomp_trap MS
#define _GNU_SOURCE  // REG_RAX
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static volatile sig_atomic_t g_refused;

static void OnSigsys(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)info;
  ucontext_t* uc = (ucontext_t*)context;
  uc->uc_mcontext.gregs[REG_RAX] = -EACCES;
  ++g_refused;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const long ms = atol(argv[1]);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = OnSigsys;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSYS, &sa, NULL);
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_open, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
  };
  struct sock_fprog prog = {sizeof filter / sizeof filter[0], filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("seccomp");
    return 1;
  }
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  unsigned long sum = 0;
  do {
    char* p = malloc(1000);
    if (p == NULL) return 1;
    p[0] = 1;
    sum += (unsigned long)p[0];
    free(p);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < ms);
  printf("sandboxed: %s, %lu\n", sum > 0 ? "allocated" : "nothing", sum > 0);
  return 0;
}
