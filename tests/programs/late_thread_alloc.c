// Allocations a thread makes after poolscope's own thread-exit handler ran: a pthread key destructor
// of the program's (its key is made after poolscope's, so its destructor runs later) allocates and
// frees. `late_thread_alloc LATE`: 4 threads; at exit each one's key destructor makes LATE rounds of
// malloc(20)+free (a pooled size) and malloc(5000)+free (above the pool size). The test compares the
// report of LATE=0 with LATE=1: the difference must be exactly these calls.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { kThreads = 4, kRounds = 25 };

static pthread_key_t key;
static int late;

static void at_thread_exit(void* value) {
  (void)value;
  for (int i = 0; i < late * kRounds; ++i) {
    char* small = malloc(20);
    char* large = malloc(5000);
    if (small == NULL || large == NULL) abort();
    small[0] = large[4999] = 1;
    free(large);
    free(small);
  }
}

static void* worker(void* arg) {
  pthread_setspecific(key, arg);
  char* p = malloc(100);
  free(p);
  return NULL;
}

int main(int argc, char** argv) {
  late = argc > 1 ? atoi(argv[1]) : 1;
  if (pthread_key_create(&key, at_thread_exit) != 0) return 1;
  pthread_t threads[kThreads];
  static int ids[kThreads];  /* a non-null key value: the destructor runs only for those */
  for (int i = 0; i < kThreads; ++i) pthread_create(&threads[i], NULL, worker, &ids[i]);
  for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  printf("late allocations per thread: %d\n", 2 * late * kRounds);
  return 0;
}
