// File: interpose/thread_registers.h
//
// The general registers of the process's other threads, for the exit scan: memcheck and LeakSanitizer
// read every live thread's registers as roots, and a thread that keeps the only pointer to a block in
// a register (a loop that spins on it) keeps the block reachable for them.
//
// A thread cannot read another's registers; a process can, through ptrace, but not its own threads.
// So a helper task is cloned that shares the process's memory (CLONE_VM, not CLONE_THREAD: a process
// of its own, the caller's child, sending no signal when it ends); it seizes each thread, interrupts
// it, reads its registers, and lets it go at once. A thread blocked in a system call sees the call
// restarted, as under a debugger's attach: no signal handler runs, nothing returns EINTR. The helper
// uses raw system calls only (it runs on the caller's thread pointer, so it must not touch libc's
// thread-local state).
//
// Not used under valgrind (its threads' registers are the tool's, not the program's) nor under a
// tracer (a thread can have one tracer only). Where the kernel refuses (Yama's ptrace_scope 3, a
// process made non-dumpable, a seccomp filter), no thread's registers are read and the caller is told.
#ifndef POOLSCOPE_INTERPOSE_THREAD_REGISTERS_H_
#define POOLSCOPE_INTERPOSE_THREAD_REGISTERS_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace poolscope {

// One thread's general registers, as PTRACE_GETREGS gives them (struct user_regs_struct: 27 words).
struct ThreadRegisters {
  static constexpr size_t kWords = 27;
  pid_t tid;
  uint64_t words[kWords];
};

struct RegistersRead {
  size_t read;    // threads whose registers are in out[0, read)
  size_t failed;  // other threads of the process (not the caller) whose registers could not be read
};

// The process's threads (the caller's included), from /proc/self/task: the first `max` ids into
// tids, their number into *count. False when the folder cannot be read. Calls no allocator.
bool ListThreads(pid_t* tids, size_t max, size_t* count);

// Reads the registers of every thread of the process but the caller's into out[0, max). `stack` is
// memory for the helper's stack (at least kHelperStackBytes, 16-aligned, writable). Gives up on the
// helper after timeout_ms (it is then killed; threads it held are let go by the kernel). Calls no
// allocator.
constexpr size_t kHelperStackBytes = 64 * 1024;
RegistersRead ReadOtherThreadsRegisters(ThreadRegisters* out, size_t max, void* stack, uint64_t timeout_ms);

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_THREAD_REGISTERS_H_
