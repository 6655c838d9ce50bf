/* Statically linked; prints "done" after the number of seconds given (default 5) and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  int seconds = argc > 1 ? atoi(argv[1]) : 5;
  for (int i = 0; i < seconds * 10; ++i) usleep(100000);
  puts("done");
  return 0;
}
