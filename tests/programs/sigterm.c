/* File: tests/programs/sigterm.c
 *
 * A program for signal_report_test: what it does with SIGTERM, SIGINT and SIGHUP, by mode.
 *   sleep SECONDS  keeps a 4321-byte block and some small ones, prints "ready", sleeps, exits 0.
 *   handler        installs a SIGTERM handler with sigaction, prints "ready", waits for the signal;
 *                  the handler writes "handler ran"; exits 3.
 *   ignore         sets SIGTERM to SIG_IGN with signal(), prints "ready", sleeps 2 s, exits 4.
 *   view           prints each disposition change the program makes and sees (through sigaction,
 *                  signal, sysv_signal, sigset, sigignore, siginterrupt), ending with SIGTERM back at SIG_DFL,
 *                  then prints "ready" and sleeps 30 s: the same lines bare and preloaded.
 *   threads        one thread mallocs and frees without end while main, with the three signals
 *                  blocked, prints "ready" and sleeps 30 s: the signal lands on the allocating thread.
 * "ready" is written when the program waits for the signal. Built -fno-builtin: every malloc and
 * free is a call. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void* volatile kept[8];
static volatile sig_atomic_t got;

static void ready(void) {
  printf("ready\n");
  fflush(stdout);
}

static void on_term(int sig) {
  (void)sig;
  static const char line[] = "handler ran\n";
  if (write(1, line, sizeof line - 1) < 0) _exit(99);
  got = 1;
}

static const char* kind(void (*h)(int)) {
  if (h == SIG_DFL) return "SIG_DFL";
  if (h == SIG_IGN) return "SIG_IGN";
  if (h == SIG_HOLD) return "SIG_HOLD";
  if (h == SIG_ERR) return "SIG_ERR";
  return h == on_term ? "on_term" : "another handler";
}

static void show(const char* what, int sig) {
  struct sigaction a;
  if (sigaction(sig, NULL, &a) != 0) {
    printf("%s: sigaction failed\n", what);
    return;
  }
  int masked = 0;
  for (int s = 1; s < NSIG; ++s) masked += sigismember(&a.sa_mask, s) == 1;
  printf("%s: %s %s flags=%#x mask=%d\n", what, strsignal(sig), kind(a.sa_handler),
         (unsigned)a.sa_flags, masked);
}

static void view(void) {
  show("at start", SIGTERM);
  show("at start", SIGINT);
  show("at start", SIGHUP);
  printf("signal(TERM, on_term) was %s\n", kind(signal(SIGTERM, on_term)));
  show("after signal", SIGTERM);
  printf("signal(TERM, SIG_DFL) was %s\n", kind(signal(SIGTERM, SIG_DFL)));
  show("after signal", SIGTERM);
  printf("sysv_signal(HUP, SIG_IGN) was %s\n", kind(sysv_signal(SIGHUP, SIG_IGN)));
  show("after sysv_signal", SIGHUP);
  printf("sigset(HUP, SIG_DFL) was %s\n", kind(sigset(SIGHUP, SIG_DFL)));
  show("after sigset", SIGHUP);
  printf("sigset(TERM, SIG_HOLD) was %s\n", kind(sigset(SIGTERM, SIG_HOLD)));
  printf("sigset(TERM, SIG_DFL) was %s\n", kind(sigset(SIGTERM, SIG_DFL)));
  show("after sigset", SIGTERM);
  printf("sigignore(INT) returned %d\n", sigignore(SIGINT));
  show("after sigignore", SIGINT);
  struct sigaction dfl, old;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGINT, &dfl, &old);
  printf("sigaction(INT, SIG_DFL) was %s\n", kind(old.sa_handler));
  show("after sigaction", SIGINT);
  struct sigaction handler;
  memset(&handler, 0, sizeof handler);
  handler.sa_handler = on_term;
  sigaction(SIGTERM, &handler, &old);
  printf("sigaction(TERM, on_term) was %s\n", kind(old.sa_handler));
  sigaction(SIGTERM, &old, &handler);
  printf("sigaction(TERM, the old one) was %s\n", kind(handler.sa_handler));
  printf("siginterrupt(TERM, 0) returned %d\n", siginterrupt(SIGTERM, 0));
  show("at the end", SIGTERM);
}

__attribute__((noinline)) static void* keep(size_t n) {
  void* p = malloc(n);
  if (p != NULL) memset(p, 1, n);
  return p;
}

/* The kept block has a stack of its own (a leak group is a stack). */
__attribute__((noinline)) static void* keep_big(void) { return keep(4321); }

static void* churn(void* arg) {
  (void)arg;
  void* slots[64] = {0};
  for (unsigned i = 0;; ++i) {
    unsigned k = (i * 2654435761u) >> 26;
    free(slots[k]);
    slots[k] = malloc(8 + (i * 7919u) % 300);
  }
  return NULL;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "sleep") == 0 && argc > 2) {
    kept[0] = keep_big();
    for (int i = 1; i < 8; ++i) kept[i] = keep(24);
    for (int i = 0; i < 100; ++i) free(keep(40));
    ready();
    sleep((unsigned)atoi(argv[2]));
    return 0;
  }
  if (strcmp(mode, "handler") == 0) {
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_handler = on_term;
    if (sigaction(SIGTERM, &a, NULL) != 0) return 1;
    ready();
    for (int i = 0; i < 300 && !got; ++i) usleep(100000);
    return got ? 3 : 1;
  }
  if (strcmp(mode, "ignore") == 0) {
    if (signal(SIGTERM, SIG_IGN) == SIG_ERR) return 1;
    ready();
    sleep(2);
    return 4;
  }
  if (strcmp(mode, "view") == 0) {
    view();
    ready();
    sleep(30);
    return 0;
  }
  if (strcmp(mode, "threads") == 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, churn, NULL) != 0) return 1;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    ready();
    sleep(30);
    return 0;
  }
  fprintf(stderr, "usage: sigterm sleep SECONDS|handler|ignore|view|threads\n");
  return 2;
}
