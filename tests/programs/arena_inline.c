/* File: tests/programs/arena_inline.c
 *
 * Explicit arenas through the inline poolscope_arena_alloc of poolscope.h (arena_inline_test). Checks
 * itself: every block zero, aligned, disjoint from the others of its arena. Does no malloc of its own
 * after start-up except through stdio, so the test can count every arena block in the report.
 *
 * Usage: arena_inline ROUNDS [REPORT COPY]
 *   ROUNDS rounds of: open, 3 blocks (4 B align 4, 20 B align 1, 40 B align 0), close. Then one
 *   arena is opened and 100 blocks of 1..100 bytes (align 8) allocated in it: 5,050 bytes. With
 *   REPORT and COPY, the program then waits (at most 20 s) for a snapshot (a report whose reason is
 *   "snapshot") written to REPORT after those blocks, copies it to COPY, and closes the arena.
 * Prints "arena_inline ok inline=N" (N: 1 when the arenas' view let the program carve inline, the
 * preload library present, pooling on, track=0) and exits 0, or prints what failed and exits 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "interpose/poolscope.h"

static int failures;

static void check(int ok, const char* what, long round) {
  if (!ok && failures++ < 5) fprintf(stderr, "arena_inline: %s (round %ld)\n", what, round);
}

static int all_zero(const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return 0;
  }
  return 1;
}

/* A snapshot at REPORT begun after this call, copied to COPY; 0 when none came. The report is removed
 * and the second snapshot written after that is taken (the first may have been read before). */
static int copy_snapshot(const char* report, const char* copy) {
  static char buf[1 << 20];
  const time_t start = time(NULL);
  int seen = 0;
  unlink(report);
  while (time(NULL) - start < 20) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    FILE* f = fopen(report, "r");
    if (f == NULL) continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (strstr(buf, "\"reason\": \"snapshot\"") == NULL && strstr(buf, "\"reason\":\"snapshot\"") == NULL) continue;
    if (seen++ == 0) {
      unlink(report);
      continue;
    }
    FILE* out = fopen(copy, "w");
    if (out == NULL) return 0;
    fwrite(buf, 1, n, out);
    fclose(out);
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    fprintf(stderr, "usage: arena_inline ROUNDS [REPORT COPY]\n");
    return 2;
  }
  const long rounds = atol(argv[1]);
  int inline_seen = 0;
  for (long r = 0; r < rounds; ++r) {
    poolscope_arena* a = poolscope_arena_open();
    check(a != NULL, "open failed", r);
    if (a == NULL) break;
    unsigned char* i = poolscope_arena_alloc(a, 4, 4);
    unsigned char* b = poolscope_arena_alloc(a, 20, 1);
    unsigned char* c = poolscope_arena_alloc(a, 40, 0);
    check(i != NULL && b != NULL && c != NULL, "alloc failed", r);
    if (i == NULL || b == NULL || c == NULL) break;
    check((uintptr_t)i % 4 == 0 && (uintptr_t)c % 16 == 0, "misaligned", r);
    check(all_zero(i, 4) && all_zero(b, 20) && all_zero(c, 40), "block not zero", r);
    check(b >= i + 4 || i >= b + 20, "blocks overlap", r);
    check(c >= b + 20 || b >= c + 40, "blocks overlap", r);
    memset(i, 0xff, 4);
    memset(b, 0xff, 20);
    memset(c, 0xff, 40);
    if (((struct poolscope_arena_view*)a)->limit != 0) inline_seen = 1;
    poolscope_arena_close(a);
  }
  poolscope_arena* a = poolscope_arena_open();
  if (a == NULL) return 1;
  for (size_t n = 1; n <= 100; ++n) {
    unsigned char* p = poolscope_arena_alloc(a, n, 8);
    check(p != NULL && (uintptr_t)p % 8 == 0 && all_zero(p, n), "held block", (long)n);
    if (p != NULL) memset(p, 0xee, n);
  }
  if (argc == 4) check(copy_snapshot(argv[2], argv[3]), "no snapshot came", 0);
  poolscope_arena_close(a);
  if (failures != 0) {
    printf("arena_inline failed\n");
    return 1;
  }
  printf("arena_inline ok inline=%d\n", inline_seen);
  return 0;
}
