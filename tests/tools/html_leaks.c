// File: tests/tools/html_leaks.c
//
// The program whose report html_browser_test renders: at exit it holds blocks of each of memcheck's
// classes, and some of them glibc allocated on its behalf.
//   definitely lost: strdup's copy (lose_copy) and the head of a 6-node list (lose_list);
//   indirectly lost: the list's other 5 nodes;
//   possibly lost:   a block only a global's interior pointer reaches (keep_inside);
//   still reachable: a block a global points to (keep_block), stdout's buffer (greet, through
//                    printf), and a log FILE left open (open_log, through fopen) with its buffer
//                    (write_log, through fputs).
// argv[1] is the log's path. Built at -O0 so that each function keeps its frame.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node {
  struct node* next;
  char payload[40];
};

static char* kept;    // still reachable
static char* inside;  // possibly lost: points 16 bytes into its block
static FILE* log_file;

__attribute__((noinline)) static void lose_copy(const char* name) {
  char* volatile copy = strdup(name);
  (void)copy;
}

__attribute__((noinline)) static void lose_list(int n) {
  struct node* volatile head = NULL;
  for (int i = 0; i < n; ++i) {
    struct node* node = calloc(1, sizeof *node);
    node->next = head;
    head = node;
  }
}

__attribute__((noinline)) static void keep_block(void) { kept = malloc(200); }

__attribute__((noinline)) static void keep_inside(void) { inside = (char*)malloc(96) + 16; }

__attribute__((noinline)) static void greet(const char* who) { printf("hello, %s\n", who); }

__attribute__((noinline)) static int open_log(const char* path) {
  log_file = fopen(path, "w");
  return log_file != NULL;
}

__attribute__((noinline)) static void write_log(const char* line) { fputs(line, log_file); }

int main(int argc, char** argv) {
  if (argc < 2 || !open_log(argv[1])) return 2;
  lose_copy("a name strdup copies");
  lose_list(6);
  keep_block();
  keep_inside();
  greet("poolscope");
  write_log("started\n");
  fflush(log_file);
  return 0;
}
