/* File: bench/call_floor.c
 *
 * Two functions that do nothing, in a shared library of their own (libcall_floor.so), so that a call
 * from the benchmark goes through the PLT to another object, as every call to an interposed malloc
 * does. article_bench's call_floor/2 (one call of each, the shape of a malloc+free pair) and
 * call_floor/4 (the four calls of an explicit arena round) time them: the least any allocator reached
 * this way can cost on the machine, whatever it does inside. */
#include <stddef.h>

void* call_floor_take(size_t n) { return (void*)(n + 16); }

void call_floor_give(void* p) { (void)p; }
