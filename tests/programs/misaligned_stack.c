/* File: tests/programs/misaligned_stack.c
 *
 * Calls malloc, calloc, realloc and free with its stack 8 bytes off the ABI's 16-byte alignment, as
 * hand-written assembly does (glibc copes): sizes from 8 to about 6 KiB, so that pooled, regular and
 * tracked paths all run, and one block of 4,321 bytes is kept to exit. Prints one line; exits 0
 * (misaligned_stack_test). x86-64 only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* call_off(fn, a, b): calls fn(a, b) with the stack pointer 8 bytes off at fn's entry. On entry rsp
 * is 8 mod 16; after a push it is 0 mod 16, and one more 8-byte adjustment makes the call enter fn
 * with rsp 0 mod 16 instead of 8. */
void* call_off(void* fn, void* a, void* b);
__asm__(
    ".text\n"
    ".globl call_off\n"
    ".type call_off, @function\n"
    "call_off:\n"
    "  .cfi_startproc\n"
    "  push %rbx\n"
    "  .cfi_adjust_cfa_offset 8\n"
    "  .cfi_offset %rbx, -16\n"
    "  sub $8, %rsp\n"
    "  .cfi_adjust_cfa_offset 8\n"
    "  mov %rdi, %rax\n"
    "  mov %rsi, %rdi\n"
    "  mov %rdx, %rsi\n"
    "  call *%rax\n"
    "  add $8, %rsp\n"
    "  .cfi_adjust_cfa_offset -8\n"
    "  pop %rbx\n"
    "  .cfi_adjust_cfa_offset -8\n"
    "  ret\n"
    "  .cfi_endproc\n"
    ".size call_off, .-call_off\n");

static void* volatile kept;

int main(void) {
  void* blocks[64];
  unsigned long sum = 0;
  for (int i = 0; i < 64; ++i) {
    const size_t n = 8 + (size_t)i * 97;
    blocks[i] = call_off((void*)malloc, (void*)n, NULL);
    if (blocks[i] == NULL) return 1;
    memset(blocks[i], i, n);
  }
  for (int i = 0; i < 64; i += 2) {
    blocks[i] = call_off((void*)realloc, blocks[i], (void*)(size_t)(16 + i * 31));
    if (blocks[i] == NULL) return 1;
    sum += ((unsigned char*)blocks[i])[0];
  }
  for (int i = 0; i < 64; ++i) call_off((void*)free, blocks[i], NULL);
  char* z = call_off((void*)calloc, (void*)(size_t)10, (void*)(size_t)10);
  if (z == NULL) return 1;
  for (int i = 0; i < 100; ++i) sum += (unsigned char)z[i];
  call_off((void*)free, z, NULL);
  kept = call_off((void*)malloc, (void*)(size_t)4321, NULL);
  printf("misaligned_stack: sum %lu\n", sum);
  return 0;
}
