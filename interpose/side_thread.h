// File: interpose/side_thread.h
//
// A second thread for poolscope's exit work (the reachability scan classifies its two views at once):
// a bare clone of the calling thread that shares its address space and its thread-local storage, so
// that making it allocates nothing the program or glibc would see. What it runs must use none of that
// storage (no malloc, no errno, no thread-local state of poolscope's); it runs with every signal
// blocked, on a stack of poolscope's own memory, and ends with the exit system call.
//
// Thread-safety: one SideThread is started and joined by one thread.
#ifndef POOLSCOPE_INTERPOSE_SIDE_THREAD_H_
#define POOLSCOPE_INTERPOSE_SIDE_THREAD_H_

#include <sys/types.h>

#include <cstddef>

namespace poolscope {

class SideThread {
 public:
  // Whether a second thread may help: not under valgrind (which runs one thread at a time), not in a
  // process with a seccomp filter (which may kill a process for a clone it does not expect), not with
  // one CPU, not while a tracer is attached (a debugger would show the thread start and end).
  static bool Usable();
  // Starts fn(arg); false when it could not (then nothing runs).
  bool Start(int (*fn)(void*), void* arg);
  // Waits until the thread has ended. Only after a Start that returned true.
  void Join();

 private:
  static constexpr size_t kStackBytes = size_t{1} << 20;
  char* stack_ = nullptr;
  pid_t tid_ = 0;  // the kernel sets it before clone returns and clears it when the thread ends
};

// Whether the text of /proc/self/status says a seccomp filter applies: anything but "Seccomp:" followed
// by 0 (and the line's end) counts as filtered, a missing line included.
bool SeccompFiltered(const char* status);
// Whether it says a tracer (gdb, strace) is attached: a TracerPid other than 0.
bool Traced(const char* status);

}  // namespace poolscope

#endif  // POOLSCOPE_INTERPOSE_SIDE_THREAD_H_
