/* Waits inside libc's memset for `poolscope attach`: memset fills a 1,536-byte range whose last bytes
 * lie on a page that is not there yet (registered with userfaultfd), so the main thread stands still
 * inside memset, at a store, with the fill byte in a vector register, until a second thread supplies
 * the page: once libpoolscope.so is loaded in the process, or after 5 s. Then the range must hold the
 * fill byte everywhere. Prints "waiting in memset" (flushed) when the page has been asked for, then
 * "intact" (exit 0) or "changed at OFFSET: 0xXX" (exit 1); exit 2 when userfaultfd is not available. */
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

enum { kPage = 4096, kSize = 1536, kOnFirstPage = 512 };

static int g_uffd;
static char* g_area;

static int PoolscopeLoaded(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  int found = 0;
  while (f != NULL && !found && fgets(line, sizeof line, f) != NULL) found = strstr(line, "libpoolscope") != NULL;
  if (f != NULL) fclose(f);
  return found;
}

static void* Supply(void* arg) {
  (void)arg;
  struct pollfd p = {g_uffd, POLLIN, 0};
  while (poll(&p, 1, -1) != 1) {
  }
  struct uffd_msg msg;
  if (read(g_uffd, &msg, sizeof msg) != sizeof msg || msg.event != UFFD_EVENT_PAGEFAULT) abort();
  printf("waiting in memset\n");
  fflush(stdout);
  for (int i = 0; i < 500 && !PoolscopeLoaded(); ++i) {
    struct timespec t = {0, 10 * 1000 * 1000};
    nanosleep(&t, NULL);
  }
  struct uffdio_zeropage z = {{(unsigned long)(g_area + kPage), kPage}, 0, 0};
  if (ioctl(g_uffd, UFFDIO_ZEROPAGE, &z) != 0) abort();
  return NULL;
}

int main(void) {
  g_uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
  struct uffdio_api api = {UFFD_API, 0, 0};
  if (g_uffd < 0 || ioctl(g_uffd, UFFDIO_API, &api) != 0) {
    perror("userfaultfd");
    return 2;
  }
  g_area = mmap(NULL, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g_area == MAP_FAILED) return 2;
  g_area[0] = 1;  // the first page is there; the second is supplied by Supply
  struct uffdio_register reg = {{(unsigned long)(g_area + kPage), kPage}, UFFDIO_REGISTER_MODE_MISSING, 0};
  if (ioctl(g_uffd, UFFDIO_REGISTER, &reg) != 0) {
    perror("UFFDIO_REGISTER");
    return 2;
  }
  pthread_t t;
  pthread_create(&t, NULL, Supply, NULL);
  char* range = g_area + kPage - kOnFirstPage;
  // libc's memset, called: not stores the compiler would write in its place
  void* (*volatile set)(void*, int, size_t) = memset;
  set(range, 0xa5, kSize);
  pthread_join(t, NULL);
  for (int i = 0; i < kSize; ++i) {
    if ((unsigned char)range[i] != 0xa5) {
      printf("changed at %d: 0x%02x\n", i, (unsigned char)range[i]);
      return 1;
    }
  }
  printf("intact\n");
  return 0;
}
