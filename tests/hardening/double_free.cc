// File: tests/hardening/double_free.cc
//
// A double free of a pooled block is detected, counted (errors.double_frees, docs/report-schema.md),
// reported, and changes nothing, also when the block's first free comes from another thread (a
// remote free into a pool its owner still holds) and the second from the owner.
// Afterwards a live neighbour must keep its contents and never be handed out again.
// Only meaningful preloaded with pooling on (glibc itself aborts on a double free).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char* g_a;

static void* FreeOnOtherThread(void*) {
  free(g_a);
  return nullptr;
}

int main() {
  g_a = static_cast<char*>(malloc(16));
  char* b = static_cast<char*>(malloc(16));
  memset(b, 0x42, 16);
  pthread_t t;
  pthread_create(&t, nullptr, FreeOnOtherThread, nullptr);
  pthread_join(t, nullptr);
  free(g_a);  // the double free, by the owner
  char* c1 = static_cast<char*>(malloc(16));
  char* c2 = static_cast<char*>(malloc(16));
  char* d = static_cast<char*>(malloc(16));
  free(c1);
  free(c2);
  int reused = 0;
  char* more[12];
  for (auto& e : more) {
    e = static_cast<char*>(malloc(16));
    if (e == b) ++reused;
  }
  bool intact = true;
  for (int i = 0; i < 16; ++i) intact = intact && b[i] == 0x42;
  printf("live block intact: %s; handed out again: %d\n", intact ? "yes" : "NO", reused);
  for (auto& e : more) free(e);
  free(d);
  free(b);
  return intact && reused == 0 ? 0 : 1;
}
