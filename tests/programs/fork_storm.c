/* File: tests/programs/fork_storm.c
 *
 * Two threads malloc and free without pause while the main thread forks argv[1] children one after
 * another (each allocates a little, prints nothing and exits 0) and waits for each. A fork lands at
 * any moment of the threads' work, poolscope's included (its timeline's samples, its locks): every
 * child's report must be whole (fork_storm_test). Prints "children N" and exits 0. -fno-builtin
 * keeps every malloc and free. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int stop;

static void* churn(void* arg) {
  unsigned s = (unsigned)(unsigned long)arg * 2654435761u + 7;
  void* slots[32] = {0};
  while (!stop) {
    s = s * 1103515245u + 12345u;
    unsigned i = (s >> 8) % 32;
    free(slots[i]);
    slots[i] = malloc(1 + (s >> 16) % 200);
  }
  for (int i = 0; i < 32; ++i) free(slots[i]);
  return NULL;
}

int main(int argc, char** argv) {
  const int children = argc > 1 ? atoi(argv[1]) : 100;
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) {
    if (pthread_create(&t[i], NULL, churn, (void*)(long)(i + 1)) != 0) return 1;
  }
  int ok = 0;
  for (int c = 0; c < children; ++c) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      void* p[8];
      for (int i = 0; i < 8; ++i) p[i] = malloc(16 * (i + 1));
      for (int i = 0; i < 8; ++i) free(p[i]);
      exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0) ++ok;
  }
  stop = 1;
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  printf("children %d\n", ok);
  return ok == children ? 0 : 1;
}
