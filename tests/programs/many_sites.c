// Forty call sites, site_N allocating (and freeing) N + 1 blocks: the report's sites ledger must list
// the busiest ones, most allocations first, whatever the order the sites were first seen in.
// `many_sites interleaved`: the same counts from forty other sites, once_N, one allocation a call, in
// rounds that call every site still short of its count (each allocation from another site than the
// one before).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SITE(n)                                                  \
  __attribute__((noinline)) static void site_##n(void) {         \
    for (int i = 0; i < (n) + 1; ++i) {                          \
      void* volatile p = malloc(24);                             \
      free(p);                                                   \
    }                                                            \
  }
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7) SITE(8) SITE(9)
SITE(10) SITE(11) SITE(12) SITE(13) SITE(14) SITE(15) SITE(16) SITE(17) SITE(18) SITE(19)
SITE(20) SITE(21) SITE(22) SITE(23) SITE(24) SITE(25) SITE(26) SITE(27) SITE(28) SITE(29)
SITE(30) SITE(31) SITE(32) SITE(33) SITE(34) SITE(35) SITE(36) SITE(37) SITE(38) SITE(39)

#define ONCE(n)                                              \
  __attribute__((noinline)) static void once_##n(void) {     \
    void* volatile p = malloc(24);                           \
    free(p);                                                 \
  }
ONCE(0) ONCE(1) ONCE(2) ONCE(3) ONCE(4) ONCE(5) ONCE(6) ONCE(7) ONCE(8) ONCE(9)
ONCE(10) ONCE(11) ONCE(12) ONCE(13) ONCE(14) ONCE(15) ONCE(16) ONCE(17) ONCE(18) ONCE(19)
ONCE(20) ONCE(21) ONCE(22) ONCE(23) ONCE(24) ONCE(25) ONCE(26) ONCE(27) ONCE(28) ONCE(29)
ONCE(30) ONCE(31) ONCE(32) ONCE(33) ONCE(34) ONCE(35) ONCE(36) ONCE(37) ONCE(38) ONCE(39)

static void (*const once[40])(void) = {
    once_0,  once_1,  once_2,  once_3,  once_4,  once_5,  once_6,  once_7,  once_8,  once_9,
    once_10, once_11, once_12, once_13, once_14, once_15, once_16, once_17, once_18, once_19,
    once_20, once_21, once_22, once_23, once_24, once_25, once_26, once_27, once_28, once_29,
    once_30, once_31, once_32, once_33, once_34, once_35, once_36, once_37, once_38, once_39,
};

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "interleaved") == 0) {
    for (int round = 0; round < 40; ++round) {
      for (int k = 0; k < 40; ++k) {
        const int n = (k * 17 + round) % 40;  // a different order each round
        if (round <= n) once[n]();
      }
    }
    puts("done");
    return 0;
  }
  // An order that is neither ascending nor descending in the counts.
  site_17(); site_3(); site_39(); site_0(); site_25(); site_8(); site_31(); site_12(); site_36(); site_5();
  site_21(); site_1(); site_28(); site_14(); site_33(); site_9(); site_19(); site_38(); site_2(); site_26();
  site_11(); site_35(); site_6(); site_23(); site_30(); site_15(); site_4(); site_37(); site_20(); site_10();
  site_29(); site_7(); site_34(); site_16(); site_24(); site_13(); site_32(); site_18(); site_27(); site_22();
  puts("done");
  return 0;
}
