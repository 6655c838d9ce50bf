// File: interpose/thread_registers_test.cc
//
// ReadOtherThreadsRegisters on threads of this test process: a value only a spinning thread's register
// holds is read; a thread blocked in read() goes on as if nothing happened (its call is restarted, not
// failed with EINTR); the caller's own registers are not read.
#include "interpose/thread_registers.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace poolscope {
namespace {

// Memory for the helper's stack, 64-aligned.
struct HelperStack {
  std::vector<char> bytes = std::vector<char>(kHelperStackBytes + 64);
  void* base() {
    return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(bytes.data()) + 63) & ~uintptr_t{63});
  }
};

constexpr uint64_t kMarker = 0x1234567890abcdefull;
std::atomic<int> g_spinning{0};
std::atomic<int> g_stop{0};
std::atomic<pid_t> g_spinner_tid{0};

void* SpinWithMarkerInR12(void*) {
  g_spinner_tid = static_cast<pid_t>(syscall(SYS_gettid));
  // The marker is made in r12 from two halves, so that no memory holds it whole.
  const uint64_t hi = kMarker & 0xffffffff00000000ull, lo = kMarker & 0xffffffffull;
  __asm__ volatile(
      "mov %0, %%r12\n\t"
      "or %1, %%r12\n\t"
      "movl $1, %2\n\t"
      "1: pause\n\t"
      "cmpl $0, %3\n\t"
      "je 1b\n\t"
      "xor %%r12, %%r12\n\t"
      :
      : "r"(hi), "r"(lo), "m"(g_spinning), "m"(g_stop)
      : "r12", "memory");
  return nullptr;
}

struct Reader {
  int fd;
  long result = 0;
  int error = 0;
  char byte = 0;
};

void* BlockInRead(void* arg) {
  auto* r = static_cast<Reader*>(arg);
  r->result = read(r->fd, &r->byte, 1);
  r->error = r->result < 0 ? errno : 0;
  return nullptr;
}

TEST(ThreadRegistersTest, ReadsASpinningThreadsRegisterAndLetsABlockedReadGoOn) {
  pthread_t spinner, reader_thread;
  ASSERT_EQ(pthread_create(&spinner, nullptr, SpinWithMarkerInR12, nullptr), 0);
  while (g_spinning.load() == 0) {
  }
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  Reader reader{fds[0]};
  ASSERT_EQ(pthread_create(&reader_thread, nullptr, BlockInRead, &reader), 0);
  usleep(50000);  // into its read()

  HelperStack stack;
  ThreadRegisters regs[8];
  const RegistersRead got = ReadOtherThreadsRegisters(regs, 8, stack.base(), 5000);
  EXPECT_EQ(got.read, 2u);
  EXPECT_EQ(got.failed, 0u);
  const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
  bool marker = false;
  for (size_t i = 0; i < got.read; ++i) {
    EXPECT_NE(regs[i].tid, self);
    for (uint64_t w : regs[i].words) marker = marker || (regs[i].tid == g_spinner_tid.load() && w == kMarker);
  }
  EXPECT_TRUE(marker) << "the spinning thread's r12 was not read";

  ASSERT_EQ(write(fds[1], "x", 1), 1);
  pthread_join(reader_thread, nullptr);
  EXPECT_EQ(reader.result, 1) << "read() failed with errno " << reader.error;
  EXPECT_EQ(reader.byte, 'x');
  g_stop = 1;
  pthread_join(spinner, nullptr);
  close(fds[0]);
  close(fds[1]);
}

TEST(ThreadRegistersTest, NoOtherThreadNothingRead) {
  HelperStack stack;
  ThreadRegisters regs[4];
  const RegistersRead got = ReadOtherThreadsRegisters(regs, 4, stack.base(), 5000);
  EXPECT_EQ(got.read, 0u);
  EXPECT_EQ(got.failed, 0u);
}

}  // namespace
}  // namespace poolscope
