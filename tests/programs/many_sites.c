// Forty call sites, site_N allocating (and freeing) N + 1 blocks: the report's sites ledger must list
// the busiest ones, most allocations first, whatever the order the sites were first seen in.
#include <stdio.h>
#include <stdlib.h>

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

int main(void) {
  // An order that is neither ascending nor descending in the counts.
  site_17(); site_3(); site_39(); site_0(); site_25(); site_8(); site_31(); site_12(); site_36(); site_5();
  site_21(); site_1(); site_28(); site_14(); site_33(); site_9(); site_19(); site_38(); site_2(); site_26();
  site_11(); site_35(); site_6(); site_23(); site_30(); site_15(); site_4(); site_37(); site_20(); site_10();
  site_29(); site_7(); site_34(); site_16(); site_24(); site_13(); site_32(); site_18(); site_27(); site_22();
  puts("done");
  return 0;
}
