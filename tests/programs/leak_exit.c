// Exit paths for leak_exitcode (tests/leak_exitcode_test.sh). `leak_exit MODE [STATUS]`; every mode
// but `fork` ends with STATUS (default 0). Every mode prints kLines lines with printf and never
// flushes them, so with stdout on a file the last ones are still in stdio's buffer when exit() runs.
//   leak         loses two 24-byte blocks (pooled with pool=1) and one of 500 bytes: no pointer to them
//                is left; returns
//   leak_pooled  loses one 24-byte block and nothing else; returns
//   kept         keeps two 24-byte blocks and one of 500 bytes in a global (still reachable); returns
//   clean        allocates and frees small and large blocks, keeps nothing; returns
//   exit_leak    like leak, then flushes stdout and ends with _exit(STATUS)
//   stdin_held   a thread waits in fgets on a pipe nobody writes to, holding stdin's lock; main
//                leaks like leak once that lock is taken, and returns
//   stdout_held  prints, then a thread takes stdout's lock and keeps it; main leaks and returns
//   fork         keeps a block and forks twice: the first child frees what it allocates, the second
//                keeps a block; both exit(0). Prints the two children's exit statuses, frees its
//                block, returns 0.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kLines = 3000 };

// Stored through a volatile pointer, so the compiler keeps every allocation and free.
static void* volatile g_keep[4];

static void Print(void) {
  for (int i = 0; i < kLines; ++i) printf("line %d of the program's own output\n", i);
}

static void Keep(void) {
  g_keep[0] = malloc(24);
  g_keep[1] = malloc(24);
  g_keep[2] = malloc(500);
}

// The blocks Keep made, with every pointer to them dropped: definitely lost.
static void Leak(void) {
  Keep();
  for (int i = 0; i < 3; ++i) g_keep[i] = NULL;
}

static void Churn(void) {
  for (int i = 0; i < 1000; ++i) {
    g_keep[3] = malloc(8 + i % 48);
    free(g_keep[3]);
    g_keep[3] = malloc(300 + i % 200);
    free(g_keep[3]);
  }
  g_keep[3] = NULL;
}

static void* ReadStdin(void* arg) {
  (void)arg;
  char line[64];
  if (fgets(line, sizeof line, stdin) != NULL) puts("unexpected input");
  return NULL;
}

static void* HoldStdout(void* arg) {
  (void)arg;
  flockfile(stdout);
  for (;;) pause();
  return NULL;
}

static void Sleep(long ns) {
  struct timespec t = {0, ns};
  nanosleep(&t, NULL);
}

// A 40-byte block whose only pointer is dropped, allocated in a frame of its own; then the stack
// below the caller is overwritten, so that no stale copy of the pointer stays in a stack slot that
// libc's exit path leaves unwritten (memcheck ignores such a slot as undefined; a scan of real
// memory cannot tell).
__attribute__((noinline)) static void LoseBlock(void) {
  g_keep[1] = malloc(40);
  g_keep[1] = NULL;
}

__attribute__((noinline)) static void WipeStack(void) {
  volatile char pad[4096];
  for (size_t i = 0; i < sizeof pad; ++i) pad[i] = 0;
}

static int ChildStatus(int leak) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    Churn();
    if (leak) {
      LoseBlock();
      WipeStack();
    }
    exit(0);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  int status = argc > 2 ? atoi(argv[2]) : 0;
  if (strcmp(mode, "leak") == 0) {
    Churn();
    Leak();
    Print();
  } else if (strcmp(mode, "leak_pooled") == 0) {
    Churn();
    g_keep[0] = malloc(24);
    g_keep[0] = NULL;
    Print();
  } else if (strcmp(mode, "kept") == 0) {
    Churn();
    Keep();
    Print();
  } else if (strcmp(mode, "clean") == 0) {
    Churn();
    g_keep[0] = malloc(24);
    g_keep[2] = malloc(500);
    Print();
    free(g_keep[0]);
    free(g_keep[2]);
  } else if (strcmp(mode, "exit_leak") == 0) {
    Churn();
    Leak();
    Print();
    fflush(stdout);
    _exit(status);
  } else if (strcmp(mode, "stdin_held") == 0) {
    int fds[2];
    if (pipe(fds) != 0 || dup2(fds[0], 0) != 0) return 100;  // fds[1] stays open, never written
    pthread_t reader;
    if (pthread_create(&reader, NULL, ReadStdin, NULL) != 0) return 101;
    // Once stdin's lock cannot be had, the reader holds it, waiting in read().
    while (ftrylockfile(stdin) == 0) {
      funlockfile(stdin);
      Sleep(1000000);
    }
    Churn();
    Leak();
    Print();
  } else if (strcmp(mode, "stdout_held") == 0) {
    Churn();
    Leak();
    Print();
    pthread_t holder;
    if (pthread_create(&holder, NULL, HoldStdout, NULL) != 0) return 101;
    // Until the holder has it (while main has not taken it itself).
    while (ftrylockfile(stdout) == 0) {
      funlockfile(stdout);
      Sleep(1000000);
    }
  } else if (strcmp(mode, "fork") == 0) {
    g_keep[0] = malloc(24);
    g_keep[2] = malloc(500);
    int clean = ChildStatus(0);
    int leaky = ChildStatus(1);
    printf("children: %d %d\n", clean, leaky);
    free(g_keep[0]);
    free(g_keep[2]);
    return 0;
  } else {
    fprintf(stderr, "usage: leak_exit leak|leak_pooled|clean|exit_leak|stdin_held|stdout_held|fork [STATUS]\n");
    return 2;
  }
  return status;
}
