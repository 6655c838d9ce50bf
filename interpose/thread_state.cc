// File: interpose/thread_state.cc
#include "interpose/thread_state.h"

namespace poolscope {

__thread ThreadState t_state __attribute__((tls_model("initial-exec"))) = {};

}  // namespace poolscope
