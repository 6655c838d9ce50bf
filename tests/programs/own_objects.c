/* own_objects: a C program that prints the shared objects mapped into it at the start of main (the
 * path of every file mapping whose name holds ".so", one a line, as /proc/self/maps lists them, with
 * repeats), then makes exactly 23 mallocs and 20 frees: 20 blocks of 24..43 bytes freed at once, and
 * 3 blocks of 1000 bytes kept by leak_three(). Nothing else here allocates: /proc/self/maps is read
 * with read(2) into a static buffer and the lines go out with write(2), no stdio.
 * own_objects_test compares the objects with the bare run's and the counts with its report. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char maps[1 << 20];
static void* kept[3];

static void print_objects(void) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) _exit(2);
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, maps + n, sizeof maps - 1 - n);
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  maps[n] = '\0';
  for (char* line = maps; *line != '\0';) {
    char* end = strchr(line, '\n');
    if (end == NULL) end = line + strlen(line);
    char* path = memchr(line, '/', (size_t)(end - line));
    if (path != NULL && memmem(path, (size_t)(end - path), ".so", 3) != NULL) {
      if (write(1, path, (size_t)(end - path)) < 0 || write(1, "\n", 1) < 0) _exit(3);
    }
    line = *end == '\n' ? end + 1 : end;
  }
}

__attribute__((noinline)) static void leak_three(void) {
  for (int i = 0; i < 3; ++i) kept[i] = malloc(1000);
  __asm__ volatile("" : : "r"(kept) : "memory");
}

int main(void) {
  print_objects();
  for (int i = 0; i < 20; ++i) {
    void* p = malloc(24 + (size_t)i);
    __asm__ volatile("" : : "r"(p) : "memory");
    free(p);
  }
  leak_three();
  return 0;
}
