// File: interpose/thread_state.cc
#include "interpose/thread_state.h"

namespace poolscope {

__thread ThreadState t_state __attribute__((tls_model("initial-exec"))) = {};

void (*g_pending_signal_report)(int sig) = nullptr;

__attribute__((noinline, cold)) void RunPendingSignal(ThreadState& ts) {
  const int sig = ts.pending_signal;
  ts.pending_signal = 0;
  if (g_pending_signal_report != nullptr) g_pending_signal_report(sig);
}

}  // namespace poolscope
